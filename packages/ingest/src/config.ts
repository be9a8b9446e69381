/**
 * Configuration of one pool's intake (the indexer's `indexer.pools[]` entries and
 * the decision service's local pools share it), and the intake settings, bounds and
 * recovery both services take under the same keys.
 */
import { POOL_NAME_PATTERN } from '@vantage/protocol';
import { s, type DeepReadonly, type Static } from '@vantage/runtime';

const workerSchema = s.object({
  /** Dynamo worker instance id, decimal u64 (exact: strings, never JSON numbers). */
  workerId: s.string({ pattern: '^[0-9]{1,20}$' }),
  totalKvBlocks: s.integer({ minimum: 1, default: 16384 }),
  maxNumBatchedTokens: s.integer({ minimum: 1, default: 8192 }),
  maxNumSeqs: s.integer({ minimum: 1, default: 256 }),
  dpStartRank: s.integer({ minimum: 0, default: 0 }),
  dpSize: s.integer({ minimum: 1, default: 1 }),
  schedulable: s.boolean({ default: true }),
});

const selectionSchema = s.object({
  /** Which generation of Dynamo's cost to reproduce. */
  formula: s.enum(['overlap_weight', 'prefill_load_scale'] as const, { default: 'prefill_load_scale' }),
  overlapScoreWeight: s.number({ minimum: 0, default: 1 }),
  overlapScoreCredit: s.number({ minimum: 0, maximum: 1, default: 1 }),
  prefillLoadScale: s.number({ minimum: 0, default: 1 }),
  decodeActiveRequestWeight: s.number({ minimum: 0, default: 0 }),
  temperature: s.number({ minimum: 0, default: 0 }),
});

const discoverySchema = s.object({
  /**
   * Where this pool's workers are listed: `none` (configuration and the registration subject only),
   * `file` (Dynamo's `DYN_DISCOVERY_BACKEND=file`, the directory of `DYN_FILE_KV`), or `etcd`
   * (Dynamo's production default; `endpoints`). Kubernetes discovery is not supported yet.
   */
  backend: s.enum(['none', 'file', 'etcd'] as const, { default: 'none' }),
  /** `file`: the `DYN_FILE_KV` directory the workers were started with. */
  dir: s.string({ default: '' }),
  /** `etcd`: client URLs, e.g. `http://127.0.0.1:2379` (Dynamo's `ETCD_ENDPOINTS`). */
  endpoints: s.array(s.string({ minLength: 1 }), { default: [] }),
  /** `etcd`: a key prefix in front of Dynamo's `v1/…` keys, for an etcd shared under a prefix (Dynamo 1.6.1 writes none). */
  root: s.string({ default: '' }),
  /** `etcd` with authentication on: the user (Dynamo's `ETCD_AUTH_USERNAME`), with `passwordFile`; empty for none. */
  username: s.string({ default: '' }),
  /** File holding that user's password (one line; Dynamo's `ETCD_AUTH_PASSWORD`). Secrets come from files only. */
  passwordFile: s.string({ default: '' }),
  /** `etcd` over TLS: PEM files of the CA, and of a client certificate and key (Dynamo's `ETCD_AUTH_CA`, `ETCD_AUTH_CLIENT_CERT`, `ETCD_AUTH_CLIENT_KEY`); empty for none. */
  caFile: s.string({ default: '' }),
  certFile: s.string({ default: '' }),
  keyFile: s.string({ default: '' }),
  /** `file`: how often the directory is read. */
  pollMs: s.integer({ minimum: 10, default: 200 }),
});

/** Where a pool's messages come from: Dynamo's subjects, discovery, formats and cost (every pool entry but its name and block size). */
export const poolSourceProperties = {
  /** Dynamo namespace, component and endpoint whose subjects carry this pool's events. */
  namespace: s.string({ minLength: 1, default: 'dynamo' }),
  component: s.string({ minLength: 1, default: 'backend' }),
  endpoint: s.string({ minLength: 1, default: 'generate' }),
  /** Dynamo's discovery store: workers, capacity (model cards), subjects and publisher ids. */
  discovery: discoverySchema,
  /**
   * How KV events arrive: `event_plane` (msgpack envelopes on core NATS, Dynamo's default since early 2026),
   * `legacy_json` (JSON RouterEvent on `...kv_events`), or `jetstream` (JSON RouterEvent in the durable stream).
   */
  kvEvents: s.enum(['event_plane', 'legacy_json', 'jetstream'] as const, { default: 'event_plane' }),
  /** Also listen to `active_sequences_events` from Dynamo's routers so their bookings count. */
  dynamoRouterSync: s.boolean({ default: true }),
  selection: selectionSchema,
  /** Workers known from configuration (never expire); others register on `vantage.v1.workers.{pool}`. */
  workers: s.array(workerSchema, { default: [] }),
};

export const poolSchema = s.object({
  /** Our name for the pool (a subject token): `vantage.v1.observe.{name}`. */
  name: s.string({ pattern: POOL_NAME_PATTERN }),
  /** Tokens per KV block of this pool's engines; with discovery, the model cards' `kv_cache_block_size` wins. */
  blockSize: s.integer({ minimum: 1, maximum: 4096, default: 64 }),
  ...poolSourceProperties,
});

