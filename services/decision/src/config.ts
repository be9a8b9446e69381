/**
 * The decision service's configuration (on top of the runtime's common base).
 * File: `VANTAGE_CONFIG=decision.json`; every leaf also has an environment
 * variable, e.g. `VANTAGE_DECISION_PARAMETER_SET_FILE=/etc/vantage/params.json`,
 * `VANTAGE_DECISION_POOLS_EFFICIENT_MODEL=m-8b`, `VANTAGE_DECISION_POOLS_EFFICIENT_POOL=efficient`.
 */
import { intakeProperties, jetstreamStalledMs, poolSourceProperties, rejectionLogIntervalMs } from '@vantage/ingest';
import { POOL_NAME_PATTERN } from '@vantage/protocol';
import { baseConfigSchema, s, type DeepReadonly, type Static } from '@vantage/runtime';

const roleSchema = s.object({
  /** Served model name; must equal the parameter set's `models.<role>.name` for the rule to act. */
  model: s.string({ minLength: 1 }),
  /** Pool serving it: `vantage.v1.bookings.{pool}`, `vantage.v1.lifecycle.{pool}`, `vantage.v1.observe.{pool}` (remote), ... */
  pool: s.string({ pattern: POOL_NAME_PATTERN }),
  /** Tokens per KV block of this pool's engines (to hash token-id prompts; checked against the observation's). */
  blockSize: s.integer({ minimum: 1, maximum: 4096, default: 64 }),
  /**
   * `local`: this process holds the pool's state (a PoolState fed by the same intake as an indexer's,
   * `@vantage/ingest`) and observes it in-process; `remote`: it asks the pool's indexers
   * (`vantage.v1.observe.{pool}`) on every route, for pools too large for every replica to hold.
   */
  source: s.enum(['local', 'remote'] as const, { default: 'local' }),
  /** Local pools: where the pool's messages come from, as an indexer's pool entry says (namespace, component, discovery, kvEvents, ...). */
  ...poolSourceProperties,
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
    /**
     * Remote pools: how long past the parameter set's `gate.maxAgeMs` an observe reply is still waited
     * for. The query's deadline is `maxAgeMs + observeTimeoutMs` (capped by the request's
     * `deadlineMs`): a reply later than `maxAgeMs` is refused by the gate's age check
     * (`fallback_stale_observation`); none by the deadline leaves the candidate `unavailable`.
     */
    observeTimeoutMs: s.integer({ minimum: 1, default: 100 }),
    /** Local pools: the intake every local pool runs (`intakeProperties`: the indexer's settings of the same names). */
    local: s.object({
      ...intakeProperties,
      /** The indexers' snapshot bucket to restore a pool from at start (read only; empty: start empty). */
      snapshotBucket: s.string({ pattern: '^[A-Za-z0-9_-]*$', default: 'vantage-indexer' }),
      jetstreamStalledMs,
    }),
    /** Concurrency bound of route handlers (beyond it: OVERLOADED). */
    maxInFlight: s.integer({ minimum: 1, default: 4096 }),
    /** A reservation whose lifecycle never ends stops counting as local in-flight after this long. */
    inFlightTimeoutMs: s.integer({ minimum: 100, default: 300_000 }),
    /** Reservations tracked at once; past it the oldest is released early (counted: `limit="in_flight_entries"`). */
    inFlightMaxEntries: s.integer({ minimum: 1, default: 100_000 }),
    /** Worker endpoints from registrations, handed to the gateway in route replies: a trust boundary. */
    endpoints: s.object({
      /** Allowed URL schemes. */
      schemes: s.array(s.string({ minLength: 1 }), { minItems: 1, default: ['http', 'https', 'grpc', 'grpcs'] }),
      /** Allowed hosts (`host`, `host:port`, `*.domain`, `*.domain:port`); empty allows any host. */
      allow: s.array(s.string({ minLength: 1 }), { default: [] }),
      /** Endpoints held per pool; a new worker's past it is refused (counted: `limit="endpoints_per_pool"`). */
      maxPerPool: s.integer({ minimum: 1, default: 4096 }),
    }),
    rejectionLogIntervalMs,
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
      /** /healthz is unhealthy while more records than this wait to be published ... */
      unhealthyQueued: s.integer({ minimum: 1, default: 10_000 }),
      /** ... or once publishing has failed without a success for this long. */
      unhealthyFailingMs: s.integer({ minimum: 100, default: 10_000 }),
    }),
  }),
});

export type DecisionSettings = Static<typeof decisionConfigSchema>;
export type DecisionSection = DeepReadonly<DecisionSettings>['decision'];
