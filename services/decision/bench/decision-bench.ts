/**
 * `npm run bench:decision`: the `route` query over real NATS, against a bare
 * NATS request-reply echo of the same payload in the same run.
 *
 *   nats-server (private, 127.0.0.1, max_payload 8 MiB; or NATS_URL), the echo
 *     responder (child process: replies with the request's own bytes) and the
 *     load generator (this process) throughout;
 *   one phase per mode (BENCH_MODES, default local,remote), each with only its
 *     own processes beside those, and 64 simulated workers per pool whose
 *     registrations and stored prefixes are published once that phase's
 *     processes have subscribed:
 *     - `local`: the decision service holding both pools itself, fed from the
 *       subjects as an indexer is (on vantage.v1.route). No indexer runs: the
 *       service needs none to route;
 *     - `remote`: 2 indexers (one per candidate model's pool) and a decision
 *       service asking them on every route (on its own subject);
 *   every decision service uses the variant cache (the most work per route) and
 *   publishes its decision records to JetStream. Echo and route runs alternate
 *   per scenario and rate, open loop at fixed offered rates for a bounded time,
 *   latency measured from the *scheduled* send time (no coordinated omission).
 *
 * Prompts: 32k and 128k tokens for both candidate models, as block hashes (the
 * gateway client's default) and as token ids (the decision service hashes
 * them). Requests are pre-encoded once per scenario; each send patches a
 * fixed-width request id into the bytes so every route is a distinct request.
 *
 * Lifecycle: every routed request gets its `done` on the chosen pool as soon as
 * its reply arrives, as a gateway reports it, so both the indexers' bookings
 * and the decision service's local in-flight count are released and do not
 * pile up over the run (a production request is booked only while it runs).
 * Each run reports the largest booked-request count R seen on a chosen worker,
 * so a pile-up would be visible.
 *
 * Each run also reports how its routes ended (kept, overrode, fallback by
 * reason): a run dominated by `fallback_indexer_unavailable` measured a timeout,
 * not a decision. Latency is split into the observe round trip to the indexers
 * (reported by the decision service per candidate) and the decision service's
 * own work (`decisionDurationUs - queryDurationUs`).
 *
 * max_routes_per_s (local), remote_max_routes_per_s, echo_max_per_s: the highest
 * offered rate (32k block hashes, steps of BENCH_STEP from BENCH_SEARCH_FROM, or down
 * by halves to 100/s when BENCH_SEARCH_FROM fails) at
 * which every request was answered, the achieved rate kept up with the offered
 * one (>= 97%), p99 stayed under BENCH_P99_LIMIT_US (20 ms) and no route fell back.
 * The closing JSON line's headline is 32k block hashes at BENCH_HEADLINE_RATE
 * (1,000/s); `by_rate` has every rate.
 *
 * Environment: BENCH_SECONDS (default 4), BENCH_RATES (default 500,1000,2000), BENCH_MODES (local,remote),
 * BENCH_SCENARIOS (default 32k-hashes,128k-hashes,32k-token_ids,128k-token_ids),
 * BENCH_SEARCH_FROM (1000), BENCH_STEP (500), BENCH_SEARCH_MAX (6000),
 * BENCH_WARMUP_ROUTES (3000) and BENCH_WARMUP_RATE (300/s): routes sent before
 * each scenario's measured runs, so that the figures are those of a running
 * service with compiled code (every process starts cold here; the first few
 * thousand routes cost several times the steady state). 0 measures cold.
 * BENCH_CPU_PROF=dir (run the local-pool decision service under `--cpu-prof`, profile in dir),
 * BENCH_DECISION_NODE_ARGS (extra node flags for the decision services, space-separated: GC settings, an --import),
 *
 * `npm run bench:decision` runs this generator with `--max-semi-space-size=64`: with V8's default young
 * generation its own short-lived request objects were promoted and it ran a full mark-compact about every
 * 0.6 s (64 in a 3-rate run, 5 with the flag), pauses of 4-14 ms that landed in the echo's and the
 * routes' p99 alike. Run it the same way when starting it by hand (`node --max-semi-space-size=64 --import tsx ...`).
 * BENCH_LOG_DIR (where each child process writes its log, `NAME.log`; default the run's own folder, removed at the end;
 * a child that exits on its own has its last lines printed either way),
 * BENCH_INDEXER=stub (diagnostic: instead of the two indexers, one responder answers
 * every observe query with a fixed, valid reply at once, so the figures show the
 * decision service alone; the default `real` runs the indexers),
 * NATS_URL (an existing server; 128k token-id requests need max_payload >= 2 MiB),
 * BENCH_DYNAMO_SELECT=0 (skip the peer: Dynamo's selection service, `dynamo-select-peer.ts`, run after
 * ours in the same process on the same workload, giving `dynamo_select_p50_us` and `dynamo_select_max_per_s`).
 *
 * Each run also reports the CPU time per answered request of each process group
 * (nats-server, decision service, indexers, echo responder, this generator),
 * read from /proc, the decision service's socket reads, writes and wake-ups per
 * request (/proc/<pid>/io syscr and syscw, voluntary context switches), and the
 * 1-minute load average: latency on a shared machine depends on what else runs,
 * CPU per request much less.
 *
 * The machine may have only 2 cores: nats-server, both indexers, the decision
 * service, the echo responder and this generator share them, so absolute
 * figures are pessimistic; the echo baseline runs under the same conditions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { GatewayClient } from '@vantage/gateway-client';
import { DECISION_NODE_ARGS, ensureNatsServer, freePort, INFRA_DIR, REPO_ROOT, waitFor, tcpOpen, processCpuUs } from '@vantage/infra';
import { lifecycleEventCodec, lifecycleSubject, observeReplyCodec, observeSubject, workerRegistrationCodec, workersSubject, type WorkerObservation } from '@vantage/protocol';
import { serializeParameterSet } from '@vantage/rules';
import type { WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';
import { runDynamoSelectPeer } from './dynamo-select-peer';
import { BLOCK, PROMPT_SESSIONS, SESSIONS, SESSION_TOKENS, WORKER_CAPACITY, WORKERS, benchParameterSet, POOLS, storedPrefixEvent, tokensFor } from './workload';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const RATES = (process.env.BENCH_RATES ?? '500,1000,2000').split(',').map(Number);
/** Pool modes measured: `local` (the decision service holds both pools) and `remote` (it asks the indexers). */
const MODES = (process.env.BENCH_MODES ?? 'local,remote').split(',') as ('local' | 'remote')[];
/** The headline rate of the closing JSON line. */
const HEADLINE_RATE = Number(process.env.BENCH_HEADLINE_RATE ?? 1000);
const SCENARIOS = (process.env.BENCH_SCENARIOS ?? '32k-hashes,128k-hashes,32k-token_ids,128k-token_ids').split(',');
const SEARCH_FROM = Number(process.env.BENCH_SEARCH_FROM ?? 1000);
const WARMUP_ROUTES = Number(process.env.BENCH_WARMUP_ROUTES ?? 3000);
const WARMUP_RATE = Number(process.env.BENCH_WARMUP_RATE ?? 300);
const STEP = Number(process.env.BENCH_STEP ?? 500);
const SEARCH_MAX = Number(process.env.BENCH_SEARCH_MAX ?? 6000);
const CPU_PROF = process.env.BENCH_CPU_PROF;
const STUB_INDEXER = process.env.BENCH_INDEXER === 'stub';
/** BENCH_DYNAMO_SELECT=0 leaves Dynamo's selection service out. */
const DYNAMO_SELECT = process.env.BENCH_DYNAMO_SELECT !== '0';
const P99_LIMIT_US = Number(process.env.BENCH_P99_LIMIT_US ?? 20_000);
const ROLES = ['efficient', 'capable'] as const;
const REMOTE_SUBJECT = 'bench.route.remote';