/**
 * Recovery of a suspect worker from its own local index (Dynamo's `worker_kv_query_source_*`
 * endpoint, over Dynamo's TCP request plane), for workers whose discovery entry names one.
 */
const recoverySchema = s.object({
  enabled: s.boolean({ default: true }),
  /** Interface of the response-stream server the workers dial back (Dynamo's DYN_TCP_RESPONSE_STREAM_HOST). */
  responseHost: s.string({ minLength: 1, default: '127.0.0.1' }),
  /** Its port; 0 picks a free one. */
  responsePort: s.integer({ minimum: 0, maximum: 65535, default: 0 }),
  /** Host the workers are told to dial, when not `responseHost` (e.g. this machine's address when listening on 0.0.0.0). */
  advertiseHost: s.string({ default: '' }),
  /** Deadline of one query. */
  timeoutMs: s.integer({ minimum: 100, default: 10_000 }),
  /** First retry delay after a failure; doubles per failure up to `maxBackoffMs` (jitter ±25 %). */
  initialBackoffMs: s.integer({ minimum: 10, default: 500 }),
  maxBackoffMs: s.integer({ minimum: 10, default: 30_000 }),
  /** Events kept per worker while its query is out (applied again on top of the dump); past it, retried. */
  maxBufferedEvents: s.integer({ minimum: 1, default: 100_000 }),
  /** Largest frame accepted from a worker (a tree dump). */
  maxFrameBytes: s.integer({ minimum: 1024, default: 256 * 1024 * 1024 }),
  /** How often due queries are issued. */
  pumpMs: s.integer({ minimum: 10, default: 100 }),
  /** Queries out at once, across the pool's workers (the rest wait: at start every listed worker is recovered). */
  maxInFlight: s.integer({ minimum: 1, default: 16 }),
  /**
   * Also recover every worker once when discovery first lists its kv-events publisher (as
   * Dynamo's router does): covers blocks stored while this indexer was not listening by a worker
   * that has been quiet since. Off, only suspicion (a gap, an unknown parent) triggers it.
   */
  onListing: s.boolean({ default: true }),
});

/**
 * Bounds on what any publisher can make a pool hold. A message past one is refused (nothing
 * applied), counted in `{prefix}_limit_hits_total{limit}` and logged (rate-limited).
 */
const limitsSchema = s.object({
  /** dp ranks per worker: a registration's dpSize, and ranks seen in events. */
  dpRanksPerWorker: s.integer({ minimum: 1, maximum: 4096, default: 1024 }),
  /** Distinct workers per pool. */
  workersPerPool: s.integer({ minimum: 1, maximum: 4096, default: 1024 }),
  /** (worker, dp rank) pairs per pool: at most what one observe reply carries (1,024 JSON records fit NATS's default 1 MiB payload; the binary reply's decoder takes at most 4,096). */
  ranksPerPool: s.integer({ minimum: 1, maximum: 4096, default: 1024 }),
  /** Open bookings per (worker, dp rank); they still expire after bookingTtlMs. */
  bookingsPerRank: s.integer({ minimum: 1, default: 16_384 }),
  /** Open bookings per pool. */
  bookingsPerPool: s.integer({ minimum: 1, default: 65_536 }),
  /** Messages held while the snapshot is restored (core NATS: dropped past it; JetStream waits). */
  heldDuringRestore: s.integer({ minimum: 16, default: 65_536 }),
});

/**
 * The intake settings shared by a process's pools: the indexer's `indexer.*` and the decision
 * service's `decision.local.*` (same keys, defaults and bounds, so the same variables' suffixes).
 */
export const intakeProperties = {
  /** Bound on queued, not yet applied messages per pool; past it core-NATS messages are dropped and counted. */
  queueDepth: s.integer({ minimum: 16, default: 65536 }),
  /** Messages applied per turn of the event loop before requests (observe, route) get a turn. */
  applyBatch: s.integer({ minimum: 1, default: 512 }),
  bookingTtlMs: s.integer({ minimum: 1000, default: 300_000 }),
  /** Workers silent (no events, load or registration) for longer are removed. */
  workerTtlMs: s.integer({ minimum: 1000, default: 60_000 }),
  housekeepingMs: s.integer({ minimum: 50, default: 1000 }),
  /** JetStream mode: the durable consumers' name (the decision service's: a prefix, `-{pool}` appended); empty: derived from the host or instance id. */
  durableName: s.string({ pattern: '^[A-Za-z0-9_-]*$', default: '' }),
  recovery: recoverySchema,
  limits: limitsSchema,
};

/** JetStream mode: /healthz turns unhealthy once consumption has been stopped this long (indexer: under `health`). */
export const jetstreamStalledMs = s.integer({ minimum: 100, default: 15_000 });
/** At most one log line per kind of rejection (pool, source, reason) this often; the counters count every one. */
export const rejectionLogIntervalMs = s.integer({ minimum: 0, default: 10_000 });

export type PoolConfig = DeepReadonly<Static<typeof poolSchema>>;
/** The bounds `limitsSchema` names; PoolState takes all but `heldDuringRestore`. */
export type LimitsConfig = DeepReadonly<Static<typeof limitsSchema>>;
export type RecoveryConfig = DeepReadonly<Static<typeof recoverySchema>>;
