/**
 * The simulated fleet as a live service: one sim `Engine` per Dynamo worker,
 * advanced in (scaled) real time by the `RealTimeDriver`, publishing exactly
 * what Dynamo workers publish and serving requests on a per-worker subject.
 *
 * Per worker:
 *   KV events   namespace.{ns}.component.{comp}.kv-events   event-plane envelope, RouterEvent payload
 *   load        namespace.{ns}.kv_metrics                   event-plane envelope, ActiveLoad payload,
 *                                                           on change, debounced (Dynamo: ~1 ms)
 *   registry    vantage.v1.workers.{pool}                   register, heartbeats every ttl/3, deregister
 *   serving     vantage.v1.fleet.generate.{pool}.{workerId} see generate.ts
 *
 * Envelopes: publisher_id = worker id; sequence counts from 0 per (publisher,
 * topic), as each Dynamo event publisher keeps its own; published_at = wall ms.
 *
 * Shutdown (runtime phases): intake — stop serving subscriptions and
 * heartbeats; drain — let accepted requests finish (bounded), fail the rest
 * with `shutting_down`, stop the clock, publish final load and deregister;
 * flush — wait for the server to have everything.
 */
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Msg, Subscription } from '@nats-io/transport-node';
import { Counter, Gauge } from 'prom-client';
import { workersSubject, workerRegistrationCodec, type WorkerRegistration } from '@vantage/protocol';
import type { ServiceContext } from '@vantage/runtime';
import { Engine, MooncakePromptHasher, polynomialTiming, promptFromTokens, scaledTiming, type PromptBlocks } from '@vantage/sim';
import type { KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject, kvMetricsSubject, type ActiveLoad } from '@vantage/wire';
import { allWorkerIds, type FleetConfig, type FleetPoolConfig, type FleetSettings } from './config';
import { RealTimeDriver, type Clock, type Timers } from './driver';
import { decodeGenerateRequest, encodeProgress, GENERATE_PREFIX, generateSubject, type GenerateProgress, type GenerateRequest } from './generate';

export interface FleetWorker {
  readonly index: number;
  readonly pool: FleetPoolConfig;
  readonly poolName: string;
  readonly workerId: WorkerId;
  readonly engine: Engine;
  readonly kvSubject: string;
  readonly loadSubject: string;
  readonly generateSubject: string;
  /** Envelope sequence per topic, from 0. */
  kvSeq: bigint;
  loadSeq: bigint;
  lastLoad: ActiveLoad | null;
  /** Accepted requests not yet finished: request id → reply inbox. */
  readonly inflight: Map<string, string>;
}

export interface FleetHandle {
  readonly workers: readonly FleetWorker[];
  readonly driver: RealTimeDriver;
  /** Worker ids by pool name. */
  readonly pools: ReadonlyMap<string, readonly WorkerId[]>;
}

interface FleetOptions {
  /** Monotonic wall clock (default `performance.now`). */
  readonly clock?: Clock;
  readonly timers?: Timers;
  /** Epoch ms for `published_at` and registrations (default `Date.now`). */
  readonly wallMs?: () => number;
  /** How long shutdown waits for accepted requests to finish (wall ms). Default 2000. */
  readonly drainMs?: number;
}

