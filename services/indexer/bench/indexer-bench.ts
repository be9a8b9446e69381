/**
 * Indexer benchmark over real NATS (`npm run bench:indexer`):
 *
 *   1. ingest: KV events (event-plane envelopes, 4 blocks each) from 64 workers,
 *      sustained events/s applied (publisher kept at most 20k events ahead of the
 *      writer, so nothing is dropped) and publish→applied lag at a fixed rate
 *      (from /metrics polled every 10 ms);
 *   2. observe: open loop at 1,000 and 5,000 requests/s (evenly spaced; see pacing.ts) for 32k-token prompts
 *      (512 local hashes, block size 64) against 64 workers holding varied prefixes,
 *      each with live bookings (BENCH_BOOKINGS_PER_WORKER, default 4) so that R, P and
 *      the new-block count are computed as in production;
 *      Both encodings are measured: binary (a binary request asking for a binary reply, the
 *      headline figures) and JSON (JSON request and reply, the `*_json_*` figures);
 *   3. baseline: a bare NATS request-reply echo in its own process replying with a
 *      payload the size of the observe reply of that encoding, same requests, same offered
 *      rate, measured in the same time window as observe: BENCH_ROUNDS short rounds, each
 *      one observe segment and one echo segment back to back, the order alternating round by
 *      round, after a discarded warm-up at the same rate. Headline figures are medians of the
 *      per-round p50 / p99, and observe − echo is the median of the per-round differences (a
 *      load change on the machine between rounds then moves both sides of a pair alike);
 *      pooled percentiles and the per-round spread are printed too. A rate the sender or a
 *      responder cannot sustain is reported (achieved rate, timeouts), not fatal (once requests
 *      time out, the comparison stops after 3 rounds);
 *   4. profile: where an observe's service time goes (decode, match, selection,
 *      reply encoding), measured in-process on the same data.
 *
 * Per run it also reports the service's own query time (the `queryDurationUs` each binary reply
 * carries: receipt to answer ready, before the reply is encoded; its p50 over all rounds), which
 * separates the indexer's work from transport and queueing in the observe − echo difference.
 * It also reports the CPU time the indexer and the echo process spent per request (from
 * /proc), which unlike latency does not depend on what else the machine is running, and the
 * machine's load average (latency figures from a loaded machine are queueing, not service time).
 * Uses NATS_URL when set, otherwise a private nats-server under .infra/bench.
 * Last stdout line: one JSON object with the figures.
 * Environment knobs: BENCH_ROUNDS (default 8), BENCH_ROUND_SECONDS (segment length, default 1),
 * BENCH_RATES (default "1000,5000"), BENCH_PACING (even or timer; see pacing.ts),
 * BENCH_BOOKINGS_PER_WORKER (default 4), BENCH_INDEXER_NODE_ARGS (extra node flags for the
 * indexer process, e.g. "--cpu-prof --cpu-prof-dir=DIR" to profile the service under load),
 * BENCH_ECHO_BUSY_US (default 0: the echo spins this long on each request before replying, a
 * diagnostic: with about the indexer's extra CPU per query, the echo's latency shows what that much
 * work costs on this machine; the headline comparison is meaningful only with 0), BENCH_NULL (set to 1:
 * the observe side of every comparison is a second echo process, identical to the first, so the
 * printed observe − echo figures are the comparison's own noise on this machine at that moment;
 * the indexer still runs the ingest part, and the target is not judged).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sequenceHashes } from '@vantage/hashing';
import { INFRA_DIR, REPO_ROOT, natsBroker, processCpuUs } from '@vantage/infra';
import { observeReplyOf } from '@vantage/decision-core';
import {
  bookingEventCodec,
  bookingsSubject,
  encodeObserveReplyBinary,
  encodeObserveRequestBinary,
  isObserveReplyBinary,
  observeReplyCodec,
  observeRequestCodec,
  observeSubject,
  workerRegistrationCodec,
  workersSubject,
  type ObserveRequest,
} from '@vantage/protocol';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';
import { decodeBooking } from '@vantage/ingest';
import { handleObserve } from '../src/service';
import { benchBookings, PROMPT_BLOCKS, prompts, rand64, WORKERS, workerIds } from './data';
import { paced, pacingOf } from './pacing';
import { PoolState } from '@vantage/observation';

const BS = 64;
/** observe-vs-echo rounds per (rate, encoding), and the length of each segment (s): one round = one observe and one echo segment. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const ROUND_SECONDS = Number(process.env.BENCH_ROUND_SECONDS ?? 1);
const ECHO_BUSY_US = Number(process.env.BENCH_ECHO_BUSY_US ?? 0);
const NULL_COMPARISON = process.env.BENCH_NULL === '1';
const RATES = (process.env.BENCH_RATES ?? '1000,5000').split(',').map(Number);
/** Live bookings per worker during the observe runs (R, P and active blocks are then real, as in production). */
const BOOKINGS_PER_WORKER = Number(process.env.BENCH_BOOKINGS_PER_WORKER ?? 4);
const POOL = 'bench';
const NS = `bench${process.pid}`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (s: string): void => void process.stdout.write(`${s}\n`);

