/**
 * Engine throughput on a real trace: the synthetic Mooncake trace (3,993
 * requests) replayed open-loop on N engines with round-robin placement and a
 * global event queue (the shape the offline replay will have, minus the
 * router). Prints hashing time, replay time, passes, and a baseline (hashing
 * the same prompts by materialised tokens) measured in the same run.
 *
 *   npx tsx packages/sim/bench/engine-replay.ts [trace] [workers]
 */
import type { WorkerId } from '@vantage/types';
import { hashPrompt } from '@vantage/hashing';
import { Engine, MooncakePromptHasher, loadMooncakeTrace, openLoopArrivals } from '@vantage/sim';

const path = process.argv[2] ?? '/work/shared/traces/synthetic_trace.jsonl';
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

const engines = Array.from({ length: workers }, (_, i) => new Engine({ workerId: BigInt(i + 1) as WorkerId }));
const arrivals = openLoopArrivals(records);
t = performance.now();
let next = 0;
let passes = 0;
let finished = 0;
let kvEvents = 0;
let ttftSum = 0;
let reused = 0;
let isl = 0;
// A binary heap would be the production choice; 8 engines make a linear scan cheaper here.
for (;;) {
  let best = -1;
  let bestT = Infinity;
  for (let i = 0; i < engines.length; i++) {
    const e = engines[i]!.nextEventTime();
    if (e < bestT) {
      bestT = e;
      best = i;
    }
  }
  const arrivalT = next < arrivals.length ? arrivals[next]!.arrivalMs : Infinity;
  if (arrivalT === Infinity && best < 0) break;
  if (arrivalT <= bestT) {
    const a = arrivals[next++]!;
    const r = records[a.index]!;
    const res = engines[a.index % workers]!.addRequest({ id: String(a.index), arrivalMs: a.arrivalMs, prompt: prompts[a.index]!, osl: r.outputLength });
    if (!res.ok) throw new Error(res.reason);
    continue;
  }
  const s = engines[best]!.step(bestT);
  passes++;
  kvEvents += s.kvEvents.length;
  for (const f of s.finished) {
    finished++;
    ttftSum += f.firstTokenMs - f.arrivalMs;
    reused += f.reusedTokens;
    isl += f.isl;
  }
}
const replayMs = performance.now() - t;
console.log(`trace ${path}: ${records.length} requests on ${workers} engines`);
console.log(`hash prompts (chunk cache): ${hashMs.toFixed(0)} ms; baseline by tokens: ~${baselineHashMs.toFixed(0)} ms`);
console.log(`replay: ${replayMs.toFixed(0)} ms, ${passes} passes, ${kvEvents} KV events, ${finished} finished`);
console.log(`mean TTFT ${(ttftSum / finished).toFixed(1)} ms, prefix reuse ${(reused / isl).toFixed(3)}`);
console.log(JSON.stringify({ requests: records.length, workers, hashMs: Math.round(hashMs), baselineHashMs: Math.round(baselineHashMs), replayMs: Math.round(replayMs), passes, kvEvents, finished, meanTtftMs: ttftSum / finished, prefixReuse: reused / isl }));
