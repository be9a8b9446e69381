/**
 * The indexer service: one process serving one or more model pools. Wires each
 * pool's runner (subscriptions → writer queue → PoolState) to the observe
 * endpoint, snapshots, housekeeping, metrics, NATS service discovery and the
 * shutdown sequence.
 */
import { localBlockHashes } from '@vantage/hashing';
import type { PoolState } from '@vantage/observation';
import { observeReplyOf } from '@vantage/decision-core';
import { encodeObserveReplyBinary, observeReplyCodec, observeRequestCodec, observeSubject } from '@vantage/protocol';
import { createResponder, RateLimitedLog, VantageError, toVantageError, type Responder, type ServiceContext } from '@vantage/runtime';
import type { IndexerSettings } from './config';
import { observeStepsChannel, publishObserveSteps, type StepStamps } from './diagnostics';
import { indexerMetrics, type IndexerMetrics } from './metrics';
import { PoolIngest as PoolRunner, recoveryMetrics, WorkerQueryClient } from '@vantage/ingest';

const INDEXER_VERSION = '0.1.0';

export interface IndexerHandle {
  readonly runners: ReadonlyMap<string, PoolRunner>;
  readonly metrics: IndexerMetrics;
  /** The observe endpoints' responder ($SRV name `vantage-indexer`). */
  readonly service: Responder;
}

/**
 * Answer one observe request for a pool (its state, and when its snapshot was restored); throws
 * VantageError for bad requests. The request is decoded by the protocol's codec (either encoding),
 * the pool observed, and the reply built from that observation (`observeReplyOf`) and encoded as
 * the request asked: JSON (`observeReplyCodec.encode`) or binary (`encodeObserveReplyBinary`).
 * `queryDurationUs` runs from `receivedAtNs` to the observation made, before encoding.
 * `steps` (only while a diagnostics subscriber listens: diagnostics.ts) gets the decode stamp.
 */
export function handleObserve(pool: { readonly state: PoolState; readonly restoredAtMs: number | null }, data: Uint8Array, receivedAtNs: bigint, steps?: StepStamps): Uint8Array {
  const req = observeRequestCodec.decode(data);
  if (!req.ok) throw new VantageError('BAD_REQUEST', `observe: ${req.reason}`, { details: { code: req.code } });
  const r = req.value;
  const state = pool.state;
  const p = r.prompt;
  const local = p.kind === 'local_hashes' ? p.localHashes : localBlockHashes(p.tokenIds, state.blockSize, p.loraName);
  const binary = r.replyEncoding === 'binary';
  if (steps !== undefined) {
    steps.decoded = performance.now();
    steps.encoding = binary ? 'binary' : 'json';
  }
  const now = Date.now();
  // The answer's records are the pool's, overwritten by its next observation: the reply is encoded before this returns.
  const obs = state.observeTransient(local, r.promptTokens, now);
  const queryDurationUs = Number(process.hrtime.bigint() - receivedAtNs) / 1000;
  const reply = observeReplyOf(obs, { nowMs: now, queryDurationUs, restoredAtMs: pool.restoredAtMs, workers: r.workers ?? 'all' });
  return binary ? encodeObserveReplyBinary(reply) : observeReplyCodec.encode(reply);
}

