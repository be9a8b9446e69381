// Kafka glue over kafkajs (README.md, "Kafka"): a verified connection, kafkajs logs routed into
// pino, idempotent topic creation, idempotent producers, failures as catalogue errors.

import kafkajs from 'kafkajs';
import type { Admin, Consumer, ConsumerConfig, KafkaConfig, LogEntry, Producer } from 'kafkajs';
import type { Logger } from 'pino';
import type { BaseConfig } from './config';
import { errorMessage, VantageError, type ErrorCode } from './errors';
import type { DeepReadonly } from './schema';
import { redactUrl } from './secrets';
import { classifyKafkaConnectError, kafkaSecurityOptions, type KafkaSecuritySettings } from './security';

// kafkajs warns at every producer creation that its default partitioner
// changed in v2. We pass the partitioner explicitly (below), so the warning is noise.
process.env['KAFKAJS_NO_PARTITIONER_WARNING'] ??= '1';

const { Kafka: KafkaClass, Partitioners, logLevel: KafkaLogLevel } = kafkajs;

/** `kafka.*` as the schema has it (an empty `clientId` means `fallbackClientId`), security fields optional. */
export type KafkaSettings = KafkaSecuritySettings & Pick<DeepReadonly<BaseConfig['kafka']>, 'brokers' | 'clientId' | 'connectionTimeoutMs' | 'requestTimeoutMs' | 'retries'>;

export interface TopicSpec {
  topic: string;
  partitions: number;
  /** Default 1 (single-broker development and test clusters); production configs set 3. */
  replicationFactor?: number;
  /** Topic configs, e.g. `{ 'cleanup.policy': 'compact', 'retention.ms': '604800000' }`. */
  config?: Record<string, string>;
}

export interface ProducerOptions {
  /** Makes the producer transactional; must be stable across restarts of the same logical writer. */
  transactionalId?: string;
  transactionTimeoutMs?: number;
}

export interface VantageProducer {
  /** The kafkajs producer, for transactions (`raw.transaction()`). */
  readonly raw: Producer;
  disconnect(): Promise<void>;
}

export interface KafkaClient {
  /** Connected admin client, shared. */
  readonly admin: Admin;
  ensureTopics(specs: readonly TopicSpec[]): Promise<void>;
  createProducer(opts?: ProducerOptions): Promise<VantageProducer>;
  /** A connected consumer, disconnected by `close()`. */
  createConsumer(cfg: ConsumerConfig): Promise<Consumer>;
  /** Disconnects every producer and consumer made here, then the admin client. */
  close(): Promise<void>;
}

/** Wraps a kafkajs error, keeping its own retriable flag when it has one. */
function kafkaError(code: ErrorCode, what: string, e: unknown, details: Record<string, unknown> = {}): VantageError {
  if (e instanceof VantageError) return e;
  const retriable = (e as { retriable?: unknown } | null)?.retriable;
  return new VantageError(code, redactUrl(`${what}: ${errorMessage(e)}`), {
    cause: e,
    details,
    ...(typeof retriable === 'boolean' ? { retryable: retriable } : {}),
  });
}

/** kafkajs log level matching a pino level (error for fatal), so kafkajs does not build entries pino would drop. */
const KAFKA_LEVEL_FOR: Readonly<Record<string, number>> = {
  trace: KafkaLogLevel.DEBUG,
  debug: KafkaLogLevel.DEBUG,
  info: KafkaLogLevel.INFO,
  warn: KafkaLogLevel.WARN,
  silent: KafkaLogLevel.NOTHING,
};

/** And back: the pino method for a kafkajs entry's level (debug for the rest). */
const PINO_METHOD_FOR: Readonly<Record<number, 'error' | 'warn' | 'info'>> = { [KafkaLogLevel.ERROR]: 'error', [KafkaLogLevel.WARN]: 'warn', [KafkaLogLevel.INFO]: 'info' };

function logCreator(log: Logger) {
  const child = log.child({ component: 'kafkajs' });
  return () =>
    ({ namespace, level, log: entry }: LogEntry): void => {
      const { message: msg, timestamp: _ts, ...extra } = entry;
      child[PINO_METHOD_FOR[level] ?? 'debug']({ namespace, ...extra }, msg);
    };
}

/**
 * The kafkajs client options for these settings (brokers, client id, timeouts,
 * retries, TLS and SASL with the password read from its file). For tools that
 * use kafkajs directly (`vantage replay`, test readers); services use connectKafka.
 */
export function kafkaClientConfig(cfg: KafkaSettings, fallbackClientId = 'vantage'): KafkaConfig & { summary: { ssl: string; sasl: string } } {
  const { summary, ...security } = kafkaSecurityOptions(cfg);
  return {
    brokers: [...cfg.brokers],
    clientId: cfg.clientId === '' ? fallbackClientId : cfg.clientId,
    connectionTimeout: cfg.connectionTimeoutMs,
    requestTimeout: cfg.requestTimeoutMs,
    retry: { retries: cfg.retries },
    ...security,
    summary,
  };
}

