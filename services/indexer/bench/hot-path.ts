/**
 * In-process profile of one observe as the service runs it (decode → observe → binary reply),
 * on the benchmark's data (64 workers, 32k-token prompts, 4 bookings per worker), without NATS.
 * Run: node --import tsx services/indexer/bench/hot-path.ts [iterations] [steps] [--cold | --idle]
 * (`observe` builds a fresh answer; `observeTransient` reuses the pool's records; `replyOf` builds the
 * reply from an answer; `handleObserve` and `handleObserve binary` are the service's handler for a
 * JSON and a binary request, both asking for a binary reply listing every worker; `handleObserve
 * json reply` the same asking for a JSON reply.)
 * (add --cpu-prof --cpu-prof-dir=DIR before --import to profile it).
 *
 * With `--cold`, the core's data caches are flushed before every iteration (2 MiB, twice its L2,
 * written at a 64-byte stride, outside the timed part) and each iteration is timed on its own:
 * closer to the running service, which answers one request at a time with other processes (NATS,
 * the clients) running on its cores in between. Cold figures are per-iteration wall times (median
 * and p90), so run it under the benchmark lock.
 *
 * With `--idle`, the process sleeps 1 ms (a timer) before every iteration instead, as the service
 * does between requests at 1,000/s, and each is timed alone. On the development host this alone
 * makes a step two to five times slower than back to back, as slow as or slower than the running
 * service. (A 1 ms spin in registers instead of the sleep gives about the same: not the process's
 * own activity, most likely what else runs on the host's cores in that millisecond.)
 */
import { constants, performance, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { sequenceHashes } from '@vantage/hashing';
import { PoolState } from '@vantage/observation';
import { observeReplyOf } from '@vantage/decision-core';
import { bookingEventCodec, encodeObserveReplyBinary, encodeObserveRequestBinary, observeReplyCodec, observeRequestCodec } from '@vantage/protocol';
import type { ExternalHash, KvEvent } from '@vantage/types';
import { decodeBooking } from '@vantage/ingest';
import { handleObserve } from '../src/service';
import { benchBookings, PROMPT_BLOCKS, prompts, WORKERS, workerIds } from './data';

const BS = 64;
const args = process.argv.slice(2).filter((a) => a !== '--cold' && a !== '--idle');
const COLD = process.argv.includes('--cold');
const IDLE = process.argv.includes('--idle');
const ITER = Number(args[0] ?? 20000);
/** Only time these steps (comma-separated names), e.g. `observe`; default all. */
const ONLY = args[1]?.split(',') ?? null;

const state = new PoolState({ pool: 'bench', blockSize: BS, selection: { kind: 'kv_router', formula: 'prefill_load_scale' }, bookingTtlMs: 300_000, workerTtlMs: 3_600_000 });
for (const w of workerIds) state.register(w, { blockSize: BS, totalKvBlocks: 100_000, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true }, null, 0, true);
let eid = 0n;
for (let i = 0; i < WORKERS; i++) {
  const w = workerIds[i]!;
  for (const [p, len] of [
    [i, 32 + ((i * 37) % 481)],
    [(i + 19) % prompts.length, 16 + ((i * 53) % 200)],
  ] as const) {
    const { local, seq } = prompts[p]!;
    for (let from = 0; from < len; from += 64) {
      const to = Math.min(len, from + 64);
      const ev: KvEvent = {
        workerId: w,
        dpRank: 0,
        storageTier: 'device',
        eventId: ++eid,
        data: { kind: 'stored', parentHash: from === 0 ? null : (seq[from - 1]! as ExternalHash), startPosition: from, blockHashes: seq.slice(from, to), tokensHashes: local.slice(from, to) },
      };
      state.applyKvEvent(ev, Date.now());
    }
  }
}
for (const b of benchBookings('bench', 4, BS)) {
  const d = decodeBooking(bookingEventCodec.encode(b));
  if (!d.ok) throw new Error(d.reason);
  state.ledger.book({ ...d.value, source: 'decision_service', nowMs: Date.now() });
}
// With a request id, as the decision service sends its queries.
const reqs = prompts.map((p, i) =>
  observeRequestCodec.encode({ requestId: `bench-${i}`, prompt: { kind: 'local_hashes', localHashes: p.local, loraName: null }, promptTokens: PROMPT_BLOCKS * BS, replyEncoding: 'binary' }),
);
// The same requests in the binary encoding (what the benchmark's binary figures send), each at an
// odd offset of its buffer, as messages cut from a socket's reads usually are.
const reqsBin = prompts.map((p, i) => {
  const b = encodeObserveRequestBinary({ requestId: `bench-${i}`, prompt: { kind: 'local_hashes', localHashes: p.local, loraName: null }, promptTokens: PROMPT_BLOCKS * BS, replyEncoding: 'binary' });
  const at = new Uint8Array(b.length + 8).subarray(3, 3 + b.length);
  at.set(b);
  return at;
});

/** Young-generation collections seen so far (a proxy for what a step allocates). */
let minorGcs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) minorGcs++;
}).observe({ entryTypes: ['gc'] });

/**
 * Time a step: ITER iterations in 5 batches; prints, per iteration, the process's CPU time (user +
 * system, which unlike wall time does not grow while other processes hold the cores) in the
 * cheapest and the median batch, the median batch's wall time, and young-generation collections
 * per 1,000 iterations over all batches (what the step allocates).
 */
