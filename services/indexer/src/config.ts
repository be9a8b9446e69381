/**
 * The indexer's configuration (on top of the runtime's common base). A file
 * (`VANTAGE_CONFIG=path.json`) is the usual way to list pools; every leaf can
 * also be set by environment, e.g. `VANTAGE_INDEXER_POOLS='[{"name":"efficient",...}]'`.
 */
import { limitsSchema, poolSchema, recoverySchema } from '@vantage/ingest';
import { baseConfigSchema, s, type Static } from '@vantage/runtime';

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
      /** JetStream replicas of the bucket, set when it is created (3 on a three-node production cluster). */
      replicas: s.integer({ minimum: 1, maximum: 5, default: 1 }),
    }),
    /** Name of this replica's durable consumers in JetStream mode (stable across restarts). */
    durableName: s.string({ pattern: '^[A-Za-z0-9_-]*$', default: '' }),
    /** Concurrency bound of observe handlers (beyond it: OVERLOADED). */
    maxInFlight: s.integer({ minimum: 1, default: 4096 }),
    recovery: recoverySchema,
    limits: limitsSchema,
    /** At most one log line per (pool, source, reason) this often; the counters count every message. */
    rejectionLogIntervalMs: s.integer({ minimum: 0, default: 10_000 }),
    health: s.object({
      /** JetStream mode: /healthz is unhealthy once consumption has been stopped this long. */
      jetstreamStalledMs: s.integer({ minimum: 100, default: 15_000 }),
    }),
  }),
});

/** The configuration as validated (mutable shape, for runService's type parameter). */
export type IndexerSettings = Static<typeof indexerConfigSchema>;