const dir = join(INFRA_DIR, 'bench', `decision-${process.pid}-${Date.now()}`);
mkdirSync(dir, { recursive: true });
const children: ChildProcess[] = [];
const log = (s: string): void => void process.stderr.write(`${s}\n`);

/** Processes whose CPU time is reported per request (from /proc: unlike latency, it does not depend on what else runs). */
const cpuOf: Record<string, ChildProcess[]> = { nats: [], decision: [], decision_remote: [], indexers: [], responder: [] };
/** User and system CPU time of a process, µs (zero when it is gone). */
function procCpuUs(pid: number | undefined): { user: number; sys: number } {
  return processCpuUs(pid) ?? { user: 0, sys: 0 };
}

/** The decision service whose reads, writes and wake-ups are reported: the running phase's. */
let ioPid: number | undefined;

function cpuSnapshot(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, ps] of Object.entries(cpuOf)) {
    const t = ps.map((c) => procCpuUs(c.pid));
    out[k] = t.reduce((a, x) => a + x.user + x.sys, 0);
    // The system (kernel) share of the decision service: socket reads and writes.
    if (k === 'decision') out['decision_sys'] = t.reduce((a, x) => a + x.sys, 0);
  }
  const u = process.cpuUsage();
  out['generator'] = u.user + u.system;
  const io = procIo(ioPid);
  out['decision_reads'] = io.reads;
  out['decision_writes'] = io.writes;
  out['decision_wakeups'] = io.wakeups;
  return out;
}

/**
 * Socket reads and writes (syscr, syscw from /proc/<pid>/io) and wake-ups (voluntary context switches of
 * the main thread: the event loop going to sleep and being woken) of the decision service: on a machine
 * where each system call and wake-up is costly, they explain most of its CPU per route.
 */
function procIo(pid: number | undefined): { reads: number; writes: number; wakeups: number } {
  if (pid === undefined) return { reads: 0, writes: 0, wakeups: 0 };
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const st = readFileSync(`/proc/${pid}/status`, 'utf8');
    const num = (text: string, key: string): number => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    return { reads: num(io, 'syscr'), writes: num(io, 'syscw'), wakeups: num(st, 'voluntary_ctxt_switches') };
  } catch {
    return { reads: NaN, writes: NaN, wakeups: NaN };
  }
}

/** CPU µs per answered request, by process group, between two snapshots. */
function cpuPerRequest(a: Record<string, number>, b: Record<string, number>, n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(b)) {
    if (k === 'decision_reads' || k === 'decision_writes' || k === 'decision_wakeups') continue;
    out[k] = n > 0 ? Math.round(((b[k] ?? 0) - (a[k] ?? 0)) / n) : 0;
  }
  return out;
}

