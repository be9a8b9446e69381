/**
 * Prefix index benchmark: `npm run bench:index` (or `npx tsx packages/prefix-index/bench/index-bench.ts`).
 *
 * 1. Apply throughput: each trace (conversation_2k, synthetic) is replayed through simulated worker
 *    caches (8 and 64 workers, 16,384 blocks of 64 tokens, LRU; see trace-sim.ts) into a KV event
 *    stream generated up front; then only the apply loop is timed, for PrefixIndex and for the
 *    Map-of-bigint baseline (map-index.ts): one untimed warm-up pass, then REPS timed passes, each
 *    from an empty index.
 * 2. Match latency: every trace prompt against the loaded index, each call timed.
 * 3. 2,048-block prompts against 64 workers holding varied prefixes of them.
 * 4. Memory: heap + array buffers after a forced GC, before and after loading, per resident block.
 * 5. Check: both implementations give identical match answers on a sample of prompts.
 * Progress goes to stderr; the last stdout line is one JSON object with the headline figures.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PrefixIndex } from '@vantage/prefix-index';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { MapIndex } from './map-index';
import { loadTracePrompts, simulate } from './trace-sim';
import type { Prompt } from './trace-sim';

const BLOCK = 64;
const CAPACITY = 16_384;
const REPS = Number(process.env.BENCH_REPS ?? 3);
const TRACES = [
  ['conversation_2k', '/work/shared/traces/conversation_2k.jsonl'],
  ['synthetic', '/work/shared/traces/synthetic_trace.jsonl'],
] as const;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const log = (msg: string): void => {
  process.stderr.write(`[bench:index] ${msg}\n`);
};

function heapBytes(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function latencies(prompts: readonly BigUint64Array[], rounds: number, fn: (q: BigUint64Array) => unknown): Float64Array {
  for (const q of prompts) fn(q); // warm-up: JIT and caches
  const out = new Float64Array(prompts.length * rounds);
  let k = 0;
  for (let r = 0; r < rounds; r++) {
    for (const q of prompts) {
      const t0 = process.hrtime.bigint();
      fn(q);
      out[k++] = Number(process.hrtime.bigint() - t0) / 1000;
    }
  }
  return out.sort();
}

function sameAnswers(idx: PrefixIndex, base: MapIndex, prompts: readonly BigUint64Array[]): number {
  for (const q of prompts) {
    const a = idx
      .match(q)
      .workers.map((m) => `${m.workerId}:${m.dpRank}:${m.deviceBlocks}:${m.anyBlocks}:${m.treeSize}`)
      .sort();
    const b = base
      .match(q)
      .map((m) => `${m.workerId}:${m.dpRank}:${m.deviceBlocks}:${m.anyBlocks}:${m.treeSize}`)
      .sort();
    if (a.join('|') !== b.join('|')) {
      throw new Error(`match answers differ for a ${q.length}-block prompt:\n index    ${a.join(' ')}\n baseline ${b.join(' ')}`);
    }
  }
  return prompts.length;
}

/**
 * Load a fresh index once (untimed: JIT warm-up, and the heap growth it causes is the memory
 * figure), then REPS timed passes, each from an empty index after a forced GC so no other
 * object graph's collection is billed to the loop.
 */
function timeApply<T>(
  events: readonly KvEvent[],
  make: () => T,
  apply: (idx: T, e: KvEvent) => void,
): { seconds: number[]; bytes: number; last: T } {
  const m0 = heapBytes();
  let warm: T | null = make();
  for (let i = 0; i < events.length; i++) apply(warm, events[i]!);
  const bytes = heapBytes() - m0;
  warm = null;
  const seconds: number[] = [];
  let last: T | undefined;
  for (let r = 0; r < REPS; r++) {
    last = undefined;
    gc();
    const idx = make();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < events.length; i++) apply(idx, events[i]!);
    seconds.push(Number(process.hrtime.bigint() - t0) / 1e9);
    last = idx;
  }
  return { seconds, bytes, last: last! };
}