// ---------------------------------------------------------------------------------
// Data: 8 shared system prompts (128..352 blocks) × 8 continuations = 64 prompts of 512 blocks
// ---------------------------------------------------------------------------------

const eventIds = new Map<bigint, bigint>();
const nextId = (w: bigint): bigint => {
  const id = (eventIds.get(w) ?? 0n) + 1n;
  eventIds.set(w, id);
  return id;
};

function stored(w: WorkerId, seq: BigUint64Array, local: BigUint64Array, from: number, to: number): KvEvent {
  return {
    workerId: w,
    dpRank: 0,
    storageTier: 'device',
    eventId: nextId(w),
    data: {
      kind: 'stored',
      parentHash: from === 0 ? null : (seq[from - 1]! as ExternalHash),
      startPosition: from,
      blockHashes: seq.slice(from, to),
      tokensHashes: local.slice(from, to),
    },
  };
}

/** Preload: worker i holds prompt i's first 32..512 blocks and a shorter prefix of a prompt in another group. */
function preloadEvents(): KvEvent[] {
  const out: KvEvent[] = [];
  for (let i = 0; i < WORKERS; i++) {
    const w = workerIds[i]!;
    const holdings: [number, number][] = [
      [i, 32 + ((i * 37) % 481)],
      [(i + 19) % prompts.length, 16 + ((i * 53) % 200)],
    ];
    for (const [p, len] of holdings) {
      const { local, seq } = prompts[p]!;
      for (let from = 0; from < len; from += 64) out.push(stored(w, seq, local, from, Math.min(len, from + 64)));
    }
  }
  return out;
}

/** Ingest traffic: per worker a scratch chain grown 4 blocks per event and removed every 32 events. */
function ingestEvents(n: number): KvEvent[] {
  const chains = workerIds.map(() => ({ local: new BigUint64Array(128), seq: new BigUint64Array(128) as BigUint64Array, len: 0 }));
  const out: KvEvent[] = [];
  for (let k = 0; out.length < n; k++) {
    const i = k % WORKERS;
    const w = workerIds[i]!;
    const c = chains[i]!;
    if (c.len === 128) {
      out.push({ workerId: w, dpRank: 0, storageTier: 'device', eventId: nextId(w), data: { kind: 'removed', blockHashes: c.seq.slice() } });
      c.len = 0;
      continue;
    }
    if (c.len === 0) {
      for (let b = 0; b < 128; b++) c.local[b] = rand64();
      c.seq = sequenceHashes(c.local);
    }
    out.push(stored(w, c.seq, c.local, c.len, c.len + 4));
    c.len += 4;
  }
  return out;
}

// ---------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------

const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

function spawnTs(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (line: string) => unknown,
  nodeArgs: string[] = [],
): Promise<{ proc: ChildProcess; line: string }> {
  const proc = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
  return new Promise((resolve, reject) => {
    let buf = '';
    proc.stdout!.on('data', (c: Buffer) => {
      buf += c.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (ready(line)) resolve({ proc, line });
      }
    });
    proc.on('exit', (code) => reject(new Error(`${script} exited with ${code}\n${err}`)));
  });
}

async function stopChild(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null) return;
  const gone = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(t);
}

function metricSum(text: string, name: string, match = ''): number {
  let s = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) && line.includes(match)) s += Number(line.slice(line.lastIndexOf(' ') + 1));
  return s;
}

// ---------------------------------------------------------------------------------
// Measurements
// ---------------------------------------------------------------------------------

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** One open-loop segment against one subject: raw latencies (µs) and what was offered and achieved. */
interface Segment {
  lat: number[];
  sent: number;
  /** Replies carrying an error header. */
  errors: number;
  /** Requests that got no reply within REQUEST_TIMEOUT_MS (or failed on the connection). */
  timeouts: number;
  /** Requests sent per second over the sending window (below the offered rate: the sender could not keep up). */
  achievedRate: number;
  /** CPU time (µs) the answering process used over the segment, from /proc. */
  cpuUs: number;
  /** The system (kernel) part of cpuUs. */
  sysUs: number;
  /** The service's own `queryDurationUs` of each binary observe reply (receipt → answer ready, before encoding). */
  query: number[];
}

const REQUEST_TIMEOUT_MS = 2_000;

/** When an open loop's requests go out (BENCH_PACING, default even; see pacing.ts). */
const PACING = pacingOf(process.env.BENCH_PACING);

/**
 * Open loop: requests are sent on schedule (see pacing.ts), whatever the replies do; latency is from
 * the send to the reply (µs). The segment ends once every request has been answered or timed out,
 * so the next segment starts on an idle responder.
 */
