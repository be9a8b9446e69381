// @vantage/runtime: the glue every vantage service shares. See README.md.

export { s } from './schema';
export type { DeepReadonly, Static } from './schema';
export { baseConfigSchema, loadConfig, toolSettings } from './config';
export { toVantageError, VantageError, writeErrorHeaders } from './errors';
export type { ErrorCode } from './errors';
export { createLogger, flushLogger } from './logger';
export type { Logger } from './logger';
export { LazyCounter, LazyGauge, LazyHistogram } from './lazy-metrics';
export { connectNats, ensureDurableConsumer, ensureStream, natsConnected, request } from './nats';
export type { NatsConnection, NatsSettings } from './nats';
export { createResponder } from './responder';
export type { Endpoint, Responder } from './responder';
export { Outbox } from './outbox';
export { Requester } from './requester';
export { connectKafka, kafkaClientConfig, kafkaConnectError } from './kafka';
export { redactUrl } from './secrets';
export { readBytes, readSecretFile } from './security';
export type { KafkaClient, KafkaSettings, VantageProducer } from './kafka';
export { OutageClock, RateLimitedLog } from './guard';
export type { HealthResult } from './ops';
export { runService } from './service';
export type { RunningService, ServiceContext } from './service';