const fmt = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toFixed(2));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// ---------------------------------------------------------------------------

const scenarios: Array<Record<string, unknown>> = [];
let totalOps = 0;
let totalSec = 0;
let totalBaseSec = 0;
const matchLat: Float64Array[] = [];
const baseMatchLat: Float64Array[] = [];
let checked = 0;
let bytesPerBlock = 0;
let bytesPerBlockScenario = '';
let mostBlocks = 0;

for (const [name, path] of TRACES) {
  log(`hashing ${name} at block size ${BLOCK}`);
  const prompts = loadTracePrompts(path, BLOCK);
  const queries = prompts.map((p: Prompt) => p.local).filter((q) => q.length > 0);
  for (const workers of [8, 64]) {
    const label = `${name}/${workers}w`;
    log(`${label}: simulating ${prompts.length} requests through ${workers} worker caches`);
    const sim = simulate(prompts, workers, CAPACITY);
    const ops = sim.blockOps;
    log(`${label}: ${sim.events.length} events, ${ops} block ops (${sim.evicted} evictions); timing apply x${REPS}`);

    // The index first, alone in the heap: timing, memory, match latency; then the baseline.
    const impl = timeApply(sim.events, () => new PrefixIndex(BLOCK), (x, e) => x.apply(e, 0));
    const idx = impl.last;
    const resident = idx.totalBlocks;
    const nodes = idx.nodeCount;
    const arrayBytes = idx.stats().arrayBytes;
    log(`${label}: matching ${queries.length} prompts`);
    gc();
    const lat = latencies(queries, 3, (q) => idx.match(q));
    const base = timeApply(sim.events, () => new MapIndex(BLOCK), (x, e) => x.apply(e));
    const baseIdx = base.last;
    if (resident !== baseIdx.totalBlocks) throw new Error(`${label}: resident blocks differ`);
    gc();
    const blat = latencies(queries, 1, (q) => baseIdx.match(q));
    matchLat.push(lat);
    baseMatchLat.push(blat);
    checked += sameAnswers(idx, baseIdx, queries.filter((_, i) => i % 5 === 0));
    const bytes = impl.bytes;
    const baseBytes = base.bytes;

    const rate = ops / median(impl.seconds);
    const baseRate = ops / median(base.seconds);
    totalOps += ops * REPS;
    totalSec += impl.seconds.reduce((a, b) => a + b, 0);
    totalBaseSec += base.seconds.reduce((a, b) => a + b, 0);
    const bpb = bytes / resident;
    if (resident > mostBlocks) {
      mostBlocks = resident;
      bytesPerBlock = bpb;
      bytesPerBlockScenario = label;
    }
    const s = {
      scenario: label,
      events: sim.events.length,
      block_ops: ops,
      resident_blocks: resident,
      nodes,
      block_ops_per_s_runs: impl.seconds.map((x) => Math.round(ops / x)),
      baseline_block_ops_per_s_runs: base.seconds.map((x) => Math.round(ops / x)),
      match_p50_us: +fmt(percentile(lat, 50)),
      match_p99_us: +fmt(percentile(lat, 99)),
      baseline_match_p50_us: +fmt(percentile(blat, 50)),
      baseline_match_p99_us: +fmt(percentile(blat, 99)),
      bytes_per_block: Math.round(bpb),
      bytes_per_node: Math.round(bytes / Math.max(1, nodes)),
      array_bytes_per_block: Math.round(arrayBytes / resident),
      baseline_bytes_per_block: Math.round(baseBytes / resident),
    };
    scenarios.push(s);
    console.log(
      `${label.padEnd(22)} apply ${(rate / 1e6).toFixed(2)} M blocks/s (baseline ${(baseRate / 1e6).toFixed(2)})` +
        `  match p50 ${fmt(s.match_p50_us)} µs p99 ${fmt(s.match_p99_us)} µs (baseline ${fmt(s.baseline_match_p50_us)} / ${fmt(s.baseline_match_p99_us)})` +
        `  ${resident} blocks on ${nodes} nodes, ${s.bytes_per_block} B/block (baseline ${s.baseline_bytes_per_block})`,
    );
  }
}

