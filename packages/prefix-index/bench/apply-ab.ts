/**
 * A/B of two PrefixIndex implementations' apply loop, in one process, passes interleaved.
 *
 *   mkdir -p packages/prefix-index/.ab && for f in $(git ls-tree --name-only REV packages/prefix-index/src/); do
 *     git show REV:$f > packages/prefix-index/.ab/$(basename $f); done
 *   AB_A=packages/prefix-index/.ab/index.ts AB_B=packages/prefix-index/src/index.ts \
 *     flock /tmp/vantage-bench.lock node --import tsx packages/prefix-index/bench/apply-ab.ts [trace:workers ...]
 *
 * (the copy must sit inside the repository, so its own imports resolve; delete it afterwards).
 * A module exporting `RunIndex` instead is loaded as well: `AB_B=packages/prefix-index/src/run-index.ts`
 * compares the two layouts.
 * Scenarios default to the four of `npm run bench:index` (trace file name : worker count). Each
 * scenario's event stream is simulated once (trace-sim.ts), then both implementations fill an
 * index from it twice untimed, then REPS (default 8) timed fills each, A and B alternating (and
 * which goes first alternating), each after two forced collections, with every worker's
 * `expectBlocks` as the benchmark gives it (AB_EXPECT=0: none). One index of each stays alive
 * throughout (see index-bench.ts). Printed per scenario: the median rate of each and the median of
 * the per-pair ratios B/A; then each one's kernel share of its CPU time and page faults per timed
 * pass (all scenarios); then the pooled rates (all ops over all CPU time).
 *
 * Why this and not two runs of the benchmark: on this shared machine single passes vary by 1.5x and
 * whole runs by ±15 %, far more than most changes are worth, while passes a fraction of a second
 * apart see the same machine. Caveat, measured: two identical copies of the source loaded this way
 * differ systematically within a process, by 5–12 % in runs of one session and 17 % the other way
 * in another (B/A 0.87–0.97 and 1.17), so run every comparison both ways round (swap AB_A and AB_B)
 * and take the geometric mean of the pooled ratios (B/A of one, A/B of the other). Huge pages are a process setting: compare them with separate processes
 * (GLIBC_TUNABLES=glibc.malloc.hugetlb=1 on one, alternating).
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { PrefixIndex } from '@vantage/prefix-index';
import type { KvEvent, WorkerId } from '@vantage/types';
import { loadTracePrompts, simulate } from './trace-sim';

type Ctor = new (blockSize: number) => PrefixIndex;

const SHARED = fileURLToPath(new URL('../../../../shared', import.meta.url));
const REPS = Number(process.env.REPS ?? 8);
const EXPECT = process.env.AB_EXPECT !== '0';
const CAPACITY = 16_384;
const BLOCK = 64;

async function load(path: string | undefined, name: string): Promise<Ctor> {
  if (path === undefined) throw new Error(`set ${name} to the index.ts of an implementation (see the header)`);
  const m = (await import(pathToFileURL(resolve(path)).href)) as { PrefixIndex?: Ctor; RunIndex?: Ctor };
  const C = m.PrefixIndex ?? m.RunIndex;
  if (C === undefined) throw new Error(`${path} exports neither PrefixIndex nor RunIndex`);
  return C;
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const A = await load(process.env.AB_A, 'AB_A');
const B = await load(process.env.AB_B, 'AB_B');
if (A === B) throw new Error('AB_A and AB_B load the same module');

const median = (xs: number[]): number => [...xs].sort((p, q) => p - q)[xs.length >> 1]!;
const specs = process.argv.slice(2);
const tot = { opsA: 0, cpuA: 0, opsB: 0, cpuB: 0, sysA: 0, sysB: 0, faultsA: 0, faultsB: 0, passes: 0 };
const kept: PrefixIndex[] = [];
for (const spec of specs.length > 0
  ? specs
  : ['conversation_2k:8', 'conversation_2k:64', 'synthetic_trace:8', 'synthetic_trace:64']) {
  const [name, w] = spec.split(':');
  const sim = simulate(loadTracePrompts(`${SHARED}/traces/${name}.jsonl`, BLOCK), Number(w), CAPACITY);
  const events: readonly KvEvent[] = sim.events;
  const workers: WorkerId[] = [...new Set(events.map((e) => e.workerId))];
  const fill = (C: Ctor): PrefixIndex => {
    const x = new C(BLOCK);
    if (EXPECT) for (const id of workers) x.expectBlocks(id, CAPACITY);
    for (let i = 0; i < events.length; i++) x.apply(events[i]!, 0);
    return x;
  };
  const time = (C: Ctor): number => {
    gc();
    gc();
    const f0 = process.resourceUsage().minorPageFault;
    const c0 = process.cpuUsage();
    fill(C);
    const c = process.cpuUsage(c0);
    const faults = process.resourceUsage().minorPageFault - f0;
    if (C === A) {
      tot.passes++;
      tot.sysA += c.system / 1e6;
      tot.faultsA += faults;
    } else {
      tot.sysB += c.system / 1e6;
      tot.faultsB += faults;
    }
    return (c.user + c.system) / 1e6;
  };
  const a0 = fill(A);
  const b0 = fill(B);
  if (a0.totalBlocks !== b0.totalBlocks || a0.nodeCount !== b0.nodeCount) throw new Error(`${spec}: A and B disagree`);
  if (kept.length === 0) kept.push(a0, b0);
  fill(A);
  fill(B);
  const ta: number[] = [];
  const tb: number[] = [];
  for (let r = 0; r < REPS; r++) {
    if (r % 2 === 0) {
      ta.push(time(A));
      tb.push(time(B));
    } else {
      tb.push(time(B));
      ta.push(time(A));
    }
  }
  tot.opsA += sim.blockOps * REPS;
  tot.opsB += sim.blockOps * REPS;
  tot.cpuA += ta.reduce((s, x) => s + x, 0);
  tot.cpuB += tb.reduce((s, x) => s + x, 0);
  const ratios = ta.map((a, i) => a / tb[i]!);
  console.log(
    `${spec.padEnd(20)} A ${(sim.blockOps / median(ta) / 1e6).toFixed(2)}  B ${(sim.blockOps / median(tb) / 1e6).toFixed(2)} M block ops/cpu-s` +
      `  B/A median ${median(ratios).toFixed(3)} [${ratios.map((x) => x.toFixed(2)).join(' ')}]`,
  );
}
const ra = tot.opsA / tot.cpuA;
const rb = tot.opsB / tot.cpuB;
console.log(
  `kernel share of CPU A ${(tot.sysA / tot.cpuA).toFixed(3)}  B ${(tot.sysB / tot.cpuB).toFixed(3)};` +
    ` page faults per timed pass A ${Math.round(tot.faultsA / tot.passes)}  B ${Math.round(tot.faultsB / tot.passes)}`,
);
console.log(`pooled A ${(ra / 1e6).toFixed(2)}  B ${(rb / 1e6).toFixed(2)} M block ops/cpu-s  B/A ${(rb / ra).toFixed(3)}  (kept: ${kept.length} indexes)`);