export async function startIndexer(ctx: ServiceContext<IndexerSettings, false>): Promise<IndexerHandle> {
  const { config, nc, log, registry, shutdown } = ctx;
  const cfg = config.indexer;
  const metrics = indexerMetrics(registry);
  const runners = new Map<string, PoolRunner>();
  const rejections = new RateLimitedLog(log, { intervalMs: cfg.rejectionLogIntervalMs });
  // Pre-create every limit's series at 0, so a dashboard sees the metric before the first hit.
  for (const pool of cfg.pools) for (const limit of ['dp_ranks_per_worker', 'workers_per_pool', 'ranks_per_pool', 'bookings_per_rank', 'bookings_per_pool', 'held_during_restore']) metrics.limitHits.inc({ pool: pool.name, limit }, 0);

  // One client of the workers' local indexes for every pool: one response-stream server.
  const rc = cfg.recovery;
  let querier: WorkerQueryClient | null = null;
  if (rc.enabled) {
    querier = new WorkerQueryClient(rc);
    await querier.start();
    log.info({ responseAddress: querier.responseAddress }, 'worker recovery client listening for response streams');
  }
  const recMetrics = querier ? recoveryMetrics(registry) : null;

  for (const pool of cfg.pools) {
    if (runners.has(pool.name)) throw new VantageError('CONFIG_INVALID', `pool ${pool.name} is configured twice`);
    const runner = new PoolRunner(pool, {
      nc,
      log,
      metrics,
      queueDepth: cfg.queueDepth,
      applyBatch: cfg.applyBatch,
      bookingTtlMs: cfg.bookingTtlMs,
      workerTtlMs: cfg.workerTtlMs,
      snapshotBucket: cfg.snapshot.intervalMs > 0 ? cfg.snapshot.bucket : null,
      snapshotReplicas: cfg.snapshot.replicas,
      durableName: cfg.durableName,
      recovery: querier && recMetrics ? { querier, metrics: recMetrics, config: rc } : null,
      limits: cfg.limits,
      rejections,
      jetstreamStalledMs: cfg.health.jetstreamStalledMs,
    });
    runners.set(pool.name, runner);
    await runner.start();
    log.info({ pool: pool.name, blockSize: pool.blockSize, kvEvents: pool.kvEvents, namespace: pool.namespace, component: pool.component }, 'pool started');
  }

  // One observe endpoint per pool, with NATS service discovery ($SRV.PING / INFO / STATS). Replicas share a
  // queue group per pool: any replica may answer, since each holds the whole index. Replies are published as
  // each handler returns (no outbox); each is a buffer of its own.
  const service = createResponder(nc, {
    name: 'vantage-indexer',
    version: INDEXER_VERSION,
    description: 'KV-cache and load observations for Dynamo worker pools',
    metadata: { pools: [...runners.keys()].join(',') },
    log,
    metrics: ctx.metrics,
    maxInFlight: cfg.maxInFlight,
  });
  const stamps: StepStamps = { start: 0, decoded: 0, encoding: 'binary' };
  /** When the last timed reply was built (0: not timed); its steps are published once it is sent. */
  let answeredAt = 0;
  for (const [name, runner] of runners) {
    const okSeconds = metrics.observeSeconds.series(name, 'ok');
    service.add(`observe-${name}`, {
      subject: observeSubject(name),
      queue: `vantage-indexer-${name}`,
      metadata: { pool: name, blockSize: String(runner.state.blockSize) },
      handler: (msg) => {
        const t0 = process.hrtime.bigint();
        try {
          // Step timings only while a diagnostics subscriber listens (diagnostics.ts).
          const steps = observeStepsChannel.hasSubscribers ? stamps : undefined;
          if (steps !== undefined) steps.start = performance.now();
          const reply = handleObserve(runner, msg.data, t0, steps);
          if (steps !== undefined) answeredAt = performance.now();
          okSeconds.observe(Number(process.hrtime.bigint() - t0) / 1e9);
          return reply;
        } catch (e) {
          const ve = toVantageError(e);
          if (ve.code === 'INTERNAL') log.error({ err: e, pool: name }, 'observe failed');
          metrics.observeSeconds.observe(Number(process.hrtime.bigint() - t0) / 1e9, name, ve.label);
          throw ve;
        }
      },
      // The responder publishes the reply as soon as the handler returns, then calls this: the respond step.
      onReplied: (msg, reply) => {
        if (answeredAt === 0) return;
        publishObserveSteps(name, stamps, msg.data.length, reply.length, answeredAt, performance.now());
        answeredAt = 0;
      },
    });
  }

  const housekeeping = setInterval(() => {
    for (const r of runners.values()) {
      try {
        r.housekeeping();
      } catch (e) {
        log.error({ err: e, pool: r.cfg.name }, 'housekeeping failed');
      }
    }
  }, cfg.housekeepingMs);
  housekeeping.unref();

  let snapshotting = false;
  const snapshotAll = async (): Promise<void> => {
    if (snapshotting) return;
    snapshotting = true;
    try {
      for (const r of runners.values()) {
        try {
          const bytes = await r.snapshot();
          log.debug({ pool: r.cfg.name, bytes }, 'snapshot written');
        } catch (e) {
          metrics.snapshots.inc({ pool: r.cfg.name, outcome: 'failed' });
          log.warn({ err: e, pool: r.cfg.name }, 'snapshot failed; will retry');
        }
      }
    } finally {
      snapshotting = false;
    }
  };
  const snapTimer = cfg.snapshot.intervalMs > 0 ? setInterval(() => void snapshotAll(), cfg.snapshot.intervalMs) : null;
  snapTimer?.unref();

  ctx.addHealthCheck('pools', () => {
    const details: Record<string, unknown> = {};
    let ok = true;
    for (const [name, r] of runners) {
      const js = r.jetstreamHealth();
      // JetStream consumption stopped for longer than health.jetstreamStalledMs: the index is no longer fed.
      if (js !== null && !js.ok) ok = false;
      details[name] = { queueDepth: r.queue.depth, workers: r.state.workerCount, ranks: r.state.rankCount, bookings: r.state.ledger.size, ...(js === null ? {} : { jetstream: { ok: js.ok, ...js.details } }) };
    }
    return { ok, details };
  });

  // intake: stop taking observe requests; drain: answer those in flight; close: stop answering discovery.
  service.registerShutdown(shutdown);
  shutdown.register('drain pool intake', 'drain', async () => {
    clearInterval(housekeeping);
    if (snapTimer) clearInterval(snapTimer);
    await Promise.all([...runners.values()].map((r) => r.stopIntake()));
    await querier?.close();
  });
  shutdown.register('final snapshot', 'flush', async () => {
    if (cfg.snapshot.intervalMs > 0) await snapshotAll();
  });

  return { runners, metrics, service };
}