// ---------------------------------------------------------------------------
// 2,048-block prompts against 64 loaded workers holding varied prefixes.

log('2048-block prompts: loading 64 workers');
let seed = 0x2545f491;
const rand = (): number => {
  // xorshift32: a fixed seed keeps the workload identical run to run.
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 0x1_0000_0000;
};
const rand64 = (): bigint => (BigInt(Math.floor(rand() * 0x1_0000_0000)) << 32n) | BigInt(Math.floor(rand() * 0x1_0000_0000));
const LONG = 2048;
const PROMPTS = 8;
const long: Prompt[] = Array.from({ length: PROMPTS }, () => {
  const local = new BigUint64Array(LONG);
  const sequence = new BigUint64Array(LONG);
  for (let i = 0; i < LONG; i++) {
    local[i] = rand64();
    sequence[i] = rand64();
  }
  return { local, sequence };
});
const longEvents: KvEvent[] = [];
for (let w = 0; w < 64; w++) {
  const worker = (0xf000_0000_0000_0000n + BigInt(w)) as WorkerId;
  let id = 1n;
  for (const p of long) {
    // Prefix length: a quarter of workers hold the whole prompt, the rest a uniform random prefix.
    const len = rand() < 0.25 ? LONG : Math.floor(rand() * LONG);
    if (len === 0) continue;
    longEvents.push({
      workerId: worker,
      dpRank: 0,
      storageTier: 'device',
      eventId: id++,
      data: {
        kind: 'stored',
        parentHash: null as ExternalHash | null,
        startPosition: 0,
        blockHashes: p.sequence.subarray(0, len),
        tokensHashes: p.local.subarray(0, len),
      },
    });
  }
}
const q2 = long.map((p) => p.local);
gc();
const idx2 = new PrefixIndex(BLOCK);
for (const e of longEvents) idx2.apply(e, 0);
log(`2048-block prompts: ${idx2.totalBlocks} resident blocks; matching`);
gc();
const lat2 = latencies(q2, 200, (q) => idx2.match(q));
const base2 = new MapIndex(BLOCK);
for (const e of longEvents) base2.apply(e);
gc();
const blat2 = latencies(q2, 20, (q) => base2.match(q));
checked += sameAnswers(idx2, base2, q2);
console.log(
  `2048-block x 64 workers   match p50 ${fmt(percentile(lat2, 50))} µs p99 ${fmt(percentile(lat2, 99))} µs` +
    ` (baseline p50 ${fmt(percentile(blat2, 50))} / p99 ${fmt(percentile(blat2, 99))} µs)`,
);

const pooled = (xs: Float64Array[]): Float64Array => {
  const all = new Float64Array(xs.reduce((a, x) => a + x.length, 0));
  let k = 0;
  for (const x of xs) {
    all.set(x, k);
    k += x.length;
  }
  return all.sort();
};
const lat = pooled(matchLat);
const blat = pooled(baseMatchLat);
console.log(`check: PrefixIndex and the Map baseline gave identical match answers on ${checked} prompts`);

const summary = {
  block_ops_per_s: Math.round(totalOps / totalSec),
  baseline_block_ops_per_s: Math.round(totalOps / totalBaseSec),
  match_p50_us: +fmt(percentile(lat, 50)),
  match_p99_us: +fmt(percentile(lat, 99)),
  match_2048_p99_us: +fmt(percentile(lat2, 99)),
  match_2048_p50_us: +fmt(percentile(lat2, 50)),
  baseline_match_p50_us: +fmt(percentile(blat, 50)),
  baseline_match_p99_us: +fmt(percentile(blat, 99)),
  baseline_match_2048_p99_us: +fmt(percentile(blat2, 99)),
  bytes_per_block: Math.round(bytesPerBlock),
  bytes_per_block_scenario: bytesPerBlockScenario,
  answers_identical: true,
  answers_checked: checked,
  reps: REPS,
  scenarios,
};
console.log(JSON.stringify(summary));
