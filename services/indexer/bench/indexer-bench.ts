/**
 * Indexer benchmark over real NATS (`npm run bench:indexer`):
 *
 *   1. ingest: KV events (event-plane envelopes, 4 blocks each) from 64 workers,
 *      sustained events/s applied (publisher kept at most 20k events ahead of the
 *      writer, so nothing is dropped) and publish→applied lag at a fixed rate
 *      (from /metrics polled every 10 ms);
 *   2. observe: open loop at 1,000 and 5,000 requests/s for 32k-token prompts
 *      (512 local hashes, block size 64) against 64 workers holding varied prefixes;
 *   3. baseline: a bare NATS request-reply echo in its own process replying with a
 *      payload the size of an observe reply, same load pattern, same run;
 *   4. profile: where an observe's service time goes (decode, match, selection,
 *      reply encoding), measured in-process on the same data.
 *
 * Uses NATS_URL when set, otherwise a private nats-server under .infra/bench.
 * Last stdout line: one JSON object with the figures.
 * Environment knobs: BENCH_OBSERVE_SECONDS (default 5), BENCH_RATES (default "1000,5000").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sequenceHashes } from '@vantage/hashing';
import { INFRA_DIR, REPO_ROOT, natsBroker } from '@vantage/infra';
import { observeRequestCodec, observeSubject, workerRegistrationCodec, workersSubject } from '@vantage/protocol';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';
import { decodeObserve, encodeObserveReply } from '../src/messages';
import { PoolState } from '@vantage/observation';

const BS = 64;
const PROMPT_BLOCKS = 512; // 32k tokens
const WORKERS = 64;
const OBSERVE_SECONDS = Number(process.env.BENCH_OBSERVE_SECONDS ?? 5);
const RATES = (process.env.BENCH_RATES ?? '1000,5000').split(',').map(Number);
const POOL = 'bench';
const NS = `bench${process.pid}`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const log = (s: string): void => void process.stdout.write(`${s}\n`);

// ---------------------------------------------------------------------------------
// Data: 8 shared system prompts (128..352 blocks) × 8 continuations = 64 prompts of 512 blocks
// ---------------------------------------------------------------------------------

let seed = 0x12345678n;
function rand64(): bigint {
  // splitmix64
  seed = (seed + 0x9e3779b97f4a7c15n) & 0xffff_ffff_ffff_ffffn;
  let z = seed;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffff_ffff_ffff_ffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffff_ffff_ffff_ffffn;
  return z ^ (z >> 31n);
}

const prompts: { local: BigUint64Array; seq: BigUint64Array }[] = [];
for (let g = 0; g < 8; g++) {
  const shared = Array.from({ length: 128 + g * 32 }, rand64);
  for (let k = 0; k < 8; k++) {
    const local = BigUint64Array.from([...shared, ...Array.from({ length: PROMPT_BLOCKS - shared.length }, rand64)]);
    prompts.push({ local, seq: sequenceHashes(local) });
  }
}
const workerIds = Array.from({ length: WORKERS }, (_, i) => (0x8000_0000_0000_0000n + BigInt(i) * 7919n) as WorkerId);
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

function spawnTs(script: string, args: string[], env: NodeJS.ProcessEnv, ready: (line: string) => unknown): Promise<{ proc: ChildProcess; line: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
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

interface LoadResult {
  rate: number;
  sent: number;
  errors: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  achievedRate: number;
}

/**
 * Open loop: requests are sent on schedule (a 1 ms timer sends whatever is due),
 * whatever the replies do. Latency is from the send to the reply (µs).
 */
async function openLoop(nc: NatsConnection, subject: string, payloads: Uint8Array[], rate: number, seconds: number): Promise<LoadResult> {
  const total = Math.round(rate * seconds);
  const lat: number[] = [];
  let errors = 0;
  let sent = 0;
  const inflight: Promise<void>[] = [];
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000));
      while (sent < due) {
        const t0 = performance.now();
        const payload = payloads[sent % payloads.length]!;
        sent++;
        inflight.push(
          nc.request(subject, payload, { timeout: 5_000 }).then(
            (m) => {
              if (m.headers?.get('Vantage-Error-Code')) errors++;
              else lat.push((performance.now() - t0) * 1000);
            },
            () => void errors++,
          ),
        );
      }
      if (sent >= total) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  const sendSeconds = (performance.now() - start) / 1000;
  await Promise.all(inflight);
  lat.sort((a, b) => a - b);
  return { rate, sent, errors, p50: pct(lat, 50), p90: pct(lat, 90), p99: pct(lat, 99), max: lat[lat.length - 1] ?? NaN, achievedRate: sent / sendSeconds };
}

