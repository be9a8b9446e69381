/**
 * The decision service's local pools (README, "Local and remote pools"): per candidate pool
 * configured `source: "local"`, a `PoolState` fed by `@vantage/ingest` (the indexer's intake),
 * observed in-process on every route and booked at once. Until a pool's state is complete its
 * observation is a failed probe with code `POOL_RESTORING` / `POOL_REPLAYING`.
 */
import { headers, type MsgHdrs } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import { sequenceHashes } from '@vantage/hashing';
import { BOOKING_ORIGIN_HEADER, ingestMetrics, PoolIngest, recoveryMetrics, WorkerQueryClient, type IngestMetrics, type PoolConfig } from '@vantage/ingest';
import { observeReplyOf, type ProbeResult } from '@vantage/decision-core';
import type { BookingEvent, WorkerObservation } from '@vantage/protocol';
import type { Role } from '@vantage/rules';
import { RateLimitedLog, type HealthResult, type Logger, type NatsConnection } from '@vantage/runtime';
import type { DecisionSection } from './config';

export const hrUs = (): number => Number(process.hrtime.bigint()) / 1000;

export class LocalPools {
  readonly #pools = new Map<Role, PoolIngest>();
  #housekeeping: NodeJS.Timeout | null = null;
  #querier: WorkerQueryClient | null = null;
  readonly metrics: IngestMetrics;

  private constructor(registry: Registry) {
    this.metrics = ingestMetrics(registry, 'vantage_decision_pool');
  }