async function timeIt(name: string, fn: (i: number) => unknown): Promise<void> {
  if (ONLY !== null && !ONLY.includes(name)) return;
  for (let i = 0; i < 500; i++) fn(i);
  if (COLD || IDLE) return timeCold(name, fn);
  const per = Math.max(1, Math.floor(ITER / 5));
  const cpu: number[] = [];
  const wall: number[] = [];
  // GC entries are delivered on a later turn: let the warm-up's arrive before counting.
  await new Promise((r) => setTimeout(r, 20));
  const gc0 = minorGcs;
  for (let b = 0; b < 5; b++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < per; i++) fn(b * per + i);
    wall.push(((performance.now() - t0) * 1000) / per);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / per);
  }
  await new Promise((r) => setTimeout(r, 20));
  cpu.sort((a, b) => a - b);
  wall.sort((a, b) => a - b);
  const f = (v: number): string => v.toFixed(1).padStart(6);
  process.stdout.write(
    `${name.padEnd(24)} cpu best ${f(cpu[0]!)} µs  median ${f(cpu[2]!)} µs  wall median ${f(wall[2]!)} µs  minor GCs/1k ${(((minorGcs - gc0) * 1000) / (5 * per)).toFixed(2)}\n`,
  );
}
/** Flushed before each cold iteration: twice the L2 of this project's hosts (512 KiB to 1 MiB per core). */
const evict = new Uint8Array(2 << 20);
let evictRound = 0;

/** `--cold`: every iteration timed alone (wall, µs) after flushing the data caches; median and p90. */
async function timeCold(name: string, fn: (i: number) => unknown): Promise<void> {
  const t = new Float64Array(ITER);
  const gc0 = minorGcs;
  for (let i = 0; i < ITER; i++) {
    if (IDLE) await new Promise((r) => setTimeout(r, 1));
    else {
      const v = ++evictRound & 0xff;
      for (let k = 0; k < evict.length; k += 64) evict[k] = v;
    }
    const t0 = process.hrtime.bigint();
    fn(i);
    t[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  await new Promise((r) => setTimeout(r, 20));
  t.sort();
  const f = (v: number): string => v.toFixed(1).padStart(6);
  process.stdout.write(
    `${name.padEnd(24)} ${IDLE ? 'idle' : 'cold'} wall median ${f(t[Math.floor(ITER / 2)]!)} µs  p90 ${f(t[Math.floor(ITER * 0.9)]!)} µs  minor GCs/1k ${(((minorGcs - gc0) * 1000) / ITER).toFixed(2)}\n`,
  );
}

const locals = reqs.map((r) => {
  const d = observeRequestCodec.decode(r);
  if (!d.ok || d.value.prompt.kind !== 'local_hashes') throw new Error(d.ok ? 'not local hashes' : d.reason);
  return d.value.prompt.localHashes;
});
const reqsJsonReply = prompts.map((p, i) => observeRequestCodec.encode({ requestId: `bench-${i}`, prompt: { kind: 'local_hashes', localHashes: p.local, loraName: null }, promptTokens: PROMPT_BLOCKS * BS }));
const replies = locals.map((l) => observeReplyOf(state.observe(l, PROMPT_BLOCKS * BS, Date.now()), { nowMs: Date.now(), queryDurationUs: 1, restoredAtMs: null }));
const scratch = new BigUint64Array(PROMPT_BLOCKS);
await timeIt('decode', (i) => observeRequestCodec.decode(reqs[i % 64]!));
await timeIt('decode binary', (i) => observeRequestCodec.decode(reqsBin[i % 64]!));
// The pieces as observe runs them: the index's transient match, the chain prepared once, then each
// rank read through its resolved ledger handle.
await timeIt('matchTransient', (i) => state.index.matchTransient(locals[i % 64]!));
await timeIt('sequenceHashes', (i) => sequenceHashes(locals[i % 64]!, scratch));
const seqs = locals.map((l) => sequenceHashes(l));
const refs = state.knownRanks().map((r) => state.ledger.rankRef(r.workerId, r.dpRank));
await timeIt('prepareChain', (i) => state.ledger.prepareChain(seqs[i % 64]!));
await timeIt('prepareChain+newBlocksOfRef', (i) => {
  const seq = seqs[i % 64]!;
  state.ledger.prepareChain(seq);
  let t = 0;
  for (const ref of refs) t += state.ledger.newBlocksOfRef(ref, seq);
  return t;
});
const loadRecord = { ...state.ledger.load(refs[0]!.workerId, refs[0]!.dpRank) };
await timeIt('loadOfRef (all ranks)', () => {
  let t = 0;
  for (const ref of refs) t += state.ledger.loadOfRef(ref, loadRecord).requests;
  return t;
});
await timeIt('observe', (i) => state.observe(locals[i % 64]!, PROMPT_BLOCKS * BS, Date.now()));
await timeIt('observeTransient', (i) => state.observeTransient(locals[i % 64]!, PROMPT_BLOCKS * BS, Date.now()));
await timeIt('replyOf', (i) => observeReplyOf(state.observeTransient(locals[i % 64]!, PROMPT_BLOCKS * BS, Date.now()), { nowMs: Date.now(), queryDurationUs: 1, restoredAtMs: null }));
await timeIt('encode binary', (i) => encodeObserveReplyBinary(replies[i % 64]!));
await timeIt('encode json', (i) => observeReplyCodec.encode(replies[i % 64]!));
// As the service runs it: decode, observe, build the reply, encode it.
const pool = { state, restoredAtMs: null };
await timeIt('handleObserve', (i) => handleObserve(pool, reqs[i % 64]!, process.hrtime.bigint()));
await timeIt('handleObserve binary', (i) => handleObserve(pool, reqsBin[i % 64]!, process.hrtime.bigint()));
await timeIt('handleObserve json reply', (i) => handleObserve(pool, reqsJsonReply[i % 64]!, process.hrtime.bigint()));
