/**
 * The decision service's configuration (on top of the runtime's common base).
 * File: `VANTAGE_CONFIG=decision.json`; every leaf also has an environment
 * variable, e.g. `VANTAGE_DECISION_PARAMETER_SET_FILE=/etc/vantage/params.json`,
 * `VANTAGE_DECISION_POOLS_EFFICIENT_MODEL=m-8b`, `VANTAGE_DECISION_POOLS_EFFICIENT_POOL=efficient`.
 */
import { POOL_NAME_PATTERN } from '@vantage/protocol';
import { baseConfigSchema, s, type DeepReadonly, type Static } from '@vantage/runtime';

const POOL = POOL_NAME_PATTERN;

const roleSchema = s.object({
  /** Served model name; must equal the parameter set's `models.<role>.name` for the rule to act. */
  model: s.string({ minLength: 1 }),
  /** Pool (indexer) serving it: `vantage.v1.observe.{pool}`, `vantage.v1.bookings.{pool}`, ... */
  pool: s.string({ pattern: POOL }),
  /** Tokens per KV block of this pool's engines (to hash token-id prompts; checked against the indexer's reply). */
  blockSize: s.integer({ minimum: 1, maximum: 4096, default: 64 }),
});

export const decisionConfigSchema = s.extend(baseConfigSchema, {
  decision: s.object({
    /** Route endpoint and queue group (replicas share it). Defaults are the protocol's; tests use unique ones. */
    subject: s.string({ minLength: 1, default: 'vantage.v1.route' }),
    queueGroup: s.string({ minLength: 1, default: 'vantage-decision' }),
    pools: s.object({ efficient: roleSchema, capable: roleSchema }),
    /** Parameter-set file (schemas/parameter-set.v1.schema.json). Empty: the built-in development default (variant stage). */
    parameterSetFile: s.string({ default: '' }),
    /** Poll the file's mtime this often (0: only SIGHUP reloads). */
    reloadPollMs: s.integer({ minimum: 0, default: 2000 }),
    /** Reload on SIGHUP. */
    reloadOnSighup: s.boolean({ default: true }),
    /** Bound on each indexer observe query; past it the candidate is `unavailable` (a fallback, not an error). */
    observeTimeoutMs: s.integer({ minimum: 1, default: 100 }),
    /**
     * Encoding of the observe queries: `binary` (the protocol's binary request; indexers of this
     * version and later) or `json` (every indexer version: for a rolling upgrade that reaches the
     * decision services before the indexers, whose older versions refuse binary requests).
     */
    observeRequestEncoding: s.enum(['binary', 'json'] as const, { default: 'binary' }),
    /** Concurrency bound of route handlers (beyond it: OVERLOADED). */
    maxInFlight: s.integer({ minimum: 1, default: 4096 }),
    /** A reservation whose lifecycle never ends stops counting as local in-flight after this long. */
    inFlightTimeoutMs: s.integer({ minimum: 100, default: 300_000 }),
    /** After an indexer restored a snapshot, its bookings are incomplete this long (its booking TTL): a `load` suspicion. */
    restoredLoadSuspectMs: s.integer({ minimum: 0, default: 300_000 }),
    /** Expected output tokens sent with bookings (0: unknown). */
    expectedOutputTokens: s.integer({ minimum: 0, default: 0 }),
    records: s.object({
      /** Publish decision records (JetStream, Avro single-object). */
      enabled: s.boolean({ default: true }),
      stream: s.string({ pattern: '^[A-Za-z0-9_-]+$', default: 'VANTAGE_DECISIONS' }),
      subject: s.string({ minLength: 1, default: 'vantage.v1.decisions' }),
      /** Publishes awaiting a JetStream ack at once. */
      maxInFlight: s.integer({ minimum: 1, default: 256 }),
      /** Records waiting to be published (beyond it: the oldest waits block nothing; new ones are counted as dropped and logged). */
      maxQueued: s.integer({ minimum: 1, default: 100_000 }),
      /** Ack timeout of one publish attempt. */
      publishTimeoutMs: s.integer({ minimum: 100, default: 5000 }),
      retryBaseMs: s.integer({ minimum: 1, default: 100 }),
      retryMaxMs: s.integer({ minimum: 1, default: 10_000 }),
      /** Records are sent together every sendDelayMs (0: each at once) ... */
      sendDelayMs: s.integer({ minimum: 0, maximum: 1000, default: 20 }),
      /** ... or with the service's next write once this many are held. */
      sendBatch: s.integer({ minimum: 1, default: 32 }),
    }),
  }),
});

export type DecisionSettings = Static<typeof decisionConfigSchema>;
export type DecisionConfig = DeepReadonly<DecisionSettings>;
export type DecisionSection = DecisionConfig['decision'];