async function openLoop(nc: NatsConnection, subject: string, payloads: Uint8Array[], rate: number, seconds: number, pid: number | undefined): Promise<Segment> {
  const total = Math.max(1, Math.round(rate * seconds));
  const lat: number[] = [];
  const query: number[] = [];
  let errors = 0;
  let timeouts = 0;
  const inflight: Promise<void>[] = [];
  const c0 = processCpuUs(pid);
  const start = performance.now();
  await paced(PACING, total, rate, (k) => {
    const t0 = performance.now();
    const payload = payloads[k % payloads.length]!;
    inflight.push(
      nc.request(subject, payload, { timeout: REQUEST_TIMEOUT_MS }).then(
        (m) => {
          if (m.headers?.get('Vantage-Error-Code')) errors++;
          else {
            lat.push((performance.now() - t0) * 1000);
            // queryDurationUs: the f64 at byte 16 of the binary reply's header (packages/protocol/src/observe-binary.ts).
            if (isObserveReplyBinary(m.data)) query.push(Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength).readDoubleLE(16));
          }
        },
        () => void timeouts++,
      ),
    );
  });
  const sendSeconds = Math.max((performance.now() - start) / 1000, seconds);
  const sent = inflight.length;
  await Promise.all(inflight);
  const c1 = processCpuUs(pid);
  const cpuUs = c0 === null || c1 === null ? NaN : c1.user + c1.sys - c0.user - c0.sys;
  const sysUs = c0 === null || c1 === null ? NaN : c1.sys - c0.sys;
  return { lat, sent, errors, timeouts, achievedRate: sent / sendSeconds, cpuUs, sysUs, query };
}

const median = (xs: number[]): number => pct([...xs].sort((a, b) => a - b), 50);
const sortedOf = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);

/** Figures of one target (observe or echo) over all rounds of a (rate, encoding) comparison. */
interface TargetFigures {
  /** Median over rounds of each round's p50 / p99 (µs): the headline, robust to one disturbed round. */
  p50: number;
  p99: number;
  /** Percentiles of all rounds' latencies pooled (µs). */
  pooledP50: number;
  pooledP90: number;
  pooledP99: number;
  max: number;
  sent: number;
  errors: number;
  timeouts: number;
  /** Lowest per-round achieved send rate (requests/s). */
  minAchievedRate: number;
  cpuPerRequestUs: number;
  /** The kernel's share of it (system time: socket reads and writes, wake-ups). */
  sysPerRequestUs: number;
  roundP50s: number[];
  /** p50 of the service's own query time over all rounds (binary replies only; NaN otherwise). */
  queryP50: number;
}

function figures(segs: Segment[]): TargetFigures {
  const all = sortedOf(segs.flatMap((s) => s.lat));
  const sent = segs.reduce((a, s) => a + s.sent, 0);
  return {
    p50: median(segs.map((s) => pct(sortedOf(s.lat), 50))),
    p99: median(segs.map((s) => pct(sortedOf(s.lat), 99))),
    pooledP50: pct(all, 50),
    pooledP90: pct(all, 90),
    pooledP99: pct(all, 99),
    max: all[all.length - 1] ?? NaN,
    sent,
    errors: segs.reduce((a, s) => a + s.errors, 0),
    timeouts: segs.reduce((a, s) => a + s.timeouts, 0),
    minAchievedRate: Math.min(...segs.map((s) => s.achievedRate)),
    cpuPerRequestUs: segs.reduce((a, s) => a + s.cpuUs, 0) / sent,
    sysPerRequestUs: segs.reduce((a, s) => a + s.sysUs, 0) / sent,
    roundP50s: segs.map((s) => pct(sortedOf(s.lat), 50)),
    queryP50: pct(sortedOf(segs.flatMap((s) => s.query)), 50),
  };
}

/**
 * observe and the echo compared in the same time window: ROUNDS short rounds, each one segment of
 * observe and one of echo back to back (the order alternating round by round, so a drift in the
 * machine's load favours neither), same requests, same offered rate, same reply size. A warm-up
 * round at the same rate is run first and discarded. The comparison is the median over rounds of
 * the per-round difference of p50s (paired, so a load change between rounds cancels out).
 */
