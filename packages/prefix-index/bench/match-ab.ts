/**
 * A/B of two PrefixIndex implementations' match, in one process, rounds alternating: the
 * benchmark's 2,048-block prompts against 64 workers holding varied prefixes of them (as
 * index-bench.ts builds them), each implementation timing every prompt's best of 10 interleaved
 * calls per round; six rounds, A then B. Both must give the same device-tier answers (checked first).
 *
 *   mkdir -p packages/prefix-index/.ab && for f in $(git ls-tree --name-only REV packages/prefix-index/src/); do
 *     git show REV:$f > packages/prefix-index/.ab/$(basename $f); done
 *   AB_A=packages/prefix-index/.ab/index.ts AB_B=packages/prefix-index/src/index.ts \
 *     flock /tmp/vantage-bench.lock node --import tsx packages/prefix-index/bench/match-ab.ts
 *
 * (the copy must sit inside the repository, so its own imports resolve; delete it afterwards).
 * A module exporting `RunIndex` instead is loaded as well: `AB_B=packages/prefix-index/src/run-index.ts`
 * compares the two layouts.
 * Prints per round each one's p50 and p99 over the 64 prompts. `LONG` sets the prompt length.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PrefixIndex } from '@vantage/prefix-index';
import { longPromptWorkload } from './long-prompts';

type Index = Pick<PrefixIndex, 'apply' | 'match' | 'matchTransient'>;
type Ctor = new (blockSize: number) => Index;
const load = async (env: string): Promise<Ctor> => {
  const path = process.env[env];
  if (!path) throw new Error(`set ${env} (see the header)`);
  const m = (await import(pathToFileURL(resolve(path)).href)) as { PrefixIndex?: Ctor; RunIndex?: Ctor };
  const C = m.PrefixIndex ?? m.RunIndex;
  if (C === undefined) throw new Error(`${path} exports neither PrefixIndex nor RunIndex`);
  return C;
};
const A = await load('AB_A');
const B = await load('AB_B');

// The same workload as index-bench.ts's 2,048-block part.
const { prompts: long, events } = longPromptWorkload(Number(process.env.LONG ?? 2048));
const ia = new A(64);
const ib = new B(64);
for (const e of events) {
  ia.apply(e, 0);
  ib.apply(e, 0);
}
const queries = long.map((p) => p.local);
const answer = (ix: Index, q: BigUint64Array): string => JSON.stringify(ix.match(q).workers.map((m) => m.deviceBlocks));
queries.forEach((q, i) => {
  if (answer(ia, q) !== answer(ib, q)) throw new Error(`A and B answer prompt ${i} differently`);
});

/** Each prompt's best of 10 interleaved calls, sorted. */
function time(ix: Index): number[] {
  const best = new Array<number>(queries.length).fill(Infinity);
  for (let r = 0; r < 10; r++) {
    for (let i = 0; i < queries.length; i++) {
      const t0 = process.hrtime.bigint();
      ix.matchTransient(queries[i]!);
      const us = Number(process.hrtime.bigint() - t0) / 1000;
      if (us < best[i]!) best[i] = us;
    }
  }
  return best.sort((a, b) => a - b);
}
const pct = (xs: number[], p: number): string => xs[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!.toFixed(2);
for (let round = 0; round < 6; round++) {
  const a = time(ia);
  const b = time(ib);
  console.log(`round ${round + 1}: A p50 ${pct(a, 50)} p99 ${pct(a, 99)} µs   B p50 ${pct(b, 50)} p99 ${pct(b, 99)} µs`);
}
