/**
 * One benchmark scenario's fill, over and over, for profiles and page-fault counts:
 *
 *   node --import tsx packages/prefix-index/bench/fill-loop.ts [trace:workers] [fills]
 *
 * e.g. `synthetic_trace:64 12` (the default `conversation_2k:8 20`). The scenario's event stream is
 * simulated once (trace-sim.ts, as `npm run bench:index` does: 16,384-block caches, block size 64),
 * then the loop fills a fresh index from it twice untimed and `fills` times timed, each after two
 * forced collections and with every worker's `expectBlocks` as the benchmark gives it. One small
 * index stays alive throughout (see index-bench.ts). Prints the kernel's share of the timed fills'
 * CPU time, page faults per fill, and each fill's rate in M block ops per CPU-second.
 *
 * For a line-level profile, bundle it first so that lines map to one file:
 *   npx esbuild packages/prefix-index/bench/fill-loop.ts --bundle --platform=node --format=esm \
 *     --outfile=.infra/fill-loop.mjs --external:@node-rs/* \
 *     --banner:js="import {createRequire} from 'module'; const require = createRequire(import.meta.url);"
 *   node --cpu-prof --cpu-prof-interval 50 .infra/fill-loop.mjs conversation_2k:8 20
 * (run it from the repository root, where `@node-rs/*` resolves).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PrefixIndex } from '@vantage/prefix-index';
import type { KvEvent, WorkerId } from '@vantage/types';
import { loadTracePrompts, simulate } from './trace-sim';

// The shared data folder beside the repository: found from this file, or (bundled into .infra/) from
// the repository root it is run from.
const besideSource = fileURLToPath(new URL('../../../../shared', import.meta.url));
const SHARED = existsSync(besideSource) ? besideSource : resolve('../shared');
const BLOCK = 64;
const CAPACITY = 16_384;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const spec = process.argv[2] ?? 'conversation_2k:8';
const fills = Number(process.argv[3] ?? 20);
const [name, w] = spec.split(':');
if (!name || !(Number(w) > 0) || !(fills > 0)) {
  process.stderr.write('usage: fill-loop.ts [trace:workers] [fills]   e.g. synthetic_trace:64 12\n');
  process.exit(2);
}
const sim = simulate(loadTracePrompts(`${SHARED}/traces/${name}.jsonl`, BLOCK), Number(w), CAPACITY);
const events: readonly KvEvent[] = sim.events;
const workers: WorkerId[] = [...new Set(events.map((e) => e.workerId))];

// Kept alive for the whole run, as in index-bench.ts (so V8 keeps the index's optimized code).
const keep = new PrefixIndex(BLOCK);
keep.apply(events[0]!, 0);

function fill(): PrefixIndex {
  const x = new PrefixIndex(BLOCK);
  for (const id of workers) x.expectBlocks(id, CAPACITY);
  for (let i = 0; i < events.length; i++) x.apply(events[i]!, 0);
  return x;
}

fill();
fill();
let cpu = 0;
let sys = 0;
let faults = 0;
const rates: number[] = [];
for (let r = 0; r < fills; r++) {
  gc();
  gc();
  const f0 = process.resourceUsage().minorPageFault;
  const c0 = process.cpuUsage();
  fill();
  const c = process.cpuUsage(c0);
  faults += process.resourceUsage().minorPageFault - f0;
  const s = (c.user + c.system) / 1e6;
  cpu += s;
  sys += c.system / 1e6;
  rates.push(sim.blockOps / s / 1e6);
}
console.log(`${spec}: ${events.length} events, ${sim.blockOps} block ops per fill, ${fills} timed fills`);
console.log(`kernel share of CPU ${(sys / cpu).toFixed(3)}, page faults per fill ${Math.round(faults / fills)}`);
console.log(`pooled ${((sim.blockOps * fills) / cpu / 1e6).toFixed(2)} M block ops/cpu-s; fills ${rates.map((x) => x.toFixed(2)).join(' ')}`);
