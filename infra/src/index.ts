export { REPO_ROOT, INFRA_DIR, RUN_DIR, BIN_DIR } from './paths';
export { freePort, tcpOpen, waitFor, sleep, processCpuUs, processCpuTotalUs, endAtExit, forgetAtExit } from './exec';
export { ensureNatsServer, ensureKafkaJars, ensureEtcd, etcdVersionOf, kafkaLibDir, NATS_SERVER_VERSION, KAFKA_VERSION, ETCD_VERSION, ETCD_MODULE_DIR } from './install';
export { natsBroker, kafkaBroker, etcdServer, KAFKA_CLUSTER_ID } from './brokers';
export type { BrokerProcess, NatsBroker, KafkaBroker, EtcdServer, NatsOptions, KafkaOptions, EtcdOptions } from './brokers';
export { localBrokers, localSecureDeployment, brokersUp, brokersDown, brokersStatus, SECURE_DIR } from './local';
export type { LocalBrokers, BrokerEndpoints, BrokersUpOptions } from './local';
export { Stack, stackServices } from './stack';
export type { StackOptions, PoolSpec, ServiceSpec, RunningService } from './stack';
export { runJob, defaultJobConfig, calibrationParameterSet, writeParameterSet, waitForParameterSet, runNode, RECORD_VARIANT, OUT_DIR } from './job';
export type { JobConfig, JobContext, JobResult } from './job';
export {
  dynamoPython,
  dynamoEnv,
  discoveredInstanceIds,
  etcdInstanceIds,
  startMocker,
  startDynamoDriver,
  startSelectService,
  startZmqKvPublisher,
  DYNAMO_DRIVER,
  ZMQ_KV_PUBLISHER,
} from './dynamo';
export type {
  EtcdDiscoveryTarget,
  MockerOptions,
  MockerProcess,
  DynamoProcess,
  DynamoDriver,
  DriverOptions,
  GenerateResult,
  OverlapScores,
  BestWorker,
  PotentialLoad,
  SelectServiceOptions,
  SelectServiceProcess,
  VllmKvEvent,
  ZmqKvPublisher,
} from './dynamo';
export {
  ensureTlsMaterial,
  JOB_LAYOUT,
  KAFKA_USERS,
  secureDeployment,
  kafkaScramFormatArgs,
  kafkaSecureProperties,
  natsServerConfig,
  randomSecret,
  rolePermissions,
  writeSecretFile,
} from './secure';
export type {
  KafkaScramMechanism,
  KafkaSecurity,
  NatsServerConfigOptions,
  NatsUserAuth,
  Permission,
  RolePermissions,
  SecureDeployment,
  SecureLayout,
  SecurePool,
  TlsMaterial,
} from './secure';