/** Turns a failed connect into KAFKA_AUTH_FAILED, KAFKA_TLS_FAILED or KAFKA_CONNECT_FAILED naming the brokers and the cause. */
export function kafkaConnectError(what: string, e: unknown, brokers: readonly string[], details: Record<string, unknown> = {}): VantageError {
  if (e instanceof VantageError) return e;
  const why = classifyKafkaConnectError(e);
  const err = kafkaError(why.code, `${what} at ${brokers.join(',')}`, e, { brokers, cause: why.cause, ...details });
  // Credentials and certificates do not fix themselves: never retryable, whatever kafkajs says.
  if (why.code === 'KAFKA_CONNECT_FAILED') return err;
  return new VantageError(why.code, `${err.message} (${why.hint})`, { cause: e, details: err.details, retryable: false });
}

/**
 * Creates the client and verifies the cluster answers (admin connect +
 * describeCluster), or throws KAFKA_CONNECT_FAILED naming the brokers.
 */
export async function connectKafka(cfg: KafkaSettings, log: Logger, fallbackClientId = 'vantage'): Promise<KafkaClient> {
  const { summary, ...clientCfg } = kafkaClientConfig(cfg, fallbackClientId);
  const kafka = new KafkaClass({
    ...clientCfg,
    logLevel: KAFKA_LEVEL_FOR[log.level] ?? KafkaLogLevel.ERROR,
    logCreator: logCreator(log),
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    log.info({ brokers: cfg.brokers, clusterId: cluster.clusterId, nodes: cluster.brokers.length, ssl: summary.ssl, sasl: summary.sasl }, 'kafka connected');
  } catch (e) {
    await admin.disconnect().catch(() => {});
    throw kafkaConnectError('cannot connect to Kafka', e, cfg.brokers);
  }

  const producers = new Set<Producer>();
  const consumers = new Set<Consumer>();

  return {
    admin,

    async ensureTopics(specs) {
      try {
        const existing = new Set(await admin.listTopics());
        const missing = specs.filter((t) => !existing.has(t.topic));
        if (missing.length > 0) {
          await admin.createTopics({
            waitForLeaders: true,
            topics: missing.map((t) => ({
              topic: t.topic,
              numPartitions: t.partitions,
              replicationFactor: t.replicationFactor ?? 1,
              configEntries: Object.entries(t.config ?? {}).map(([name, value]) => ({ name, value })),
            })),
          });
          log.info({ topics: missing.map((t) => t.topic) }, 'kafka topics created');
        }
        const present = specs.filter((t) => existing.has(t.topic));
        if (present.length === 0) return;
        const meta = await admin.fetchTopicMetadata({ topics: present.map((t) => t.topic) });
        for (const t of present) {
          const have = meta.topics.find((m) => m.name === t.topic)?.partitions.length;
          // Not changed automatically: adding partitions remaps keys to
          // partitions and breaks per-session ordering for in-flight sessions.
          if (have !== undefined && have !== t.partitions) {
            log.warn({ topic: t.topic, partitions: have, wanted: t.partitions }, 'kafka topic exists with a different partition count; left unchanged');
          }
        }
      } catch (e) {
        throw kafkaError('KAFKA_ADMIN_FAILED', `cannot ensure topics ${specs.map((t) => t.topic).join(',')}`, e, {
          topics: specs.map((t) => t.topic),
        });
      }
    },

    async createProducer(opts = {}) {
      const raw = kafka.producer({
        // Java-compatible murmur2 partitioning, so our tools and Kafka's own
        // agree on which partition a session key lands in.
        createPartitioner: Partitioners.DefaultPartitioner,
        // Idempotence with one in-flight request: broker-side dedup of
        // retries and no reordering on retry, which the outcome log relies on.
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        ...(opts.transactionalId === undefined ? {} : { transactionalId: opts.transactionalId }),
        ...(opts.transactionTimeoutMs === undefined ? {} : { transactionTimeout: opts.transactionTimeoutMs }),
      });
      try {
        await raw.connect();
      } catch (e) {
        throw kafkaConnectError('cannot connect Kafka producer', e, cfg.brokers);
      }
      producers.add(raw);
      return {
        raw,
        async disconnect() {
          producers.delete(raw);
          await raw.disconnect();
        },
      };
    },

    async createConsumer(consumerCfg) {
      const c = kafka.consumer(consumerCfg);
      try {
        await c.connect();
      } catch (e) {
        throw kafkaConnectError(`cannot connect Kafka consumer ${consumerCfg.groupId}`, e, cfg.brokers, { groupId: consumerCfg.groupId });
      }
      consumers.add(c);
      return c;
    },

    async close() {
      const results = await Promise.allSettled([
        ...[...consumers].map((c) => c.disconnect()),
        ...[...producers].map((p) => p.disconnect()),
      ]);
      consumers.clear();
      producers.clear();
      await admin.disconnect();
      const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed.length > 0) throw kafkaError('UPSTREAM_UNAVAILABLE', `${failed.length} Kafka client(s) failed to disconnect`, failed[0]?.reason);
    },
  };
}