export async function startFleet(ctx: ServiceContext<FleetSettings, false>, opts: FleetOptions = {}): Promise<FleetHandle> {
  const { nc, log, registry, shutdown } = ctx;
  const cfg: FleetConfig['fleet'] = ctx.config.fleet;
  const wallMs = opts.wallMs ?? Date.now;
  const clock = opts.clock ?? (() => performance.now());

  const reg = { registers: [registry] };
  const mRequests = new Counter({ name: 'vantage_fleet_requests_total', help: 'Generate requests by outcome', labelNames: ['pool', 'outcome'], ...reg });
  const mKv = new Counter({ name: 'vantage_fleet_kv_events_published_total', help: 'KV events published', labelNames: ['pool', 'kind'], ...reg });
  const mLoad = new Counter({ name: 'vantage_fleet_load_reports_published_total', help: 'ActiveLoad reports published', labelNames: ['pool'], ...reg });
  const mInflight = new Gauge({ name: 'vantage_fleet_requests_in_flight', help: 'Accepted requests not finished', labelNames: ['pool'], ...reg });
  new Gauge({
    name: 'vantage_fleet_driver_max_lag_sim_ms',
    help: 'Largest delay between an event being due and being processed, in sim ms',
    registers: [registry],
    collect() {
      this.set(driver.stats.maxLagMs);
    },
  });

  // A new incarnation per start: generated worker ids never repeat across restarts (see workerIdsFor).
  const idsByPool = allWorkerIds(cfg, randomInt(0x10000));
  const workers: FleetWorker[] = [];
  const hashers = new Map<string, MooncakePromptHasher>();
  cfg.pools.forEach((pool, pi) => {
    hashers.set(pool.name, new MooncakePromptHasher(pool.blockSize));
    const timing = pool.speed === 1 ? polynomialTiming : scaledTiming(polynomialTiming, pool.speed);
    for (const workerId of idsByPool[pi]!) {
      workers.push({
        index: workers.length,
        pool,
        poolName: pool.name,
        workerId,
        engine: new Engine({
          workerId,
          dpRank: 0,
          blockSize: pool.blockSize,
          numGpuBlocks: pool.numGpuBlocks,
          maxNumBatchedTokens: pool.maxNumBatchedTokens,
          maxNumSeqs: pool.maxNumSeqs,
          timing,
          firstEventId: BigInt(cfg.firstEventId),
        }),
        kvSubject: kvEventsSubject(pool.namespace, pool.component),
        loadSubject: kvMetricsSubject(pool.namespace),
        generateSubject: generateSubject(pool.name, workerId),
        kvSeq: 0n,
        loadSeq: 0n,
        lastLoad: null,
        inflight: new Map(),
      });
    }
  });
  const byPoolAndId = new Map<string, FleetWorker>(workers.map((w) => [`${w.poolName}.${w.workerId}`, w]));

  const reply = (to: string | undefined, p: GenerateProgress): void => {
    if (to) nc.publish(to, encodeProgress(p));
  };

  // ---------------------------------------------------------------- load reports
  const dirty = new Set<number>();
  let loadTimer: NodeJS.Timeout | null = null;
  const flushLoads = (): void => {
    loadTimer = null;
    for (const i of dirty) publishLoad(workers[i]!);
    dirty.clear();
  };
  const publishLoad = (w: FleetWorker): void => {
    const l = w.engine.load();
    const prev = w.lastLoad;
    if (prev && prev.activeDecodeBlocks === l.activeDecodeBlocks && prev.activePrefillTokens === l.activePrefillTokens && prev.kvUsedBlocks === l.kvUsedBlocks) return;
    const load: ActiveLoad = {
      workerId: w.workerId,
      dpRank: 0,
      activeDecodeBlocks: l.activeDecodeBlocks,
      activePrefillTokens: l.activePrefillTokens,
      schedulerLoadScope: null,
      kvUsedBlocks: l.kvUsedBlocks,
    };
    w.lastLoad = load;
    nc.publish(w.loadSubject, encodeEventPlaneMessage({ publisherId: w.workerId, sequence: w.loadSeq++, publishedAtMs: BigInt(wallMs()) }, { kind: 'active_load', load }));
    mLoad.inc({ pool: w.poolName });
  };
  const markLoad = (i: number): void => {
    dirty.add(i);
    // Debounced like Dynamo's publisher: one report per burst of changes, never one per pass.
    loadTimer ??= setTimeout(flushLoads, cfg.loadDebounceMs);
  };

  // ---------------------------------------------------------------- the clock
  const driver = new RealTimeDriver(
    workers.map((w) => w.engine),
    {
      timeScale: cfg.timeScale,
      clock,
      ...(opts.timers ? { timers: opts.timers } : {}),
      maxStepsPerTurn: cfg.maxStepsPerTurn,
      sink: {
        kvEvents(i: number, events: readonly KvEvent[]) {
          const w = workers[i]!;
          const at = BigInt(wallMs());
          for (const event of events) {
            nc.publish(w.kvSubject, encodeEventPlaneMessage({ publisherId: w.workerId, sequence: w.kvSeq++, publishedAtMs: at }, { kind: 'kv_event', event }));
            mKv.inc({ pool: w.poolName, kind: event.data.kind });
          }
        },
        firstToken(i, ft) {
          const w = workers[i]!;
          reply(w.inflight.get(ft.requestId), { kind: 'first_token', requestId: ft.requestId, workerId: w.workerId.toString(), atMs: ft.atMs });
        },
        finished(i, f) {
          const w = workers[i]!;
          const to = w.inflight.get(f.requestId);
          w.inflight.delete(f.requestId);
          mInflight.dec({ pool: w.poolName });
          mRequests.inc({ pool: w.poolName, outcome: 'done' });
          reply(to, {
            kind: 'done',
            requestId: f.requestId,
            workerId: w.workerId.toString(),
            atMs: f.atMs,
            arrivalMs: f.arrivalMs,
            firstTokenMs: f.firstTokenMs,
            outputTokens: f.outputTokens,
            reusedTokens: f.reusedTokens,
            isl: f.isl,
            preemptions: f.preemptions,
          });
        },
        loadChanged: markLoad,
      },
    },
  );

  // ---------------------------------------------------------------- serving
  let accepting = true;
  const promptOf = (w: FleetWorker, r: GenerateRequest): PromptBlocks | string => {
    try {
      if (r.prompt.kind === 'token_ids') return promptFromTokens(r.prompt.tokens, w.pool.blockSize);
      return hashers.get(w.poolName)!.prompt(r.prompt.hashIds, r.prompt.inputLength);
    } catch (e) {
      return e instanceof Error ? e.message : String(e);
    }
  };
  const onGenerate = (m: Msg): void => {
    const tokens = m.subject.split('.');
    const w = byPoolAndId.get(`${tokens[tokens.length - 2]}.${tokens[tokens.length - 1]}`);
    const workerId = w?.workerId.toString() ?? tokens[tokens.length - 1] ?? '';
    const d = decodeGenerateRequest(m.data);
    const fail = (requestId: string, code: string, reason: string, pool: string): void => {
      mRequests.inc({ pool, outcome: code });
      reply(m.reply, { kind: 'failed', requestId, workerId, code, reason });
    };
    if (!d.ok) return fail(d.requestId ?? '', d.code, d.reason, w?.poolName ?? 'unknown');
    const r = d.value;
    if (!w) return fail(r.requestId, 'unknown_worker', `no worker at ${m.subject}`, 'unknown');
    if (!accepting) return fail(r.requestId, 'shutting_down', 'the fleet is shutting down', w.poolName);
    if (w.inflight.size >= cfg.maxRequestsPerWorker) return fail(r.requestId, 'overloaded', `worker has ${w.inflight.size} requests in flight`, w.poolName);
    const prompt = promptOf(w, r);
    if (typeof prompt === 'string') return fail(r.requestId, 'invalid_request', prompt, w.poolName);
    const added = driver.submit(w.index, { id: r.requestId, prompt, osl: r.osl, ...(r.outputTokens ? { outputTokens: r.outputTokens } : {}) });
    if (!added.ok) return fail(r.requestId, added.code, added.reason, w.poolName);
    w.inflight.set(r.requestId, m.reply ?? '');
    mInflight.inc({ pool: w.poolName });
    reply(m.reply, { kind: 'accepted', requestId: r.requestId, workerId, arrivalMs: added.arrivalMs });
  };
  const subs: Subscription[] = cfg.pools.map((p) =>
    nc.subscribe(`${GENERATE_PREFIX}.${p.name}.*`, {
      callback: (err, m) => {
        if (err) return log.error({ err, pool: p.name }, 'generate subscription error');
        try {
          onGenerate(m);
        } catch (e) {
          log.error({ err: e, subject: m.subject }, 'generate request failed');
          reply(m.reply, { kind: 'failed', requestId: '', workerId: '', code: 'internal', reason: 'internal error' });
        }
      },
    }),
  );

  // ---------------------------------------------------------------- registrations
  const registration = (w: FleetWorker, kind: 'register' | 'heartbeat' | 'deregister'): WorkerRegistration =>
    kind === 'deregister'
      ? { kind, pool: w.poolName, workerId: w.workerId, atMs: wallMs() }
      : {
          kind,
          pool: w.poolName,
          workerId: w.workerId,
          atMs: wallMs(),
          capacity: {
            blockSize: w.pool.blockSize,
            totalKvBlocks: w.pool.numGpuBlocks,
            maxNumBatchedTokens: w.pool.maxNumBatchedTokens,
            maxNumSeqs: w.pool.maxNumSeqs,
            dpStartRank: 0,
            dpSize: 1,
            schedulable: true,
          },
          ttlMs: cfg.registrationTtlMs,
          endpoint: w.generateSubject,
          model: w.pool.model === '' ? w.poolName : w.pool.model,
        };
  const announce = (kind: 'register' | 'heartbeat' | 'deregister'): void => {
    for (const w of workers) nc.publish(workersSubject(w.poolName), workerRegistrationCodec.encode(registration(w, kind)));
  };

  announce('register');
  for (const w of workers) publishLoad(w); // an initial (empty) load report: the worker is known before its first event
  driver.start();
  const heartbeat = setInterval(() => announce('heartbeat'), Math.max(250, Math.floor(cfg.registrationTtlMs / 3)));
  await nc.flush();

  ctx.addHealthCheck('fleet', () => ({ ok: driver.started, details: { workers: workers.length, simNowMs: Math.round(driver.simNow()) } }));

  shutdown.register('fleet-intake', 'intake', async () => {
    accepting = false;
    clearInterval(heartbeat);
    await Promise.all(subs.map((s) => s.drain()));
  });
  shutdown.register('fleet-drain', 'drain', async () => {
    const drainMs = opts.drainMs ?? 2000;
    const until = performance.now() + drainMs;
    while (workers.some((w) => w.inflight.size > 0) && performance.now() < until) await new Promise((r) => setTimeout(r, 10));
    driver.stop();
    for (const w of workers) {
      for (const [requestId, to] of w.inflight) {
        reply(to, { kind: 'failed', requestId, workerId: w.workerId.toString(), code: 'shutting_down', reason: 'the fleet shut down before the request finished' });
        mRequests.inc({ pool: w.poolName, outcome: 'shutting_down' });
      }
      w.inflight.clear();
    }
    if (loadTimer) clearTimeout(loadTimer);
    flushLoads();
    announce('deregister');
  });
  shutdown.register('fleet-flush', 'flush', () => nc.flush());

  log.info(
    {
      timeScale: cfg.timeScale,
      pools: cfg.pools.map((p, i) => ({ name: p.name, namespace: p.namespace, component: p.component, blockSize: p.blockSize, speed: p.speed, workers: idsByPool[i]!.map(String) })),
    },
    'fleet started',
  );
  return { workers, driver, pools: new Map(cfg.pools.map((p, i) => [p.name, idsByPool[i]!])) };
}