  /** The pools configured local, subscribed and restoring (routes fall back until each is ready). */
  static async start(o: { nc: NatsConnection; cfg: DecisionSection; log: Logger; registry: Registry; instanceId: string }): Promise<LocalPools> {
    const lp = new LocalPools(o.registry);
    lp.#bookingHeaders.set(BOOKING_ORIGIN_HEADER, o.instanceId);
    const roles = (['efficient', 'capable'] as const).filter((r) => o.cfg.pools[r].source === 'local');
    if (roles.length === 0) return lp;
    const L = o.cfg.local;
    const rc = L.recovery;
    if (rc.enabled) {
      lp.#querier = new WorkerQueryClient(rc);
      await lp.#querier.start();
    }
    const recMetrics = lp.#querier ? recoveryMetrics(o.registry, 'vantage_decision_pool') : null;
    const rejections = new RateLimitedLog(o.log, { intervalMs: o.cfg.rejectionLogIntervalMs });
    const durable = (L.durableName || `vantage-decision-${o.instanceId}`).replace(/[^A-Za-z0-9_-]/g, '_');
    // Started together: each subscribes, then restores; routes see each pool's readiness on its own.
    await Promise.all(
      roles.map(async (role) => {
        const r = o.cfg.pools[role];
        // A role's entry is an indexer's pool entry (`poolSourceProperties`, blockSize) named by its `pool`.
        const pool: PoolConfig = { ...r, name: r.pool };
        const querier = lp.#querier;
        const ingest: PoolIngest = new PoolIngest(pool, {
          nc: o.nc,
          log: o.log,
          metrics: lp.metrics,
          queueDepth: L.queueDepth,
          applyBatch: L.applyBatch,
          bookingTtlMs: L.bookingTtlMs,
          workerTtlMs: L.workerTtlMs,
          snapshotBucket: L.snapshotBucket === '' ? null : L.snapshotBucket,
          durableName: `${durable}-${r.pool}`,
          limits: L.limits,
          rejections,
          jetstreamStalledMs: L.jetstreamStalledMs,
          origin: o.instanceId,
          recovery: querier && recMetrics ? { querier, metrics: recMetrics, config: rc } : null,
        });
        lp.#pools.set(role, ingest);
        await ingest.start();
        o.log.info({ role, pool: r.pool, kvEvents: r.kvEvents, namespace: r.namespace, component: r.component, restoredAtMs: ingest.restoredAtMs }, 'local pool started');
      }),
    );
    lp.#housekeeping = setInterval(() => {
      for (const [role, p] of lp.#pools) {
        try {
          p.housekeeping();
        } catch (e) {
          o.log.error({ err: e, role }, 'local pool housekeeping failed');
        }
      }
    }, L.housekeepingMs);
    lp.#housekeeping.unref();
    return lp;
  }

  /** Booking headers: this replica's origin, so its own pools skip the echo undecoded (one object, never changed). */
  readonly #bookingHeaders = headers();
  readonly bookingHeaders = (): MsgHdrs => this.#bookingHeaders;

  /** The local pool of a role; undefined when the role's pool is remote. */
  get(role: Role): PoolIngest | undefined {
    return this.#pools.get(role);
  }

  /**
   * Observe a local pool for a prompt, as an indexer's observe reply would say it (`observeReplyOf`,
   * the same mapping), listing only the worker Dynamo's cost chose. `rttUs` is the time spent reading
   * the state: a local observation's collection age.
   */
  observe(role: Role, localHashes: BigUint64Array, promptTokens: number): ProbeResult {
    const p = this.#pools.get(role)!;
    const t = hrUs();
    const rd = p.readiness();
    if (!rd.ready) return { kind: 'failed', status: 'unavailable', code: rd.reason === 'restoring' ? 'POOL_RESTORING' : 'POOL_REPLAYING', reason: rd.detail, rttUs: 0 };
    const now = Date.now();
    // Transient: its records are overwritten by the next observe of this pool; the reply below copies them.
    const obs = p.state.observeTransient(localHashes, promptTokens, now);
    const reply = observeReplyOf(obs, { nowMs: now, queryDurationUs: hrUs() - t, restoredAtMs: p.restoredAtMs, workers: 'choice' });
    const dc = reply.dynamoChoice;
    if (dc === null) return { kind: 'ok', reply, worker: null, rttUs: hrUs() - t };
    const worker: WorkerObservation | null = reply.workers.find((w) => w.workerId === dc.workerId && w.dpRank === dc.dpRank) ?? null;
    // The terms record is the pool's own (reused by its next selection) and the record is built later: copied.
    const copied = { ...reply, dynamoChoice: { ...dc, policy: { name: dc.policy.name, params: { ...dc.policy.params } } } };
    return { kind: 'ok', reply: copied, worker, rttUs: hrUs() - t };
  }

  /** Book a routed request in its local pool at once (its published booking's echo is then recognised). */
  book(role: Role, b: Pick<BookingEvent, 'requestId' | 'workerId' | 'dpRank' | 'promptTokens' | 'overlapBlocks' | 'expectedOutputTokens'> & { readonly localHashes: BigUint64Array }): string {
    const p = this.#pools.get(role)!;
    return p.bookLocal({
      pool: p.cfg.name,
      requestId: b.requestId,
      workerId: b.workerId,
      dpRank: b.dpRank,
      promptTokens: b.promptTokens,
      overlapBlocks: b.overlapBlocks,
      sequenceHashes: sequenceHashes(b.localHashes),
      expectedOutputTokens: b.expectedOutputTokens,
    });
  }

  /** Health of the local pools: each pool's readiness and, in JetStream mode, its consumption. */
  health(): HealthResult {
    const details: Record<string, unknown> = {};
    let ok = true;
    for (const [role, p] of this.#pools) {
      const rd = p.readiness();
      const js = p.jetstreamHealth();
      if (js !== null && !js.ok) ok = false;
      details[role] = {
        pool: p.cfg.name,
        ready: rd.ready,
        ...(rd.ready ? {} : { reason: rd.reason }),
        queueDepth: p.queue.depth,
        workers: p.state.workerCount,
        bookings: p.state.ledger.size,
        ...(js === null ? {} : { jetstream: { ok: js.ok, ...js.details } }),
      };
    }
    return { ok, details };
  }

  get size(): number {
    return this.#pools.size;
  }

  /** Stop intake (subscriptions drained, queued messages applied). */
  async stop(): Promise<void> {
    if (this.#housekeeping) clearInterval(this.#housekeeping);
    await Promise.all([...this.#pools.values()].map((p) => p.stopIntake()));
    await this.#querier?.close();
  }
}
