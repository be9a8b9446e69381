// @vantage/runtime: the glue every vantage service shares. See README.md.

export { s } from './schema';
export type { DeepReadonly, JsonSchema, ObjectSchema, Static, TSchema } from './schema';

export { baseConfigSchema, coerceEnvValue, deepFreeze, KAFKA_SASL_MECHANISMS, loadConfig, LOG_LEVELS, toolSettings } from './config';
export type { BaseConfig, ConfigProblem, KafkaSaslMechanism, LoadConfigOptions, LogLevel } from './config';

export {
  ERROR_CODES,
  errorLabel,
  HEADER_SERVICE_ERROR,
  HEADER_SERVICE_ERROR_CODE,
  HEADER_VANTAGE_ERROR_CODE,
  HEADER_VANTAGE_RETRYABLE,
  isErrorCode,
  isVantageError,
  readErrorHeaders,
  toVantageError,
  VantageError,
  writeErrorHeaders,
} from './errors';
export type { ErrorCode, ErrorCodeInfo, HeaderReader, HeaderWriter, VantageErrorOptions } from './errors';

export { createLogger, defaultInstanceId, flushLogger } from './logger';
export type { Logger, LoggerOptions } from './logger';

export { runtimeMetrics } from './metrics';
export { HistogramSeries, LazyCounter, LazyGauge, LazyHistogram } from './lazy-metrics';
export type { Series } from './lazy-metrics';
export type { RuntimeMetrics } from './metrics';

export { connectNats, ensureDurableConsumer, ensureStream, natsConnected, natsDisconnectedForMs, request } from './nats';
export type { ConnectNatsOptions, DurableConsumerSpec, Msg, MsgHdrs, NatsConnection, NatsSettings, RequestOptions, StreamSpec } from './nats';

export { createResponder } from './responder';
export type { Endpoint, EndpointOptions, RequestHandler, Responder, ResponderOptions } from './responder';
export { Outbox } from './outbox';
export { Requester } from './requester';

export { connectKafka, kafkaClientConfig, kafkaConnectError, kafkaError } from './kafka';
export { hasUrlUserInfo, isSecretKey, REDACTED, redactSecrets, redactUrl, secretLogPaths } from './secrets';
export {
  classifyKafkaConnectError,
  classifyNatsConnectError,
  kafkaSecurityOptions,
  kafkaSecurityProblems,
  natsSecurityOptions,
  natsSecurityProblems,
  natsServers,
  natsServersForClient,
  readSecretFile,
  throwIfProblems,
} from './security';
export type { ConnectFailure, KafkaSecuritySettings, NatsSecurityOptions, NatsSecuritySettings, NatsTlsSettings, SettingProblem } from './security';
export type { KafkaClient, KafkaSettings, ProducerOptions, TopicSpec, VantageProducer } from './kafka';

export { createShutdown, SHUTDOWN_PHASES } from './shutdown';
export type { Shutdown, ShutdownOptions, ShutdownPhase, ShutdownReport, ShutdownState, ShutdownStep } from './shutdown';

export { createRegistry, startOpsServer } from './ops';
export { OutageClock, RateLimitedLog } from './guard';
export type { RateLimitedLogOptions } from './guard';
export type { HealthCheck, HealthResult, OpsServer, OpsServerOptions } from './ops';

export { EXIT_CONFIG_INVALID, runService } from './service';
export type { RunningService, ServiceContext, ServiceSpec } from './service';