async function compare(
  nc: NatsConnection,
  observe: { subject: string; pid: number | undefined },
  echo: { subject: string; pid: number | undefined },
  payloads: Uint8Array[],
  rate: number,
): Promise<{ observe: TargetFigures; echo: TargetFigures; rounds: number; deltaP50: number; deltaP50Min: number; deltaP50Max: number; observeFaster: number }> {
  const warm = Math.min(0.5, ROUND_SECONDS);
  await openLoop(nc, observe.subject, payloads, rate, warm, observe.pid);
  await openLoop(nc, echo.subject, payloads, rate, warm, echo.pid);
  const o: Segment[] = [];
  const e: Segment[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    if (r % 2 === 0) {
      o.push(await openLoop(nc, observe.subject, payloads, rate, ROUND_SECONDS, observe.pid));
      e.push(await openLoop(nc, echo.subject, payloads, rate, ROUND_SECONDS, echo.pid));
    } else {
      e.push(await openLoop(nc, echo.subject, payloads, rate, ROUND_SECONDS, echo.pid));
      o.push(await openLoop(nc, observe.subject, payloads, rate, ROUND_SECONDS, observe.pid));
    }
    // Saturated (requests timing out): more rounds would only add minutes of backlog, not information.
    if (r >= 2 && o.concat(e).some((s) => s.timeouts > 0)) break;
  }
  const of = figures(o);
  const ef = figures(e);
  const deltas = of.roundP50s.map((p, i) => p - ef.roundP50s[i]!);
  const finite = deltas.filter(Number.isFinite);
  return {
    observe: of,
    echo: ef,
    rounds: o.length,
    deltaP50: median(finite),
    deltaP50Min: finite.length ? Math.min(...finite) : NaN,
    deltaP50Max: finite.length ? Math.max(...finite) : NaN,
    observeFaster: deltas.filter((d) => d < 0).length,
  };
}

function timeIt(iters: number, fn: () => unknown): number {
  for (let i = 0; i < Math.min(200, iters); i++) fn();
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) fn();
  return ((performance.now() - t0) * 1000) / iters;
}

// ---------------------------------------------------------------------------------

