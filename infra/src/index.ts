export { REPO_ROOT, INFRA_DIR, RUN_DIR, BIN_DIR } from './paths';
export { freePort, tcpOpen, waitFor, sleep } from './exec';
export { ensureNatsServer, ensureKafkaJars, kafkaLibDir, NATS_SERVER_VERSION, KAFKA_VERSION } from './install';
export { natsBroker, kafkaBroker, KAFKA_CLUSTER_ID } from './brokers';
export type { BrokerProcess, NatsBroker, KafkaBroker, NatsOptions, KafkaOptions } from './brokers';
export { localBrokers, brokersUp, brokersDown, brokersStatus } from './local';
export type { LocalBrokers, BrokerEndpoints } from './local';
