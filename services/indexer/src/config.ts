/**
 * The indexer's configuration (on top of the runtime's common base). A file
 * (`VANTAGE_CONFIG=path.json`) is the usual way to list pools; every leaf can
 * also be set by environment, e.g. `VANTAGE_INDEXER_POOLS='[{"name":"efficient",...}]'`.
 */
import { intakeProperties, jetstreamStalledMs, poolSchema, rejectionLogIntervalMs } from '@vantage/ingest';
import { baseConfigSchema, s, type Static } from '@vantage/runtime';

export const indexerConfigSchema = s.extend(baseConfigSchema, {
  indexer: s.object({
    pools: s.array(poolSchema, { minItems: 1, default: [{ name: 'default' } as never] }),
    ...intakeProperties,
    snapshot: s.object({
      /** 0 disables snapshots. */
      intervalMs: s.integer({ minimum: 0, default: 30_000 }),
      /** JetStream object store bucket; one object per pool. */
      bucket: s.string({ pattern: '^[A-Za-z0-9_-]+$', default: 'vantage-indexer' }),
      /** JetStream replicas of the bucket, set when it is created (3 on a three-node production cluster). */
      replicas: s.integer({ minimum: 1, maximum: 5, default: 1 }),
    }),
    /** Concurrency bound of observe handlers (beyond it: OVERLOADED). */
    maxInFlight: s.integer({ minimum: 1, default: 4096 }),
    rejectionLogIntervalMs,
    health: s.object({ jetstreamStalledMs }),
  }),
});

/** The configuration as validated (mutable shape, for runService's type parameter). */
export type IndexerSettings = Static<typeof indexerConfigSchema>;