async function main(): Promise<void> {
  const benchStart = performance.now();
  let natsUrl = process.env.NATS_URL;
  let cleanupNats: (() => Promise<void>) | null = null;
  if (!natsUrl) {
    const dir = join(INFRA_DIR, 'bench', `nats-${process.pid}-${Date.now()}`);
    mkdirSync(dir, { recursive: true });
    const n = await natsBroker({ dir, attached: true });
    await n.start();
    natsUrl = n.url;
    cleanupNats = async () => {
      await n.stop(5_000);
      rmSync(dir, { recursive: true, force: true });
    };
  }
  log(`nats: ${natsUrl}${cleanupNats ? ' (private)' : ' (NATS_URL)'}`);
  if (NULL_COMPARISON) log('diagnostic: the observe side is a second, identical echo (BENCH_NULL=1); observe − echo is the comparison\'s own noise');
  if (ECHO_BUSY_US > 0) log(`diagnostic: the echo spins ${ECHO_BUSY_US} µs per request (BENCH_ECHO_BUSY_US); observe − echo is then not the target's comparison`);

  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VANTAGE_') && v !== undefined) env[k] = v;
  Object.assign(env, {
    VANTAGE_NATS_URL: natsUrl,
    VANTAGE_HTTP_PORT: '0',
    VANTAGE_LOG_LEVEL: 'info', // the 'service started' line carries the ops port; nothing is logged per message
    VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: POOL, blockSize: BS, namespace: NS }]),
    VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
  });
  // BENCH_INDEXER_NODE_ARGS: extra node flags for the indexer only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const indexerNodeArgs = (process.env.BENCH_INDEXER_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const { proc: indexer, line } = await spawnTs(join(REPO_ROOT, 'services/indexer/src/main.ts'), [], env, (l) => l.includes('"service started"'), indexerNodeArgs);
  const opsPort = Number((JSON.parse(line) as { opsPort: number }).opsPort);
  const metrics = async (): Promise<string> => (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
  const applied = async (): Promise<number> => metricSum(await metrics(), 'vantage_indexer_events_applied_total', `pool="${POOL}"`);
  log(`indexer pid ${indexer.pid}, ops port ${opsPort}`);

  const nc = await connect({ servers: natsUrl });
  const subject = kvEventsSubject(NS, 'backend');
  let envSeq = 0n;
  const encode = (e: KvEvent): Uint8Array =>
    encodeEventPlaneMessage({ publisherId: 1n, sequence: envSeq++, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event: e });

  // Registrations (capacity known: P is computed) and the preload.
  for (const w of workerIds) {
    nc.publish(
      workersSubject(POOL),
      workerRegistrationCodec.encode({
        kind: 'register',
        pool: POOL,
        workerId: w,
        atMs: Date.now(),
        capacity: { blockSize: BS, totalKvBlocks: 100_000, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true },
        ttlMs: 3_600_000,
        endpoint: null,
        model: null,
      }),
    );
  }
  const preload = preloadEvents();
  for (const e of preload) nc.publish(subject, encode(e));
  await nc.flush();
  while ((await applied()) < preload.length + WORKERS) await sleep(20);
  log(`preloaded ${preload.length} events (${WORKERS} workers)`);

  // --- 1a. sustained ingest (closed loop on the writer's progress: at most 20k ahead) ---
  const N = 120_000;
  const ingest = ingestEvents(N + 40_000).map(encode);
  const base = await applied();
  let polls = 0;
  const cpu0 = processCpuUs(indexer.pid);
  const t0 = performance.now();
  let pub = 0;
  while (pub < N) {
    polls++;
    const done = (await applied()) - base;
    const room = Math.min(N - pub, 20_000 - (pub - done));
    for (let i = 0; i < room; i++) nc.publish(subject, ingest[pub++]!);
    await nc.flush();
    if (room <= 0) await sleep(5);
  }
  while ((await applied()) - base < N) {
    polls++;
    await sleep(5);
  }
  const ingestSeconds = (performance.now() - t0) / 1000;
  const cpu1 = processCpuUs(indexer.pid);
  // The indexer's CPU per applied event (user + sys, /proc), which unlike the rate does not depend on what else runs; it includes rendering /metrics for the progress polls.
  const ingestCpuUs = cpu0 === null || cpu1 === null ? NaN : (cpu1.user + cpu1.sys - cpu0.user - cpu0.sys) / N;
  const ingestRate = N / ingestSeconds;
  const dropped = metricSum(await metrics(), 'vantage_indexer_messages_dropped_total');
  log(`ingest: ${N} events in ${ingestSeconds.toFixed(2)} s = ${ingestRate.toFixed(0)} events/s applied (dropped ${dropped}); indexer CPU ${ingestCpuUs.toFixed(1)} µs per event, ${polls} progress polls of /metrics`);

  // --- 1b. lag at a fixed rate: 20k events/s for 2 s, /metrics polled every 10 ms ---
  const lagRate = 20_000;
  const lagN = 40_000;
  const pubAt = new Float64Array(lagN);
  const lagBase = await applied();
  const lags: number[] = [];
  let lagPub = 0;
  const lagStart = performance.now();
  let polling = true;
  const poller = (async () => {
    let seen = 0;
    while (polling) {
      const c = (await applied()) - lagBase;
      const t = performance.now();
      if (c > seen) {
        for (let i = seen; i < c && i < lagPub; i++) lags.push(t - pubAt[i]!);
        seen = c;
      }
      if (seen >= lagN) break;
      await sleep(10);
    }
  })();
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(lagN, Math.floor(((performance.now() - lagStart) * lagRate) / 1000));
      const now = performance.now();
      while (lagPub < due) {
        pubAt[lagPub] = now;
        nc.publish(subject, ingest[N + lagPub]!);
        lagPub++;
      }
      if (lagPub >= lagN) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  await nc.flush();
  await Promise.race([poller, sleep(15_000)]);
  polling = false;
  lags.sort((a, b) => a - b);
  const lagP50 = pct(lags, 50);
  const lagP99 = pct(lags, 99);
  log(`ingest lag at ${lagRate} events/s: p50 ${lagP50.toFixed(1)} ms, p99 ${lagP99.toFixed(1)} ms (${lags.length} samples, 10 ms polling)`);

  // --- 2. observe, open loop, with live bookings on every worker ---
  const bookBase = await applied();
  const toBook = benchBookings(POOL, BOOKINGS_PER_WORKER, BS);
  for (const b of toBook) nc.publish(bookingsSubject(POOL), bookingEventCodec.encode(b));
  await nc.flush();
  while ((await applied()) - bookBase < toBook.length) await sleep(20);
  log(`booked ${toBook.length} requests (${BOOKINGS_PER_WORKER} per worker, 32k tokens each)`);
  // Both reply encodings, each against an echo replying with a payload of its own size.
  const ENCODINGS = ['binary', 'json'] as const;
  type Enc = (typeof ENCODINGS)[number];
  // With a request id, as the decision service sends its queries; binary replies are asked for in
  // binary requests, JSON replies in JSON requests (each encoding end to end).
  const requestsOf = (enc: Enc): Uint8Array[] =>
    prompts.map((p, i) => {
      const r: ObserveRequest = { requestId: `bench-${i}`, prompt: { kind: 'local_hashes', localHashes: p.local, loraName: null }, promptTokens: PROMPT_BLOCKS * BS, replyEncoding: enc };
      return enc === 'binary' ? encodeObserveRequestBinary(r) : observeRequestCodec.encode(r);
    });
  const reqs: Record<Enc, Uint8Array[]> = { binary: requestsOf('binary'), json: requestsOf('json') };
  const requests = reqs.json;
  const replyBytesOf = {} as Record<Enc, number>;
  const echoSubjects = {} as Record<Enc, string>;
  const echoes: ChildProcess[] = [];
  const echoOf = {} as Record<Enc, ChildProcess>;
  /** The observe side of each comparison: the indexer, or with BENCH_NULL=1 a second echo. */
  const observedOf = {} as Record<Enc, { subject: string; pid: number | undefined }>;
  const observedName = NULL_COMPARISON ? 'twin echo (observe side)' : 'observe';
  for (const enc of ENCODINGS) {
    const sample = await nc.request(observeSubject(POOL), reqs[enc][0]!, { timeout: 5_000 });
    const check = observeReplyCodec.decode(sample.data);
    if (!check.ok || check.value.workers.length !== WORKERS) throw new Error(`observe (${enc}) answered ${check.ok ? `${check.value.workers.length} workers` : check.reason}`);
    replyBytesOf[enc] = sample.data.length;
    log(`observe (${enc} request and reply): request ${reqs[enc][0]!.length} bytes, reply ${sample.data.length} bytes, ${WORKERS} workers`);
    for (let i = 0; i < 500; i++) await nc.request(observeSubject(POOL), reqs[enc][i % prompts.length]!, { timeout: 5_000 }); // warm-up
    echoSubjects[enc] = `bench.echo.${enc}.${process.pid}`;
    const { proc } = await spawnTs(join(REPO_ROOT, 'services/indexer/bench/echo-server.ts'), [natsUrl, echoSubjects[enc], String(sample.data.length), String(ECHO_BUSY_US)], env, (l) => l === 'ready');
    echoes.push(proc);
    echoOf[enc] = proc;
    for (let i = 0; i < 500; i++) await nc.request(echoSubjects[enc], reqs[enc][i % prompts.length]!, { timeout: 5_000 });
    if (NULL_COMPARISON) {
      const subject = `${echoSubjects[enc]}.null`;
      const twin = await spawnTs(join(REPO_ROOT, 'services/indexer/bench/echo-server.ts'), [natsUrl, subject, String(sample.data.length), '0'], env, (l) => l === 'ready');
      echoes.push(twin.proc);
      for (let i = 0; i < 500; i++) await nc.request(subject, reqs[enc][i % prompts.length]!, { timeout: 5_000 });
      observedOf[enc] = { subject, pid: twin.proc.pid };
    } else observedOf[enc] = { subject: observeSubject(POOL), pid: indexer.pid };
  }
  const replyBytes = replyBytesOf.json;

  const results: Record<string, number | boolean> = {};
  const loads: number[] = [];
  const svcBefore = await metrics();
  for (const rate of RATES) {
    for (const enc of ENCODINGS) {
      const c = await compare(nc, observedOf[enc], { subject: echoSubjects[enc], pid: echoOf[enc].pid }, reqs[enc], rate);
      const load = loadavg()[0]!;
      loads.push(load);
      const { observe: o, echo: e } = c;
      const fmt = (f: TargetFigures): string =>
        `p50 ${f.p50.toFixed(0)} µs p99 ${f.p99.toFixed(0)} (pooled p50 ${f.pooledP50.toFixed(0)} p90 ${f.pooledP90.toFixed(0)} p99 ${f.pooledP99.toFixed(0)} max ${f.max.toFixed(0)})`;
      const shortfall = (f: TargetFigures): string =>
        f.timeouts > 0 || f.errors > 0 || f.minAchievedRate < 0.95 * rate
          ? ` NOT SUSTAINED: ${f.timeouts} timeouts, ${f.errors} errors, lowest round sent at ${f.minAchievedRate.toFixed(0)}/s of ${rate}/s`
          : '';
      log(
        `${String(rate).padStart(5)} req/s ${enc.padEnd(6)} ${c.rounds} rounds × ${ROUND_SECONDS} s each, ${PACING} pacing${c.rounds < ROUNDS ? ' (saturated: stopped early)' : ''}` +
          ` | ${observedName} ${fmt(o)}${shortfall(o)} | echo (${replyBytesOf[enc]} B) ${fmt(e)}${shortfall(e)}` +
          ` | Δp50 median ${c.deltaP50.toFixed(0)} µs (rounds ${c.deltaP50Min.toFixed(0)}..${c.deltaP50Max.toFixed(0)}, observe faster in ${c.observeFaster}/${c.rounds})` +
          ` | CPU per request: ${NULL_COMPARISON ? 'twin echo' : 'indexer'} ${o.cpuPerRequestUs.toFixed(0)} µs (kernel ${o.sysPerRequestUs.toFixed(0)}), echo ${e.cpuPerRequestUs.toFixed(0)} µs (kernel ${e.sysPerRequestUs.toFixed(0)})` +
          (Number.isFinite(o.queryP50) ? ` | service's own query time p50 ${o.queryP50.toFixed(0)} µs` : '') +
          ` | load ${load.toFixed(2)}`,
      );
      const tag = enc === 'binary' ? `${rate}` : `json_${rate}`;
      const sustained = (f: TargetFigures): boolean => f.timeouts === 0 && f.errors === 0 && f.minAchievedRate >= 0.95 * rate;
      Object.assign(results, {
        [`observe_${tag}_p50_us`]: Math.round(o.p50),
        [`observe_${tag}_p99_us`]: Math.round(o.p99),
        [`observe_${tag}_pooled_p90_us`]: Math.round(o.pooledP90),
        [`observe_${tag}_pooled_p99_us`]: Math.round(o.pooledP99),
        [`observe_${tag}_errors`]: o.errors,
        [`observe_${tag}_timeouts`]: o.timeouts,
        [`observe_${tag}_min_achieved_rate`]: Math.round(o.minAchievedRate),
        [`observe_${tag}_sustained`]: sustained(o),
        [`echo_${tag}_p50_us`]: Math.round(e.p50),
        [`echo_${tag}_p99_us`]: Math.round(e.p99),
        [`echo_${tag}_pooled_p90_us`]: Math.round(e.pooledP90),
        [`echo_${tag}_pooled_p99_us`]: Math.round(e.pooledP99),
        [`echo_${tag}_errors`]: e.errors,
        [`echo_${tag}_timeouts`]: e.timeouts,
        [`echo_${tag}_sustained`]: sustained(e),
        [`rounds_${tag}`]: c.rounds,
        [`observe_minus_echo_${tag}_p50_us`]: Math.round(c.deltaP50),
        [`observe_minus_echo_${tag}_p50_min_us`]: Math.round(c.deltaP50Min),
        [`observe_minus_echo_${tag}_p50_max_us`]: Math.round(c.deltaP50Max),
        [`indexer_cpu_per_observe_${tag}_us`]: Math.round(o.cpuPerRequestUs),
        [`indexer_sys_per_observe_${tag}_us`]: Math.round(o.sysPerRequestUs),
        [`echo_cpu_per_request_${tag}_us`]: Math.round(e.cpuPerRequestUs),
        [`echo_sys_per_request_${tag}_us`]: Math.round(e.sysPerRequestUs),
        ...(Number.isFinite(o.queryP50) ? { [`observe_${tag}_query_p50_us`]: Math.round(o.queryP50) } : {}),
      });
    }
  }
  const svcAfter = await metrics();
  const svcCount = metricSum(svcAfter, 'vantage_indexer_observe_seconds_count', 'outcome="ok"') - metricSum(svcBefore, 'vantage_indexer_observe_seconds_count', 'outcome="ok"');
  const svcSum = metricSum(svcAfter, 'vantage_indexer_observe_seconds_sum', 'outcome="ok"') - metricSum(svcBefore, 'vantage_indexer_observe_seconds_sum', 'outcome="ok"');
  const svcMeanUs = (svcSum / svcCount) * 1e6;
  if (svcCount > 0) log(`service-side observe time (handler, from its histogram): mean ${svcMeanUs.toFixed(0)} µs over ${svcCount} requests`);

  // --- 4. profile, in-process on the same data (same registrations, preload and bookings) ---
  const state = new PoolState({ pool: POOL, blockSize: BS, selection: { kind: 'kv_router', formula: 'prefill_load_scale' }, bookingTtlMs: 300_000, workerTtlMs: 3_600_000 });
  for (const w of workerIds) state.register(w, { blockSize: BS, totalKvBlocks: 100_000, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true }, null, 0, true);
  eventIds.clear();
  for (const e of preloadEvents()) state.applyKvEvent(e, Date.now());
  const req = requests[0]!;
  const reqBinary = reqs.binary[0]!;
  const local = prompts[0]!.local;
  const text = new TextDecoder().decode(req);
  const b64 = (JSON.parse(text) as { prompt: { localHashesLe64: string } }).prompt.localHashesLe64;
  const meta = { nowMs: Date.now(), queryDurationUs: 1, restoredAtMs: null };
  const observeEmpty = timeIt(2000, () => state.observe(local, PROMPT_BLOCKS * BS, Date.now()));
  for (const b of benchBookings(POOL, BOOKINGS_PER_WORKER, BS)) {
    const d = decodeBooking(bookingEventCodec.encode(b));
    if (!d.ok) throw new Error(d.reason);
    state.ledger.book({ ...d.value, source: 'decision_service', nowMs: Date.now() });
  }
  const reply = observeReplyOf(state.observe(local, PROMPT_BLOCKS * BS, Date.now()), meta);
  const bookingBytes = bookingEventCodec.encode(benchBookings(POOL, BOOKINGS_PER_WORKER, BS)[0]!);
  const prof = {
    decode_total_us: timeIt(2000, () => observeRequestCodec.decode(req)),
    decode_binary_us: timeIt(2000, () => observeRequestCodec.decode(reqBinary)),
    decode_json_parse_us: timeIt(2000, () => JSON.parse(new TextDecoder().decode(req))),
    decode_base64_us: timeIt(2000, () => Buffer.from(b64, 'base64')),
    observe_total_us: timeIt(2000, () => state.observe(local, PROMPT_BLOCKS * BS, Date.now())),
    observe_no_bookings_us: observeEmpty,
    match_us: timeIt(2000, () => state.index.match(local)),
    sequence_hashes_us: timeIt(2000, () => sequenceHashes(local)),
    encode_reply_us: timeIt(2000, () => observeReplyCodec.encode(reply)),
    encode_reply_binary_us: timeIt(2000, () => encodeObserveReplyBinary(reply)),
    decode_booking_us: timeIt(2000, () => decodeBooking(bookingBytes)),
    // The service's own handler for the headline request: decode, observe, build the reply, encode it.
    handler_path_us: timeIt(2000, () => handleObserve({ state, restoredAtMs: null }, reqBinary, process.hrtime.bigint())),
  };
  log(
    `profile (in-process, µs/op): decode JSON request ${prof.decode_total_us.toFixed(1)} (JSON.parse ${prof.decode_json_parse_us.toFixed(1)}, base64 ${prof.decode_base64_us.toFixed(1)}, rest = schema validation + copy), binary request ${prof.decode_binary_us.toFixed(1)}` +
      ` | observe ${prof.observe_total_us.toFixed(1)} with ${BOOKINGS_PER_WORKER * WORKERS} bookings, ${prof.observe_no_bookings_us.toFixed(1)} without (index match ${prof.match_us.toFixed(1)}, sequence hashes ${prof.sequence_hashes_us.toFixed(1)}, rest = per-worker facts + selection)` +
      ` | encode reply JSON ${prof.encode_reply_us.toFixed(1)}, binary ${prof.encode_reply_binary_us.toFixed(1)} | decode booking ${prof.decode_booking_us.toFixed(1)}` +
      ` | the service's handler, binary request and reply ${prof.handler_path_us.toFixed(1)}`,
  );

  await nc.close();
  for (const e of echoes) await stopChild(e);
  await stopChild(indexer);
  if (cleanupNats) await cleanupNats();

  const first = RATES[0]!;
  const summary = {
    ingest_events_per_s: Math.round(ingestRate),
    ingest_cpu_us_per_event: Number(ingestCpuUs.toFixed(2)),
    ingest_dropped: dropped,
    ingest_lag_rate_events_per_s: lagRate,
    ingest_lag_p50_ms: Number(lagP50.toFixed(1)),
    ingest_lag_p99_ms: Number(lagP99.toFixed(1)),
    observe_rate: first,
    observe_reply_encoding: 'binary',
    observe_request_encoding: 'binary',
    observe_p50_us: results[`observe_${first}_p50_us`],
    observe_p99_us: results[`observe_${first}_p99_us`],
    echo_p50_us: results[`echo_${first}_p50_us`],
    echo_p99_us: results[`echo_${first}_p99_us`],
    observe_minus_echo_p50_us: results[`observe_minus_echo_${first}_p50_us`],
    // A spinning echo is a diagnostic, not the baseline the target is measured against.
    target_p50_within_150_us: ECHO_BUSY_US > 0 || NULL_COMPARISON ? null : (results[`observe_minus_echo_${first}_p50_us`] as number) <= 150,
    echo_busy_us: ECHO_BUSY_US,
    null_comparison: NULL_COMPARISON,
    rounds: ROUNDS,
    round_seconds: ROUND_SECONDS,
    pacing: PACING,
    ...results,
    load_average_1m: Number(loadavg()[0]!.toFixed(2)),
    load_average_1m_max_during_observe: Number(Math.max(...loads).toFixed(2)),
    bench_seconds: Math.round((performance.now() - benchStart) / 1000),
    reply_bytes: replyBytesOf.binary,
    reply_bytes_json: replyBytes,
    observe_json_minus_echo_p50_us: results[`observe_minus_echo_json_${first}_p50_us`],
    bookings_live: BOOKINGS_PER_WORKER * WORKERS,
    service_observe_mean_us: Math.round(svcMeanUs),
    profile_decode_us: Number(prof.decode_total_us.toFixed(1)),
    profile_decode_binary_us: Number(prof.decode_binary_us.toFixed(1)),
    profile_decode_json_parse_us: Number(prof.decode_json_parse_us.toFixed(1)),
    profile_decode_base64_us: Number(prof.decode_base64_us.toFixed(1)),
    profile_observe_us: Number(prof.observe_total_us.toFixed(1)),
    profile_observe_no_bookings_us: Number(prof.observe_no_bookings_us.toFixed(1)),
    profile_match_us: Number(prof.match_us.toFixed(1)),
    profile_sequence_hashes_us: Number(prof.sequence_hashes_us.toFixed(1)),
    profile_encode_reply_us: Number(prof.encode_reply_us.toFixed(1)),
    profile_encode_reply_binary_us: Number(prof.encode_reply_binary_us.toFixed(1)),
    profile_decode_booking_us: Number(prof.decode_booking_us.toFixed(1)),
    profile_handler_path_us: Number(prof.handler_path_us.toFixed(1)),
  };
  log(JSON.stringify(summary));
}

await main();