function timeIt(iters: number, fn: () => unknown): number {
  for (let i = 0; i < Math.min(200, iters); i++) fn();
  const t0 = performance.now();
  for (let i = 0; i < iters; i++) fn();
  return ((performance.now() - t0) * 1000) / iters;
}

// ---------------------------------------------------------------------------------

async function main(): Promise<void> {
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

  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VANTAGE_') && v !== undefined) env[k] = v;
  Object.assign(env, {
    VANTAGE_NATS_URL: natsUrl,
    VANTAGE_HTTP_PORT: '0',
    VANTAGE_LOG_LEVEL: 'info', // the 'service started' line carries the ops port; nothing is logged per message
    VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: POOL, blockSize: BS, namespace: NS }]),
    VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
  });
  const { proc: indexer, line } = await spawnTs(join(REPO_ROOT, 'services/indexer/src/main.ts'), [], env, (l) => l.includes('"service started"'));
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
  const t0 = performance.now();
  let pub = 0;
  while (pub < N) {
    const done = (await applied()) - base;
    const room = Math.min(N - pub, 20_000 - (pub - done));
    for (let i = 0; i < room; i++) nc.publish(subject, ingest[pub++]!);
    await nc.flush();
    if (room <= 0) await sleep(5);
  }
  while ((await applied()) - base < N) await sleep(5);
  const ingestSeconds = (performance.now() - t0) / 1000;
  const ingestRate = N / ingestSeconds;
  const dropped = metricSum(await metrics(), 'vantage_indexer_messages_dropped_total');
  log(`ingest: ${N} events in ${ingestSeconds.toFixed(2)} s = ${ingestRate.toFixed(0)} events/s applied (dropped ${dropped})`);

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

  // --- 2. observe, open loop ---
  const requests = prompts.map((p) => observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes: p.local, loraName: null }, promptTokens: PROMPT_BLOCKS * BS }));
  const sample = await nc.request(observeSubject(POOL), requests[0]!, { timeout: 5_000 });
  const replyBytes = sample.data.length;
  log(`observe request ${requests[0]!.length} bytes, reply ${replyBytes} bytes, ${WORKERS} workers`);
  for (let i = 0; i < 500; i++) await nc.request(observeSubject(POOL), requests[i % requests.length]!, { timeout: 5_000 }); // warm-up

  const echoSubject = `bench.echo.${process.pid}`;
  const { proc: echo } = await spawnTs(join(REPO_ROOT, 'services/indexer/bench/echo-server.ts'), [natsUrl, echoSubject, String(replyBytes)], env, (l) => l === 'ready');
  for (let i = 0; i < 500; i++) await nc.request(echoSubject, requests[i % requests.length]!, { timeout: 5_000 });

  const results: Record<string, number> = {};
  const svcBefore = await metrics();
  for (const rate of RATES) {
    const o = await openLoop(nc, observeSubject(POOL), requests, rate, OBSERVE_SECONDS);
    const e = await openLoop(nc, echoSubject, requests, rate, OBSERVE_SECONDS);
    log(
      `${String(rate).padStart(5)} req/s  observe p50 ${o.p50.toFixed(0)} µs p90 ${o.p90.toFixed(0)} p99 ${o.p99.toFixed(0)} max ${o.max.toFixed(0)} (errors ${o.errors}, sent ${o.sent} at ${o.achievedRate.toFixed(0)}/s)` +
        ` | echo p50 ${e.p50.toFixed(0)} µs p90 ${e.p90.toFixed(0)} p99 ${e.p99.toFixed(0)} max ${e.max.toFixed(0)} (errors ${e.errors}) | Δp50 ${(o.p50 - e.p50).toFixed(0)} µs`,
    );
    Object.assign(results, {
      [`observe_${rate}_p50_us`]: Math.round(o.p50),
      [`observe_${rate}_p90_us`]: Math.round(o.p90),
      [`observe_${rate}_p99_us`]: Math.round(o.p99),
      [`observe_${rate}_errors`]: o.errors,
      [`echo_${rate}_p50_us`]: Math.round(e.p50),
      [`echo_${rate}_p90_us`]: Math.round(e.p90),
      [`echo_${rate}_p99_us`]: Math.round(e.p99),
      [`echo_${rate}_errors`]: e.errors,
    });
  }
  const svcAfter = await metrics();
  const svcCount = metricSum(svcAfter, 'vantage_indexer_observe_seconds_count', 'outcome="ok"') - metricSum(svcBefore, 'vantage_indexer_observe_seconds_count', 'outcome="ok"');
  const svcSum = metricSum(svcAfter, 'vantage_indexer_observe_seconds_sum', 'outcome="ok"') - metricSum(svcBefore, 'vantage_indexer_observe_seconds_sum', 'outcome="ok"');
  const svcMeanUs = (svcSum / svcCount) * 1e6;
  log(`service-side observe time (handler, from its histogram): mean ${svcMeanUs.toFixed(0)} µs over ${svcCount} requests`);

  // --- 4. profile, in-process on the same data ---
  const state = new PoolState({ pool: POOL, blockSize: BS, selection: { kind: 'kv_router', formula: 'prefill_load_scale' }, bookingTtlMs: 300_000, workerTtlMs: 3_600_000 });
  for (const w of workerIds) state.register(w, { blockSize: BS, totalKvBlocks: 100_000, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true }, null, 0, true);
  eventIds.clear();
  for (const e of preloadEvents()) state.applyKvEvent(e, Date.now());
  const req = requests[0]!;
  const local = prompts[0]!.local;
  const text = new TextDecoder().decode(req);
  const strings = (JSON.parse(text) as { prompt: { localHashes: string[] } }).prompt.localHashes;
  const obs = state.observe(local, PROMPT_BLOCKS * BS, Date.now());
  const meta = { nowMs: Date.now(), queryDurationUs: 1, restoredAtMs: null };
  const prof = {
    decode_total_us: timeIt(2000, () => decodeObserve(req)),
    decode_json_parse_us: timeIt(2000, () => JSON.parse(new TextDecoder().decode(req))),
    decode_bigint_512_us: timeIt(2000, () => {
      const out = new BigUint64Array(strings.length);
      for (let i = 0; i < strings.length; i++) out[i] = BigInt(strings[i]!);
      return out;
    }),
    observe_total_us: timeIt(2000, () => state.observe(local, PROMPT_BLOCKS * BS, Date.now())),
    match_us: timeIt(2000, () => state.index.match(local)),
    encode_reply_us: timeIt(2000, () => encodeObserveReply(obs, meta)),
  };
  log(
    `profile (in-process, µs/op): decode ${prof.decode_total_us.toFixed(1)} (JSON.parse ${prof.decode_json_parse_us.toFixed(1)}, BigInt×512 ${prof.decode_bigint_512_us.toFixed(1)}, rest = schema validation + copy)` +
      ` | observe ${prof.observe_total_us.toFixed(1)} (index match ${prof.match_us.toFixed(1)}, rest = per-worker facts + selection) | encode reply ${prof.encode_reply_us.toFixed(1)}`,
  );

  await nc.close();
  await stopChild(echo);
  await stopChild(indexer);
  if (cleanupNats) await cleanupNats();

  const first = RATES[0]!;
  const summary = {
    ingest_events_per_s: Math.round(ingestRate),
    ingest_dropped: dropped,
    ingest_lag_rate_events_per_s: lagRate,
    ingest_lag_p50_ms: Number(lagP50.toFixed(1)),
    ingest_lag_p99_ms: Number(lagP99.toFixed(1)),
    observe_rate: first,
    observe_p50_us: results[`observe_${first}_p50_us`],
    observe_p99_us: results[`observe_${first}_p99_us`],
    echo_p50_us: results[`echo_${first}_p50_us`],
    echo_p99_us: results[`echo_${first}_p99_us`],
    observe_minus_echo_p50_us: results[`observe_${first}_p50_us`]! - results[`echo_${first}_p50_us`]!,
    target_p50_within_150_us: results[`observe_${first}_p50_us`]! - results[`echo_${first}_p50_us`]! <= 150,
    ...results,
    reply_bytes: replyBytes,
    service_observe_mean_us: Math.round(svcMeanUs),
    profile_decode_us: Number(prof.decode_total_us.toFixed(1)),
    profile_decode_json_parse_us: Number(prof.decode_json_parse_us.toFixed(1)),
    profile_decode_bigint_us: Number(prof.decode_bigint_512_us.toFixed(1)),
    profile_observe_us: Number(prof.observe_total_us.toFixed(1)),
    profile_match_us: Number(prof.match_us.toFixed(1)),
    profile_encode_reply_us: Number(prof.encode_reply_us.toFixed(1)),
  };
  log(JSON.stringify(summary));
}

await main();
