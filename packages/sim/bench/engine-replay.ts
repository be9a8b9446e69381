import { fileURLToPath } from 'node:url';
/**
 * Engine throughput on a real trace: the synthetic Mooncake trace (3,993
 * requests) replayed on N engines with round-robin placement and a
 * global event queue (the shape the offline replay will have, minus the
 * router). Prints hashing time and replay time, each against a baseline
 * measured in the same run: hashing by materialised tokens, and replay with
 * one forward pass per step (no decode fast-forward).
 *
 *   npx tsx packages/sim/bench/engine-replay.ts [trace] [workers] [concurrency]
 *
 * Without a concurrency the trace runs open loop at its timestamps; with one
 * it runs closed loop (that many in flight).
 */
import type { WorkerId } from '@vantage/types';
import { hashPrompt } from '@vantage/hashing';
import { ClosedLoop, Engine, MooncakePromptHasher, loadMooncakeTrace, nextPass, openLoopArrivals, type NextPass } from '@vantage/sim';
// The shared data folder beside the repository (traces are not part of the product).
const SHARED = fileURLToPath(new URL('../../../../shared', import.meta.url));

const path = process.argv[2] ?? `${SHARED}/traces/synthetic_trace.jsonl`;
const workers = Number(process.argv[3] ?? 8);
const records = loadMooncakeTrace(path);

let t = performance.now();
const hasher = new MooncakePromptHasher(64);
const prompts = records.map((r) => hasher.prompt(r.hashIds, r.inputLength));
const hashMs = performance.now() - t;

t = performance.now();
const sample = records.slice(0, 200);
for (const r of sample) hashPrompt(MooncakePromptHasher.tokens(r.hashIds, r.inputLength), 64);
const baselineHashMs = ((performance.now() - t) * records.length) / sample.length;

function replay(fastForward: boolean, concurrency?: number) {
  const engines = Array.from({ length: workers }, (_, i) => new Engine({ workerId: BigInt(i + 1) as WorkerId }));
  const t0 = performance.now();
  const add = (index: number, arrivalMs: number) => {
    const r = records[index]!;
    const res = engines[index % workers]!.addRequest({ id: String(index), arrivalMs, prompt: prompts[index]!, osl: r.outputLength });
    if (!res.ok) throw new Error(res.reason);
  };
  // Open loop: every arrival is known up front. Closed loop: completions release the next request.
  const arrivals = concurrency === undefined ? openLoopArrivals(records) : [];
  const loop = concurrency === undefined ? undefined : new ClosedLoop(records.length, concurrency);
  loop?.start(0).forEach((a) => add(a.index, a.arrivalMs));
  let next = 0;
  let calls = 0;
  let passes = 0;
  let finished = 0;
  let kvEvents = 0;
  let ttftSum = 0;
  let e2eSum = 0;
  let reused = 0;
  let isl = 0;
  // A binary heap would be the choice for 64 engines; for 8 a linear scan is cheaper.
  const pass: NextPass = { best: -1, bestT: Infinity, other: Infinity };
  for (;;) {
    const { best, bestT, other } = nextPass(engines, pass);
    const arrivalT = next < arrivals.length ? arrivals[next]!.arrivalMs : Infinity;
    if (arrivalT === Infinity && best < 0) break;
    if (arrivalT <= bestT) {
      const a = arrivals[next++]!;
      add(a.index, a.arrivalMs);
      continue;
    }
    // The earliest time a request could next be added to this engine: the next
    // trace arrival (open loop) or another engine's next pass (closed loop).
    const untilMs = loop ? other : arrivalT;
    const s = engines[best]!.step(bestT, fastForward ? { untilMs } : {});
    calls++;
    passes += s.passes;
    kvEvents += s.kvEvents.length;
    for (const f of s.finished) {
      finished++;
      ttftSum += f.firstTokenMs - f.arrivalMs;
      e2eSum += f.atMs - f.arrivalMs;
      reused += f.reusedTokens;
      isl += f.isl;
      const n = loop?.complete(f.atMs);
      if (n) add(n.index, n.arrivalMs);
    }
  }
  return { ms: performance.now() - t0, calls, passes, finished, kvEvents, meanTtftMs: ttftSum / finished, meanE2eMs: e2eSum / finished, prefixReuse: reused / isl };
}

const concurrency = process.argv[4] === undefined ? undefined : Number(process.argv[4]);
const base = replay(false, concurrency);
const fast = replay(true, concurrency);
if (fast.passes !== base.passes || fast.meanTtftMs !== base.meanTtftMs || fast.meanE2eMs !== base.meanE2eMs) {
  throw new Error('fast-forward changed the simulation');
}
console.log(`trace ${path}: ${records.length} requests on ${workers} engines, ${concurrency === undefined ? 'open loop' : `closed loop, concurrency ${concurrency}`}`);
console.log(`hash prompts (chunk cache): ${hashMs.toFixed(0)} ms; baseline by tokens: ~${baselineHashMs.toFixed(0)} ms`);
console.log(`replay, one pass per step: ${base.ms.toFixed(0)} ms, ${base.calls} steps`);
console.log(`replay, decode fast-forward: ${fast.ms.toFixed(0)} ms, ${fast.calls} steps for ${fast.passes} passes`);
console.log(
  `${fast.finished} finished, ${fast.kvEvents} KV events, mean TTFT ${fast.meanTtftMs.toFixed(1)} ms, mean E2E ${fast.meanE2eMs.toFixed(1)} ms, prefix reuse ${fast.prefixReuse.toFixed(3)}`,
);
console.log(
  JSON.stringify({
    requests: records.length,
    workers,
    concurrency: concurrency ?? null,
    hashMs: Math.round(hashMs),
    baselineHashMs: Math.round(baselineHashMs),
    replayMs: Math.round(fast.ms),
    baselineReplayMs: Math.round(base.ms),
    steps: fast.calls,
    passes: fast.passes,
    kvEvents: fast.kvEvents,
    meanTtftMs: fast.meanTtftMs,
    meanE2eMs: fast.meanE2eMs,
    prefixReuse: fast.prefixReuse,
  }),
);
