/**
 * The indexer's configuration (on top of the runtime's common base). A file
 * (`VANTAGE_CONFIG=path.json`) is the usual way to list pools; every leaf can
 * also be set by environment, e.g. `VANTAGE_INDEXER_POOLS='[{"name":"efficient",...}]'`.
 */
import { POOL_NAME_PATTERN } from '@vantage/protocol';
import { baseConfigSchema, s, type DeepReadonly, type Static } from '@vantage/runtime';

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

export const poolSchema = s.object({
  /** Our name for the pool (a subject token): `vantage.v1.observe.{name}`. */
  name: s.string({ pattern: POOL_NAME_PATTERN }),
  /** Tokens per KV block of this pool's engines. */
  blockSize: s.integer({ minimum: 1, maximum: 4096, default: 64 }),
  /** Dynamo namespace and component whose subjects carry this pool's events. */
  namespace: s.string({ minLength: 1, default: 'dynamo' }),
  component: s.string({ minLength: 1, default: 'backend' }),
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
});

export const indexerConfigSchema = s.extend(baseConfigSchema, {
  indexer: s.object({
    pools: s.array(poolSchema, { minItems: 1, default: [{ name: 'default' } as never] }),
    /** Bound on queued, not yet applied messages per pool; past it core-NATS messages are dropped and counted. */
    queueDepth: s.integer({ minimum: 16, default: 65536 }),
    /** Messages applied per turn of the event loop before observe requests get a turn. */
    applyBatch: s.integer({ minimum: 1, default: 512 }),
    bookingTtlMs: s.integer({ minimum: 1000, default: 300_000 }),
    /** Workers silent (no events, load or registration) for longer are removed. */
    workerTtlMs: s.integer({ minimum: 1000, default: 60_000 }),
    housekeepingMs: s.integer({ minimum: 50, default: 1000 }),
    snapshot: s.object({
      /** 0 disables snapshots. */
      intervalMs: s.integer({ minimum: 0, default: 30_000 }),
      /** JetStream object store bucket; one object per pool. */
      bucket: s.string({ pattern: '^[A-Za-z0-9_-]+$', default: 'vantage-indexer' }),
    }),
    /** Name of this replica's durable consumers in JetStream mode (stable across restarts). */
    durableName: s.string({ pattern: '^[A-Za-z0-9_-]*$', default: '' }),
    /** Concurrency bound of observe handlers (beyond it: OVERLOADED). */
    maxInFlight: s.integer({ minimum: 1, default: 4096 }),
  }),
});

/** The configuration as validated (mutable shape, for runService's type parameter). */
export type IndexerSettings = Static<typeof indexerConfigSchema>;
/** The configuration as the service sees it: frozen. */
export type IndexerConfig = DeepReadonly<IndexerSettings>;
export type PoolConfig = IndexerConfig['indexer']['pools'][number];
