/**
 * The fleet's configuration (on top of the runtime's common base): keys, environment variables and
 * defaults in README.md, "Configuration".
 */
import { POOL_NAME_PATTERN } from '@vantage/protocol';
import { baseConfigSchema, s, VantageError, type DeepReadonly, type Static } from '@vantage/runtime';
import { U64_MAX, type WorkerId } from '@vantage/types';

const fleetPoolSchema = s.object({
  /** Our pool name (one subject token): `vantage.v1.workers.{name}`, `vantage.v1.fleet.generate.{name}.{workerId}`. */
  name: s.string({ pattern: POOL_NAME_PATTERN }),
  /** Engines (one Dynamo worker each, dp rank 0). */
  workers: s.integer({ minimum: 1, maximum: 256, default: 2 }),
  /** Dynamo namespace and component the workers publish under (as the indexer's pool config says). */
  namespace: s.string({ minLength: 1, default: 'dynamo' }),
  component: s.string({ minLength: 1, default: 'backend' }),
  /** Served model name advertised in registrations; empty = the pool name. */
  model: s.string({ default: '' }),
  blockSize: s.integer({ minimum: 1, maximum: 4096, default: 64 }),
  /** Step-time factor over Dynamo's mocker polynomial: 1 = mocker speed, 0.6 = 40 % slower (a bigger model). */
  speed: s.number({ minimum: 0.001, maximum: 1000, default: 1 }),
  numGpuBlocks: s.integer({ minimum: 1, default: 16_384 }),
  maxNumBatchedTokens: s.integer({ minimum: 1, default: 8192 }),
  maxNumSeqs: s.integer({ minimum: 1, default: 256 }),
  /**
   * Explicit worker ids (decimal u64 strings), one per worker. Empty: generated
   * (see `workerIdsFor`), odd-numbered workers at or above 2^63.
   */
  workerIds: s.array(s.string({ pattern: '^[0-9]{1,20}$' }), { default: [] }),
});

export const fleetConfigSchema = s.extend(baseConfigSchema, {
  fleet: s.object({
    pools: s.array(fleetPoolSchema, { minItems: 1, default: [{ name: 'efficient' } as never] }),
    /** Simulated ms per wall ms: 1 = real time, 10 = ten times faster than real time. */
    timeScale: s.number({ minimum: 0.001, maximum: 100_000, default: 1 }),
    /** First KV `event_id` of every worker: 1 as real workers do (Dynamo's mocker starts at 0). */
    firstEventId: s.integer({ minimum: 0, default: 1 }),
    /** Load reports are published this long (wall ms) after the first change, coalescing changes (Dynamo: ~1 ms). */
    loadDebounceMs: s.integer({ minimum: 0, maximum: 10_000, default: 1 }),
    /** Registration TTL advertised to indexers; heartbeats are sent every ttl / 3. */
    registrationTtlMs: s.integer({ minimum: 1000, default: 10_000 }),
    /** Engine passes per event-loop turn at most, so NATS intake is never starved when the clock runs fast. */
    maxStepsPerTurn: s.integer({ minimum: 1, default: 256 }),
    /** Concurrently accepted requests per worker at most (beyond: `failed` with reason `overloaded`). */
    maxRequestsPerWorker: s.integer({ minimum: 1, default: 4096 }),
  }),
});

export type FleetSettings = Static<typeof fleetConfigSchema>;
export type FleetConfig = DeepReadonly<FleetSettings>;
export type FleetPoolConfig = FleetConfig['fleet']['pools'][number];

/**
 * Worker ids of a pool: the configured ones, or generated (README.md, "What a worker publishes": the
 * layout, why half are past 2^63 and why `incarnation` is drawn anew at every start).
 */
function workerIdsFor(pool: FleetPoolConfig, poolIndex: number, incarnation = 0): WorkerId[] {
  if (!Number.isInteger(incarnation) || incarnation < 0 || incarnation > 0xffff) throw new RangeError(`incarnation must be a 16-bit integer, got ${incarnation}`);
  if (pool.workerIds.length > 0) {
    if (pool.workerIds.length !== pool.workers) {
      throw new VantageError('CONFIG_INVALID', `fleet pool ${pool.name}: ${pool.workerIds.length} workerIds for ${pool.workers} workers`);
    }
    return pool.workerIds.map((s) => {
      const v = BigInt(s);
      if (v > U64_MAX) throw new VantageError('CONFIG_INVALID', `fleet pool ${pool.name}: worker id ${s} is above 2^64-1`);
      return v as WorkerId;
    });
  }
  const inc = BigInt(incarnation) << 40n;
  return Array.from({ length: pool.workers }, (_, i) => (((i % 2 === 1 ? 1n : 0n) << 63n) | inc | (BigInt(poolIndex + 1) << 32n) | BigInt(i + 1)) as WorkerId);
}

/** Every worker id in the fleet, refusing duplicates across pools. */
export function allWorkerIds(cfg: FleetConfig['fleet'], incarnation = 0): WorkerId[][] {
  const seen = new Set<bigint>();
  const names = new Set<string>();
  return cfg.pools.map((p, i) => {
    if (names.has(p.name)) throw new VantageError('CONFIG_INVALID', `fleet pool ${p.name} is configured twice`);
    names.add(p.name);
    const ids = workerIdsFor(p, i, incarnation);
    for (const id of ids) {
      if (seen.has(id)) throw new VantageError('CONFIG_INVALID', `worker id ${id} appears twice in the fleet`);
      seen.add(id);
    }
    return ids;
  });
}
