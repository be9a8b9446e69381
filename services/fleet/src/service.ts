/**
 * The simulated fleet as a live service: one sim `Engine` per Dynamo worker, advanced in (scaled)
 * real time by the `RealTimeDriver`. What a worker publishes, how it serves and the shutdown phases:
 * README.md ("What a worker publishes", "Serving", "Configuration").
 */
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Msg } from '@nats-io/transport-node';
import { Counter, Gauge } from 'prom-client';
import { workersSubject, workerRegistrationCodec, type WorkerRegistration } from '@vantage/protocol';
import { createResponder, type ServiceContext } from '@vantage/runtime';
import { Engine, MooncakePromptHasher, polynomialTiming, promptFromTokens, scaledTiming, type PromptBlocks } from '@vantage/sim';
import type { KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject, kvMetricsSubject, type ActiveLoad } from '@vantage/wire';
import { allWorkerIds, type FleetConfig, type FleetPoolConfig, type FleetSettings } from './config';
import { RealTimeDriver } from './driver';
import { decodeGenerateRequest, encodeProgress, GENERATE_PREFIX, generateSubject, type GenerateProgress, type GenerateRequest } from './generate';

const FLEET_VERSION = '0.1.0';

interface FleetWorker {
  readonly index: number;
  readonly pool: FleetPoolConfig;
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

/** What a started fleet tells its caller: the worker ids by pool name. */
export type FleetHandle = Awaited<ReturnType<typeof startFleet>>;

export async function startFleet(ctx: ServiceContext<FleetSettings, false>) {
  const { nc, log, registry, shutdown } = ctx;
  const cfg: FleetConfig['fleet'] = ctx.config.fleet;
  const wallMs = Date.now;

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
        workerId,
        engine: new Engine({
          workerId,
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
  const byPoolAndId = new Map<string, FleetWorker>(workers.map((w) => [`${w.pool.name}.${w.workerId}`, w]));

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
    const load: ActiveLoad = { workerId: w.workerId, dpRank: 0, activeDecodeBlocks: l.activeDecodeBlocks, activePrefillTokens: l.activePrefillTokens, schedulerLoadScope: null, kvUsedBlocks: l.kvUsedBlocks };
    w.lastLoad = load;
    nc.publish(w.loadSubject, encodeEventPlaneMessage({ publisherId: w.workerId, sequence: w.loadSeq++, publishedAtMs: BigInt(wallMs()) }, { kind: 'active_load', load }));
    mLoad.inc({ pool: w.pool.name });
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
      clock: () => performance.now(),
      maxStepsPerTurn: cfg.maxStepsPerTurn,
      sink: {
        kvEvents(i: number, events: readonly KvEvent[]) {
          const w = workers[i]!;
          const at = BigInt(wallMs());
          for (const event of events) {
            nc.publish(w.kvSubject, encodeEventPlaneMessage({ publisherId: w.workerId, sequence: w.kvSeq++, publishedAtMs: at }, { kind: 'kv_event', event }));
            mKv.inc({ pool: w.pool.name, kind: event.data.kind });
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
          mInflight.dec({ pool: w.pool.name });
          mRequests.inc({ pool: w.pool.name, outcome: 'done' });
          const { atMs, arrivalMs, firstTokenMs, outputTokens, reusedTokens, isl, preemptions } = f;
          reply(to, { kind: 'done', requestId: f.requestId, workerId: w.workerId.toString(), atMs, arrivalMs, firstTokenMs, outputTokens, reusedTokens, isl, preemptions });
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
      return hashers.get(w.pool.name)!.prompt(r.prompt.hashIds, r.prompt.inputLength);
    } catch (e) {
      return e instanceof Error ? e.message : String(e);
    }
  };
  /** The first reply to a generate request: `accepted`, or `failed` with the reason (later progress goes to the same inbox). */
  const onGenerate = (m: Msg): Uint8Array => {
    const tokens = m.subject.split('.');
    const w = byPoolAndId.get(`${tokens[tokens.length - 2]}.${tokens[tokens.length - 1]}`);
    const workerId = w?.workerId.toString() ?? tokens[tokens.length - 1] ?? '';
    const d = decodeGenerateRequest(m.data);
    const fail = (requestId: string, code: string, reason: string, pool: string): Uint8Array => {
      mRequests.inc({ pool, outcome: code });
      return encodeProgress({ kind: 'failed', requestId, workerId, code, reason });
    };
    if (!d.ok) return fail(d.requestId ?? '', d.code, d.reason, w?.pool.name ?? 'unknown');
    const r = d.value;
    if (!w) return fail(r.requestId, 'unknown_worker', `no worker at ${m.subject}`, 'unknown');
    if (!accepting) return fail(r.requestId, 'shutting_down', 'the fleet is shutting down', w.pool.name);
    if (w.inflight.size >= cfg.maxRequestsPerWorker) return fail(r.requestId, 'overloaded', `worker has ${w.inflight.size} requests in flight`, w.pool.name);
    const prompt = promptOf(w, r);
    if (typeof prompt === 'string') return fail(r.requestId, 'invalid_request', prompt, w.pool.name);
    const added = driver.submit(w.index, { id: r.requestId, prompt, osl: r.osl, ...(r.outputTokens ? { outputTokens: r.outputTokens } : {}) });
    if (!added.ok) return fail(r.requestId, added.code, added.reason, w.pool.name);
    // The driver reports progress from its timer, never from submit: this reply leaves first.
    w.inflight.set(r.requestId, m.reply ?? '');
    mInflight.inc({ pool: w.pool.name });
    return encodeProgress({ kind: 'accepted', requestId: r.requestId, workerId, arrivalMs: added.arrivalMs });
  };
  // One endpoint per pool on the workers' wildcard subject. No queue group: every fleet process sees every
  // request, and only the one running the worker accepts it. The protocol carries failures in its body, so
  // the responder's own refusals (OVERLOADED past its in-flight limit, 1024) and handler failures are `failed` progress.
  const responder = createResponder(nc, { name: 'vantage-fleet', version: FLEET_VERSION, description: 'Simulated Dynamo workers', log, metrics: ctx.metrics });
  for (const p of cfg.pools) {
    responder.add(`generate-${p.name}`, {
      subject: `${GENERATE_PREFIX}.${p.name}.*`,
      queue: '',
      metadata: { pool: p.name },
      handler: onGenerate,
      errorBody: (err, m) => {
        mRequests.inc({ pool: p.name, outcome: err.label });
        return encodeProgress({ kind: 'failed', requestId: '', workerId: m.subject.split('.').pop() ?? '', code: err.label, reason: err.code === 'INTERNAL' ? 'internal error' : err.message });
      },
    });
  }

  // ---------------------------------------------------------------- registrations
  const registration = (w: FleetWorker, kind: WorkerRegistration['kind']): WorkerRegistration => {
    const id = { pool: w.pool.name, workerId: w.workerId, atMs: wallMs() };
    if (kind === 'deregister') return { kind, ...id };
    return { kind, ...id, capacity: w.engine.capacity(), ttlMs: cfg.registrationTtlMs, endpoint: w.generateSubject, model: w.pool.model === '' ? w.pool.name : w.pool.model };
  };
  const announce = (kind: 'register' | 'heartbeat' | 'deregister'): void => {
    for (const w of workers) nc.publish(workersSubject(w.pool.name), workerRegistrationCodec.encode(registration(w, kind)));
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
    await responder.stopIntake();
  });
  shutdown.register('fleet-discovery', 'close', () => responder.stop());
  shutdown.register('fleet-drain', 'drain', async () => {
    // Accepted requests get up to 2 s (wall) to finish.
    const until = performance.now() + 2000;
    while (workers.some((w) => w.inflight.size > 0) && performance.now() < until) await new Promise((r) => setTimeout(r, 10));
    driver.stop();
    for (const w of workers) {
      for (const [requestId, to] of w.inflight) {
        reply(to, { kind: 'failed', requestId, workerId: w.workerId.toString(), code: 'shutting_down', reason: 'the fleet shut down before the request finished' });
        mRequests.inc({ pool: w.pool.name, outcome: 'shutting_down' });
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
  return { pools: new Map(cfg.pools.map((p, i) => [p.name, idsByPool[i]!])) };
}
