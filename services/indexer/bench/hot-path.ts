/**
 * In-process profile of one observe as the service runs it (decode → observe → binary reply),
 * on the benchmark's data (64 workers, 32k-token prompts, 4 bookings per worker), without NATS.
 * Run: node --import tsx services/indexer/bench/hot-path.ts [iterations]
 * (add --cpu-prof --cpu-prof-dir=DIR before --import to profile it).
 */
import { performance } from 'node:perf_hooks';
import { sequenceHashes } from '@vantage/hashing';
import { PoolState } from '@vantage/observation';
import { bookingEventCodec, observeRequestCodec, type BookingEvent } from '@vantage/protocol';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { decodeBooking, decodeObserve, encodeObserveReplyBinary } from '../src/messages';

const BS = 64;
const PROMPT_BLOCKS = 512;
const WORKERS = 64;
const ITER = Number(process.argv[2] ?? 20000);
/** Only time these steps (comma-separated names), e.g. `observe`; default all. */
const ONLY = process.argv[3]?.split(',') ?? null;

let seed = 0x12345678n;
function rand64(): bigint {
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
for (let i = 0; i < WORKERS; i++) {
  for (let j = 0; j < 4; j++) {
    const p = (i + 16 * j) % prompts.length;
    const b: BookingEvent = {
      requestId: `bench-${i}-${j}`,
      sessionId: `bench-${p}`,
      pool: 'bench',
      workerId: workerIds[i]!,
      dpRank: 0,
      promptTokens: PROMPT_BLOCKS * BS,
      overlapBlocks: 0,
      sequenceHashes: null,
      localHashes: prompts[p]!.local,
      expectedOutputTokens: 256,
      prefillTokens: null,
      atMs: Date.now(),
    };
    const d = decodeBooking(bookingEventCodec.encode(b));
    if (!d.ok) throw new Error(d.reason);
    state.ledger.book({ ...d.value, source: 'decision_service', nowMs: Date.now() });
  }
}
const reqs = prompts.map((p) =>
  observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes: p.local, loraName: null }, promptTokens: PROMPT_BLOCKS * BS, replyEncoding: 'binary' }),
);

function timeIt(name: string, fn: (i: number) => unknown): void {
  if (ONLY !== null && !ONLY.includes(name)) return;
  for (let i = 0; i < 500; i++) fn(i);
  const t0 = performance.now();
  for (let i = 0; i < ITER; i++) fn(i);
  process.stdout.write(`${name.padEnd(24)} ${(((performance.now() - t0) * 1000) / ITER).toFixed(1)} µs\n`);
}
const locals = reqs.map((r) => {
  const d = decodeObserve(r);
  if (!d.ok) throw new Error(d.reason);
  return d.value.localHashes!;
});
const obs = locals.map((l) => state.observe(l, PROMPT_BLOCKS * BS, Date.now()));
const scratch = new BigUint64Array(PROMPT_BLOCKS);
timeIt('decode', (i) => decodeObserve(reqs[i % 64]!));
timeIt('match', (i) => state.index.match(locals[i % 64]!));
timeIt('sequenceHashes', (i) => sequenceHashes(locals[i % 64]!, scratch));
const seqs = locals.map((l) => sequenceHashes(l));
const ranks = state.knownRanks();
timeIt('newBlocks (all ranks)', (i) => {
  let t = 0;
  for (const r of ranks) t += state.ledger.newBlocksOfChain(r.workerId, r.dpRank, seqs[i % 64]!);
  return t;
});
timeIt('prepareChain', (i) => state.ledger.prepareChain(seqs[i % 64]!));
timeIt('ledger.load (all ranks)', () => {
  let t = 0;
  for (const r of ranks) t += state.ledger.load(r.workerId, r.dpRank).requests;
  return t;
});
timeIt('observe', (i) => state.observe(locals[i % 64]!, PROMPT_BLOCKS * BS, Date.now()));
timeIt('encode binary', (i) => encodeObserveReplyBinary(obs[i % 64]!, { nowMs: Date.now(), queryDurationUs: 1, restoredAtMs: null }));
timeIt('decode+observe+encode', (i) => {
  const d = decodeObserve(reqs[i % 64]!);
  if (!d.ok) throw new Error();
  const o = state.observe(d.value.localHashes!, PROMPT_BLOCKS * BS, Date.now());
  return encodeObserveReplyBinary(o, { nowMs: Date.now(), queryDurationUs: 1, restoredAtMs: null });
});