/** The decision service's reads, writes and wake-ups per answered request (two decimals). */
function ioPerRequest(a: Record<string, number>, b: Record<string, number>, n: number): Record<string, number | null> {
  const per = (k: string): number | null => {
    const d = ((b[k] ?? NaN) - (a[k] ?? NaN)) / n;
    return n > 0 && Number.isFinite(d) ? Math.round(d * 100) / 100 : null;
  };
  return { reads: per('decision_reads'), writes: per('decision_writes'), wakeups: per('decision_wakeups') };
}

function child(name: string, args: string[], env: Record<string, string>): ChildProcess {
  // The service's own log (stdout) goes to a file in the run's folder; if it exits on its own, its last lines are shown.
  const logFile = join(process.env.BENCH_LOG_DIR ?? dir, `${name}.log`);
  const c = spawn(process.execPath, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', openSync(logFile, 'w'), 'pipe'] });
  c.stderr?.on('data', (d: Buffer) => log(`[${name}] ${d.toString().trimEnd()}`));
  c.once('exit', (code) => {
    if (code !== null && code !== 0) log(`[${name}] exited with code ${code}; its last log lines:\n${readFileSync(logFile, 'utf8').slice(-2000).trimEnd()}`);
  });
  children.push(c);
  return c;
}

async function startNats(): Promise<string> {
  if (process.env.NATS_URL) return process.env.NATS_URL;
  const bin = await ensureNatsServer();
  const port = await freePort();
  const conf = join(dir, 'nats.conf');
  // max_payload 8 MiB: a 128k-token prompt as token ids for two candidates is ~1.6 MB of JSON, over the 1 MiB default.
  writeFileSync(conf, `listen: 127.0.0.1:${port}\nmax_payload: 8388608\njetstream { store_dir: "${join(dir, 'js')}" }\n`);
  const c = spawn(bin, ['-c', conf], { stdio: 'ignore' });
  children.push(c);
  cpuOf['nats']!.push(c);
  await waitFor('nats-server', () => tcpOpen('127.0.0.1', port), 15_000);
  return `nats://127.0.0.1:${port}`;
}

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** What one reply told us (route replies are read with JSON.parse only: the generator must stay light). */
interface Outcome {
  readonly ok: boolean;
  readonly pool?: string | null;
  readonly reason?: string;
  readonly fallback?: string | null;
  readonly maxR?: number;
  readonly observeUs?: number;
  readonly ownUs?: number;
}

interface RunResult {
  name: string;
  rate: number;
  sent: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
  achieved: number;
  outcomes: Record<string, number>;
  maxR: number;
  observeP50: number;
  ownP50: number;
  ownP99: number;
  /** CPU µs per answered request by process group (the echo responder counts as `responder`). */
  cpu: Record<string, number>;
  /** The decision service's socket reads, writes and wake-ups per answered request. */
  io: Record<string, number | null>;
  loadavg: number;
}

/** Fixed-width request id patched into pre-encoded bytes. */
const ID_PLACEHOLDER = 'REQ-XXXXXXXXXXXX';

function template(bytes: Uint8Array): { bytes: Uint8Array; at: number } {
  const s = Buffer.from(bytes);
  const at = s.indexOf(ID_PLACEHOLDER);
  if (at < 0) throw new Error('placeholder not found');
  return { bytes: new Uint8Array(s), at };
}

let idSeq = 0;
function nextId(): string {
  return `REQ-${(idSeq++).toString(36).padStart(12, '0')}`;
}

function sendDone(nc: NatsConnection, id: string, pool: string): void {
  nc.publish(lifecycleSubject(pool), lifecycleEventCodec.encode({ requestId: id, sessionId: 'bench', pool, kind: 'done', atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null }));
}

async function openLoop(name: string, rate: number, seconds: number, send: (id: string) => Promise<Outcome>, nc: NatsConnection): Promise<RunResult> {
  const total = Math.round(rate * seconds);
  const lat = new Float64Array(total);
  const observe: number[] = [];
  const own: number[] = [];
  const outcomes: Record<string, number> = {};
  let maxR = 0;
  let ok = 0;
  let errors = 0;
  let n = 0;
  const maxInFlight = 4096;
  let inFlight = 0;
  const cpu0 = cpuSnapshot();
  const t0 = performance.now();
  const interval = 1000 / rate;
  await new Promise<void>((done) => {
    let finished = 0;
    const finish = (): void => {
      if (++finished === total) done();
    };
    const tick = (): void => {
      const now = performance.now();
      const due = Math.min(total, Math.floor((now - t0) / interval) + 1);
      while (n < due) {
        const scheduled = t0 + n * interval;
        n++;
        if (inFlight >= maxInFlight) {
          errors++;
          outcomes['generator_backlog'] = (outcomes['generator_backlog'] ?? 0) + 1;
          finish();
          continue;
        }
        inFlight++;
        const id = nextId();
        send(id).then(
          (r) => {
            const l = (performance.now() - scheduled) * 1000;
            inFlight--;
            if (r.ok) {
              lat[ok++] = l;
              // Release the reservation at once, as the gateway reports the request's end.
              if (r.pool) sendDone(nc, id, r.pool);
              if (r.reason !== undefined) {
                const k = r.fallback ? r.fallback : r.reason;
                outcomes[k] = (outcomes[k] ?? 0) + 1;
              }
              if (r.maxR !== undefined && r.maxR > maxR) maxR = r.maxR;
              if (r.observeUs !== undefined) observe.push(r.observeUs);
              if (r.ownUs !== undefined) own.push(r.ownUs);
            } else errors++;
            finish();
          },
          (e: unknown) => {
            inFlight--;
            errors++;
            const k = `error:${(e as { code?: string }).code ?? (e instanceof Error ? e.name : 'unknown')}`;
            outcomes[k] = (outcomes[k] ?? 0) + 1;
            finish();
          },
        );
      }
      if (n < total) setTimeout(tick, Math.max(0, Math.min(interval, t0 + n * interval - performance.now())));
    };
    tick();
  });
  const elapsed = (performance.now() - t0) / 1000;
  const cpu1 = cpuSnapshot();
  const cpu = cpuPerRequest(cpu0, cpu1, ok);
  const io = ioPerRequest(cpu0, cpu1, ok);
  const sorted = lat.subarray(0, ok).sort();
  const obs = Float64Array.from(observe).sort();
  const ownSorted = Float64Array.from(own).sort();
  return {
    name,
    rate,
    sent: total,
    ok,
    errors,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? NaN,
    achieved: ok / elapsed,
    outcomes,
    maxR,
    observeP50: quantile(obs, 0.5),
    ownP50: quantile(ownSorted, 0.5),
    ownP99: quantile(ownSorted, 0.99),
    cpu,
    io,
    loadavg: Math.round(loadavg()[0]! * 100) / 100,
  };
}

/**
 * Diagnostic stand-in for both indexers: answers every observe query at once with a fixed reply
 * (one worker, Dynamo's choice, the bench's block size), without reading the query.
 */
function startStubIndexer(url: string): ChildProcess {
  const replies = ROLES.map((role, i) => {
    const workerId = BigInt(1000 + i * 100_000) as WorkerId;
    const w: WorkerObservation = {
      workerId, dpRank: 0, schedulable: true, deviceOverlapBlocks: 100, K: 6400, hostOverlapBlocks: null, diskOverlapBlocks: null, anyTierOverlapBlocks: 100,
      R: 1, trackedPrefillTokens: 1000, P: 0.12, maxNumBatchedTokens: 8192, effectivePrefillTokens: 1000, newBlocks: 400, activeBlocks: 900, totalKvBlocks: 65536,
      treeBlocks: 3000, reported: null, suspect: null, ages: { indexMs: 20, loadMs: null, bookingMs: 3 }, dynamoCost: 420,
    };
    const bytes = observeReplyCodec.encode({
      pool: POOLS[role].pool, blockSize: BLOCK, queryDurationUs: 30, atMs: Date.now(), workers: [w], pending: { requests: 0, tokens: 0 },
      dynamoChoice: { workerId, dpRank: 0, cost: 420, policy: { name: 'kv_router:min_cost', params: { overlapScoreWeight: 1 } } }, snapshotRestoredAtMs: null,
    });
    return { subject: observeSubject(POOLS[role].pool), b64: Buffer.from(bytes).toString('base64') };
  });
  const code = `import { connect } from '@nats-io/transport-node';
const nc = await connect({ servers: ${JSON.stringify(url)} });
for (const r of ${JSON.stringify(replies)}) { const body = new Uint8Array(Buffer.from(r.b64, 'base64')); nc.subscribe(r.subject, { callback: (e, m) => { if (!e) m.respond(body); } }); }
await nc.flush(); process.stderr.write('stub indexer ready\\n');`;
  return child('stub-indexer', ['--input-type=module', '-e', code], {});
}

const us = (x: number): number | null => (Number.isFinite(x) ? Math.round(x) : null);
const f = (x: number, w: number): string => (Number.isFinite(x) ? x.toFixed(0) : 'n/a').padStart(w);

async function main(): Promise<void> {
  const url = await startNats();
  log(`nats ${url}; ${WORKERS} workers per pool, block ${BLOCK}, ${SECONDS}s per run, rates ${RATES.join(',')}, scenarios ${SCENARIOS.join(',')}, modes ${MODES.join(',')}`);
  const nc = await connect({ servers: url });
  const common = { VANTAGE_NATS_URL: url, VANTAGE_LOG_LEVEL: 'warn', NODE_ENV: 'production' };
  const echoSubject = 'bench.echo';
  const echoProc = child('echo', ['--input-type=module', '-e', `import { connect } from '@nats-io/transport-node'; const nc = await connect({ servers: ${JSON.stringify(url)} }); nc.subscribe(${JSON.stringify(echoSubject)}, { callback: (e, m) => { if (!e) m.respond(m.data); } }); await nc.flush(); process.stderr.write('echo ready\\n');`], common);
  cpuOf['responder']!.push(echoProc);

  const paramsFile = join(dir, 'params.json');
  writeFileSync(paramsFile, serializeParameterSet(benchParameterSet()));

  /** Indexers (one per pool), for the remote phase only: a decision service holding its pools needs none to route. */
  const startIndexers = async (): Promise<ChildProcess[]> => {
    const procs: ChildProcess[] = [];
    if (STUB_INDEXER) procs.push(startStubIndexer(url));
    else {
      for (const role of ROLES) {
        const p = POOLS[role];
        procs.push(
          child(`indexer-${role}`, ['--import', 'tsx', 'services/indexer/src/main.ts'], {
            ...common,
            VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: p.pool, blockSize: BLOCK, namespace: p.ns, component: 'backend' }]),
            VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
            VANTAGE_INDEXER_WORKER_TTL_MS: '3600000',
          }),
        );
      }
    }
    cpuOf['indexers']!.push(...procs);
    // An indexer answers an empty observe with a BAD_REQUEST reply (headers): any reply means it is up.
    await waitFor(
      'indexers',
      async () => {
        for (const role of ROLES) {
          const up = await nc.request(`vantage.v1.observe.${POOLS[role].pool}`, new TextEncoder().encode('{}'), { timeout: 500 }).then(() => true, () => false);
          if (!up) return false;
        }
        return true;
      },
      60_000,
      200,
    );
    return procs;
  };

  // A decision service per mode: `local` (holds both pools, fed from the subjects like an indexer) on
  // vantage.v1.route; `remote` (asks the indexers on every route) on its own subject.
  const profArgs = CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', resolve(CPU_PROF)] : [];
  const decisionEnv = (source: 'local' | 'remote'): Record<string, string> => ({
    ...common,
    VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: POOLS.efficient.model,
    VANTAGE_DECISION_POOLS_EFFICIENT_POOL: POOLS.efficient.pool,
    VANTAGE_DECISION_POOLS_EFFICIENT_BLOCK_SIZE: String(BLOCK),
    VANTAGE_DECISION_POOLS_EFFICIENT_SOURCE: source,
    VANTAGE_DECISION_POOLS_EFFICIENT_NAMESPACE: POOLS.efficient.ns,
    VANTAGE_DECISION_POOLS_CAPABLE_MODEL: POOLS.capable.model,
    VANTAGE_DECISION_POOLS_CAPABLE_POOL: POOLS.capable.pool,
    VANTAGE_DECISION_POOLS_CAPABLE_BLOCK_SIZE: String(BLOCK),
    VANTAGE_DECISION_POOLS_CAPABLE_SOURCE: source,
    VANTAGE_DECISION_POOLS_CAPABLE_NAMESPACE: POOLS.capable.ns,
    VANTAGE_DECISION_LOCAL_SNAPSHOT_BUCKET: '',
    VANTAGE_DECISION_LOCAL_WORKER_TTL_MS: '3600000',
    VANTAGE_DECISION_PARAMETER_SET_FILE: paramsFile,
    VANTAGE_DECISION_MAX_IN_FLIGHT: '8192',
    ...(source === 'remote' ? { VANTAGE_DECISION_SUBJECT: REMOTE_SUBJECT, VANTAGE_DECISION_QUEUE_GROUP: 'bench-remote' } : {}),
  });
  const subjectOf = (mode: 'local' | 'remote'): string => (mode === 'local' ? 'vantage.v1.route' : REMOTE_SUBJECT);

  // Workers: registrations and KV state (each worker holds a prefix of one session's 128k prompt),
  // published once per phase, after that phase's processes have subscribed.
  const prompts = new Map<number, Uint32Array>();
  for (let s = 0; s < SESSIONS; s++) prompts.set(s, tokensFor(s, SESSION_TOKENS));
  const spec = { efficient: { ...POOLS.efficient, blockSize: BLOCK }, capable: { ...POOLS.capable, blockSize: BLOCK } };
  const client = new GatewayClient({ nc, routeTimeoutMs: 5000, pools: spec });
  const sessionHashes = [...prompts.values()].map((t) => client.hashPrompt('efficient', t));
  const publishWorkers = async (): Promise<void> => {
    for (const role of ROLES) {
      const p = POOLS[role];
      for (let w = 0; w < WORKERS; w++) {
        const workerId = BigInt(1000 + w + (role === 'capable' ? 100_000 : 0)) as WorkerId;
        nc.publish(
          workersSubject(p.pool),
          workerRegistrationCodec.encode({
            kind: 'register',
            pool: p.pool,
            workerId,
            atMs: Date.now(),
            capacity: WORKER_CAPACITY,
            ttlMs: 3_600_000,
            endpoint: `http://${p.pool}-${w}:8000`,
            model: p.model,
          }),
        );
        const event = storedPrefixEvent(workerId, w, sessionHashes);
        nc.publish(kvEventsSubject(p.ns, 'backend'), encodeEventPlaneMessage({ publisherId: workerId, sequence: 1n, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event }));
      }
    }
    await nc.flush();
  };
  const probeBody = client.encodeRoute({ requestId: 'warm', sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompts.get(0)!.subarray(0, 1024) }, capable: { tokenIds: prompts.get(0)!.subarray(0, 1024) } } });
  const sees = (subject: string) => async (): Promise<boolean> =>
    nc.request(subject, probeBody, { timeout: 2000 }).then(
      (m) => {
        if (m.headers?.get('Nats-Service-Error-Code')) return false;
        const r = JSON.parse(new TextDecoder().decode(m.data)) as { observations: Record<string, { workerId: string | null } | null> };
        return r.observations['efficient']?.workerId != null && r.observations['capable']?.workerId != null;
      },
      () => false,
    );

  /** Start one phase's processes: its decision service (and, for remote, the indexers), then the workers. */
  const startPhase = async (mode: 'local' | 'remote'): Promise<{ decision: ChildProcess; procs: ChildProcess[] }> => {
    const procs = mode === 'remote' ? await startIndexers() : [];
    const decision = child(`decision-${mode}`, [...DECISION_NODE_ARGS, ...(mode === 'local' ? profArgs : []), ...(process.env.BENCH_DECISION_NODE_ARGS ?? '').split(' ').filter((a) => a !== ''), '--import', 'tsx', 'services/decision/src/main.ts'], decisionEnv(mode));
    procs.push(decision);
    cpuOf[mode === 'local' ? 'decision' : 'decision_remote']!.push(decision);
    ioPid = decision.pid;
    const subject = subjectOf(mode);
    await waitFor(`decision service (${mode} pools) subscribed`, async () => nc.request(subject, new TextEncoder().encode('{}'), { timeout: 500 }).then(() => true, () => false), 60_000, 200);
    await publishWorkers();
    await waitFor(`decision service (${mode} pools) sees the workers`, sees(subject), 60_000, 250);
    return { decision, procs };
  };
  const stopPhase = async (procs: readonly ChildProcess[]): Promise<void> => {
    await Promise.all(procs.map(async (c) => {
      if (c.exitCode !== null || c.signalCode !== null) return;
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await gone;
    }));
    ioPid = undefined;
  };

  const decodeRoute = (data: Uint8Array): Outcome => {
    const r = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as {
      pool?: string | null;
      reason: string;
      fallback?: string | null;
      observations: Record<string, { R: number | null; queryDurationUs: number | null } | null>;
      queryDurationUs: number;
      decisionDurationUs: number;
    };
    let maxR = 0;
    let observeUs = 0;
    for (const o of Object.values(r.observations)) {
      if (o === null) continue;
      if (o.R !== null && o.R > maxR) maxR = o.R;
      if (o.queryDurationUs !== null && o.queryDurationUs > observeUs) observeUs = o.queryDurationUs;
    }
    return { ok: true, pool: r.pool ?? null, reason: r.reason, fallback: r.fallback ?? null, maxR, observeUs, ownUs: r.decisionDurationUs - r.queryDurationUs };
  };

  const makeSenders = (size: number, form: 'hashes' | 'token_ids'): { route: (mode: 'local' | 'remote') => (id: string) => Promise<Outcome>; echo: (id: string) => Promise<Outcome>; payloadBytes: number } => {
    // Several sessions' prompts so that different workers are chosen.
    const tpls = PROMPT_SESSIONS.map((s) => {
      const t = prompts.get(s)!.subarray(0, size);
      return template(client.encodeRoute({ requestId: ID_PLACEHOLDER, sessionId: `bench-${s}`, stageProposal: 'efficient', sendTokenIds: form === 'token_ids', prompts: { efficient: { tokenIds: t }, capable: { tokenIds: t } } }));
    });
    let k = 0;
    const bodyFor = (id: string): Uint8Array => {
      const tp = tpls[k++ % tpls.length]!;
      const b = tp.bytes.slice();
      Buffer.from(b.buffer, b.byteOffset, b.byteLength).write(id, tp.at, 'latin1');
      return b;
    };
    return {
      payloadBytes: tpls[0]!.bytes.length,
      route: (mode) => {
        const subject = subjectOf(mode);
        return async (id) => {
          const m = await nc.request(subject, bodyFor(id), { timeout: 5000 });
          if (m.headers?.get('Nats-Service-Error-Code')) return { ok: false };
          return decodeRoute(m.data);
        };
      },
      echo: async (id) => {
        await nc.request(echoSubject, bodyFor(id), { timeout: 5000 });
        return { ok: true };
      },
    };
  };

  const summary: Record<string, unknown>[] = [];
  const line = (label: string, r: RunResult, e: RunResult | null, payloadBytes: number): void => {
    log(
      `${label.padEnd(15)} ${String(r.rate).padStart(5)}/s ${(payloadBytes / 1024).toFixed(0).padStart(5)} KiB | route p50 ${f(r.p50, 7)} p99 ${f(r.p99, 8)} µs ok ${r.ok}/${r.sent} (${r.achieved.toFixed(0)}/s)` +
        ` | observe p50 ${f(r.observeP50, 6)} own p50 ${f(r.ownP50, 5)} µs` +
        (e === null ? '' : ` | echo p50 ${f(e.p50, 6)} p99 ${f(e.p99, 7)} µs | route-echo p50 ${f(r.p50 - e.p50, 7)} µs`) +
        ` | max R ${r.maxR} | ${JSON.stringify(r.outcomes)}` +
        ` | cpu µs/route ${JSON.stringify(r.cpu)} decision io/route ${JSON.stringify(r.io)}` +
        (e === null ? '' : ` echo cpu µs/req ${JSON.stringify({ nats: e.cpu['nats'], responder: e.cpu['responder'], generator: e.cpu['generator'] })}`) +
        ` load ${r.loadavg}`,
    );
  };
  const row = (label: string, r: RunResult, e: RunResult | null, payloadBytes: number): Record<string, unknown> => ({
    prompt: label,
    rate: r.rate,
    payloadBytes,
    route_p50_us: us(r.p50),
    route_p99_us: us(r.p99),
    route_max_us: us(r.max),
    route_ok: r.ok,
    route_sent: r.sent,
    route_achieved_per_s: Math.round(r.achieved),
    observe_p50_us: us(r.observeP50),
    decision_own_p50_us: us(r.ownP50),
    decision_own_p99_us: us(r.ownP99),
    max_booked_R: r.maxR,
    outcomes: r.outcomes,
    cpu_us_per_route: r.cpu,
    decision_io_per_route: r.io,
    loadavg_1m: r.loadavg,
    ...(e === null ? {} : { echo_p50_us: us(e.p50), echo_p99_us: us(e.p99), echo_ok: e.ok, echo_sent: e.sent, echo_cpu_us_per_request: { nats: e.cpu['nats'], responder: e.cpu['responder'], generator: e.cpu['generator'] } }),
  });

  // Between runs: let the previous run's backlog drain (a probe route answered within 20 ms, at most 15 s).
  const settle = async (mode: 'local' | 'remote'): Promise<void> => {
    const until = performance.now() + 15_000;
    while (performance.now() < until) {
      const t = performance.now();
      const fast = await nc.request(subjectOf(mode), probeBody, { timeout: 5000 }).then(
        (m) => {
          const r = JSON.parse(new TextDecoder().decode(m.data)) as { requestId: string; pool: string | null };
          if (r.pool !== null) sendDone(nc, r.requestId, r.pool);
          return performance.now() - t < 20;
        },
        () => false,
      );
      if (fast) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    log('settle: the system did not drain within 15 s; measuring anyway');
  };

  const runScenario = async (label: string, mode: 'local' | 'remote'): Promise<void> => {
    const m = /^(\d+)k-(hashes|token_ids)$/.exec(label);
    if (!m) throw new Error(`unknown scenario ${label}`);
    const size = Number(m[1]) * 1024;
    const form = m[2] as 'hashes' | 'token_ids';
    const s = makeSenders(size, form);
    const route = s.route(mode);
    // Warm-up (JIT, connections): the decision service, the indexers and the echo responder.
    await settle(mode);
    if (WARMUP_ROUTES > 0) {
      await openLoop(`warm ${mode} ${label}`, WARMUP_RATE, WARMUP_ROUTES / WARMUP_RATE, route, nc);
      await settle(mode);
      await openLoop(`warm echo ${label}`, WARMUP_RATE, Math.min(WARMUP_ROUTES, 1000) / WARMUP_RATE, s.echo, nc);
    }
    for (const rate of RATES) {
      // Token ids at 128k are ~1.6 MB per request: far beyond this machine at 2,000/s; bound the run rather than queue for minutes.
      const seconds = form === 'token_ids' && size > 32768 && rate > 500 ? Math.min(SECONDS, 2) : SECONDS;
      await settle(mode);
      const e = await openLoop(`echo ${label}`, rate, seconds, s.echo, nc);
      await settle(mode);
      const r = await openLoop(`route ${mode} ${label}`, rate, seconds, route, nc);
      line(`${mode} ${label}`, r, e, s.payloadBytes);
      summary.push({ mode, ...row(label, r, e, s.payloadBytes) });
    }
  };

  const maxRate: Record<string, number> = { local: 0, remote: 0, echo: 0 };
  const search: Record<string, unknown>[] = [];
  const runSearch = async (kind: 'local' | 'remote' | 'echo', mode: 'local' | 'remote'): Promise<void> => {
    const sat = makeSenders(32768, 'hashes');
    const send = kind === 'echo' ? sat.echo : sat.route(kind);
    const step = async (rate: number): Promise<boolean> => {
      await settle(mode);
      const r = await openLoop(`search ${kind} ${rate}`, rate, SECONDS, send, nc);
      // Sustained: everything answered at the offered rate, p99 under the limit, no fallback at all (routes).
      const fallbacks = Object.entries(r.outcomes).filter(([k]) => k.startsWith('fallback_')).reduce((n, [, v]) => n + v, 0);
      const good = r.errors === 0 && r.ok === r.sent && r.achieved >= 0.97 * r.rate && r.p99 < P99_LIMIT_US && fallbacks === 0;
      line(`search ${kind} ${good ? 'ok' : 'FAIL'}`, r, null, sat.payloadBytes);
      search.push({ kind, rate, sustained: good, route_p50_us: us(r.p50), route_p99_us: us(r.p99), achieved_per_s: Math.round(r.achieved), fallbacks, outcomes: r.outcomes, cpu_us_per_route: r.cpu, loadavg_1m: r.loadavg });
      if (good) maxRate[kind] = rate;
      return good;
    };
    // Up in steps from SEARCH_FROM until a step fails; when SEARCH_FROM itself fails, down by halves to 100/s.
    // BENCH_SEARCH_MAX=0: no search.
    if (SEARCH_MAX <= 0) return;
    if (await step(SEARCH_FROM)) {
      for (let rate = SEARCH_FROM + STEP; rate <= SEARCH_MAX; rate += STEP) if (!(await step(rate))) break;
    } else {
      for (let rate = Math.floor(SEARCH_FROM / 2); rate >= 100; rate = Math.floor(rate / 2)) if (await step(rate)) break;
    }
    log(`max sustained offered rate, ${kind} (32k hashes, p99 < ${P99_LIMIT_US} µs, all answered, no fallbacks): ${maxRate[kind]}/s`);
  };

  // Memory the pools cost a replica: resident set of each phase's decision service, read before it stops.
  const rssMiB = (c: ChildProcess): number | null => {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${c.pid}/status`, 'utf8'));
      return m === null ? null : Math.round(Number(m[1]) / 1024);
    } catch {
      return null;
    }
  };
  const rss: Record<string, number | null> = { local: null, remote: null };

  // One phase per mode, each with only its own processes beside nats-server, the echo responder and this
  // generator: block-hash scenarios, the rate search (the echo's in the first phase), then token ids
  // (whose overload must not leak into the search).
  for (const [i, mode] of MODES.entries()) {
    log(`phase ${mode}: starting ${mode === 'remote' ? 'the indexers and ' : ''}the decision service`);
    const phase = await startPhase(mode);
    for (const label of SCENARIOS.filter((x) => x.endsWith('hashes'))) await runScenario(label, mode);
    await runSearch(mode, mode);
    if (i === 0) await runSearch('echo', mode);
    for (const label of SCENARIOS.filter((x) => !x.endsWith('hashes'))) await runScenario(label, mode);
    rss[mode] = rssMiB(phase.decision);
    await stopPhase(phase.procs);
    if (mode === 'local' && CPU_PROF) log(`decision service CPU profile written to ${resolve(CPU_PROF)}`);
  }
  log(`resident memory: decision service with local pools ${rss['local']} MiB, with remote pools ${rss['remote']} MiB (2 pools of ${WORKERS} workers)`);

  const at = (mode: string, rate: number): Record<string, unknown> | undefined => summary.find((x) => x['mode'] === mode && x['prompt'] === '32k-hashes' && x['rate'] === rate);
  const head = at('local', HEADLINE_RATE) ?? summary.find((x) => x['mode'] === 'local');
  const remoteHead = at('remote', HEADLINE_RATE) ?? summary.find((x) => x['mode'] === 'remote');
  const fallbacksOf = (x: Record<string, unknown> | undefined): number | null =>
    x === undefined ? null : Object.entries(x['outcomes'] as Record<string, number>).filter(([k]) => k.startsWith('fallback_')).reduce((n, [, v]) => n + v, 0);
  const byRate = RATES.map((rate) => ({ rate, local: at('local', rate), remote: at('remote', rate) })).map(({ rate, local, remote }) => ({
    rate,
    route_p50_us: local?.['route_p50_us'] ?? null,
    route_p99_us: local?.['route_p99_us'] ?? null,
    echo_p50_us: local?.['echo_p50_us'] ?? null,
    fallbacks: fallbacksOf(local),
    remote_route_p50_us: remote?.['route_p50_us'] ?? null,
    remote_route_p99_us: remote?.['route_p99_us'] ?? null,
    remote_fallbacks: fallbacksOf(remote),
  }));
  // The peer operators would otherwise use, in the same run: Dynamo's selection service given the same
  // workload (dynamo-select-peer.ts), 32k block hashes at the same rates, then its own rate search.
  let peer: Awaited<ReturnType<typeof runDynamoSelectPeer>> | null = null;
  let peerError: string | null = null;
  if (DYNAMO_SELECT) {
    try {
      peer = await runDynamoSelectPeer({ scenarios: ['32k-hashes'], rates: RATES, seconds: SECONDS, log: (m) => log(`[dynamo-select] ${m}`) });
    } catch (e) {
      peerError = e instanceof Error ? e.message : String(e);
      log(`Dynamo's selection service could not be measured: ${peerError}`);
    }
  }

  await nc.close();
  const localRss = rss['local'] ?? null;
  const remoteRss = rss['remote'] ?? null;
  process.stdout.write(
    `${JSON.stringify({
      bench: 'decision',
      headline: head === undefined ? null : `32k-hashes @ ${String(head['rate'])}/s`,
      route_p50_us: head?.['route_p50_us'] ?? null,
      route_p99_us: head?.['route_p99_us'] ?? null,
      echo_p50_us: head?.['echo_p50_us'] ?? null,
      echo_p99_us: head?.['echo_p99_us'] ?? null,
      fallbacks: fallbacksOf(head),
      max_routes_per_s: maxRate['local'],
      echo_max_per_s: maxRate['echo'],
      remote_route_p50_us: remoteHead?.['route_p50_us'] ?? null,
      remote_route_p99_us: remoteHead?.['route_p99_us'] ?? null,
      remote_fallbacks: fallbacksOf(remoteHead),
      remote_max_routes_per_s: maxRate['remote'],
      cpu_us_per_route: head?.['cpu_us_per_route'] ?? null,
      remote_cpu_us_per_route: remoteHead?.['cpu_us_per_route'] ?? null,
      by_rate: byRate,
      ...(peer === null ? {} : { dynamo_select_p50_us: peer.dynamo_select_p50_us, dynamo_select_max_per_s: peer.dynamo_select_max_per_s }),
      ...(peerError === null ? {} : { dynamo_select_error: peerError }),
      decision_rss_mib_local: localRss,
      decision_rss_mib_remote: remoteRss,
      workers_per_pool: WORKERS,
      seconds_per_run: SECONDS,
      warmup_routes_per_scenario: WARMUP_ROUTES,
      scenarios: summary,
      search,
    })}\n`,
  );
}

const cleanup = (): void => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  setTimeout(() => rmSync(dir, { recursive: true, force: true }), 500).unref();
};
main()
  .then(() => {
    cleanup();
    setTimeout(() => process.exit(0), 1000).unref();
  })
  .catch((e: unknown) => {
    log(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    cleanup();
    setTimeout(() => process.exit(1), 1000).unref();
  });
