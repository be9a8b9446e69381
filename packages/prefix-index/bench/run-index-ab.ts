/**
 * `RunIndex` (runs of blocks per node: src/run-index.ts) against `PrefixIndex` (a record per
 * block) on the benchmark's own event streams:
 *
 *   flock /tmp/vantage-bench.lock node --import tsx packages/prefix-index/bench/run-tree.ts [trace:workers ...]
 *
 * Each scenario's stream is simulated once (trace-sim.ts: 16,384-block caches, block size 64, LRU
 * eviction), both fill an index from it, and every worker's leading blocks must be equal on every
 * prompt of the trace, on all four tier sets (the run fails otherwise). Printed per scenario: both
 * apply rates (block ops per CPU-second, median of REPS interleaved fills each, with every
 * worker's `expectBlocks` as the benchmark gives it), and both match latencies (each prompt's best
 * of 3 interleaved calls; p50 and p99 over the trace's prompts); with IDLE=N, also the median of N
 * matches of the long prompts (256 blocks or more) each timed alone after a 1 ms sleep, as the
 * indexer answers one query at a time at 1,000/s, alternating between the two.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { KvEvent, WorkerId } from '@vantage/types';
import type { MatchResult } from '../src/types';
import { PrefixIndex } from '../src/index';
import { RunIndex } from '../src/run-index';
import { loadTracePrompts, simulate } from './trace-sim';

// -------------------------------------------------------------------------------------------------

{
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const SHARED = fileURLToPath(new URL('../../../../shared', import.meta.url));
  const REPS = Number(process.env.REPS ?? 8);
  const IDLE = Number(process.env.IDLE ?? 0);
  const CAPACITY = 16_384;
  const BLOCK = 64;
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const pct = (xs: number[], p: number): number => xs[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;
  const specs = process.argv.slice(2);
  const tot = { ops: 0, cpuA: 0, cpuB: 0 };
  for (const spec of specs.length > 0 ? specs : ['conversation_2k:8', 'conversation_2k:64', 'synthetic_trace:8', 'synthetic_trace:64']) {
    const [name, w] = spec.split(':');
    const prompts = loadTracePrompts(`${SHARED}/traces/${name}.jsonl`, BLOCK);
    const sim = simulate(prompts, Number(w), CAPACITY);
    const events: readonly KvEvent[] = sim.events;
    const workers: WorkerId[] = [...new Set(events.map((e) => e.workerId))];
    const fillA = (): PrefixIndex => {
      const x = new PrefixIndex(BLOCK);
      for (const id of workers) x.expectBlocks(id, CAPACITY);
      for (let i = 0; i < events.length; i++) x.apply(events[i]!, 0);
      return x;
    };
    const fillB = (): RunIndex => {
      const x = new RunIndex(BLOCK);
      for (const id of workers) x.expectBlocks(id, CAPACITY);
      for (let i = 0; i < events.length; i++) x.apply(events[i]!, 0);
      return x;
    };
    const time = (f: () => unknown): number => {
      gc();
      gc();
      const c0 = process.cpuUsage();
      f();
      const c = process.cpuUsage(c0);
      return (c.user + c.system) / 1e6;
    };
    const a = fillA();
    const b = fillB();
    // Same answers: every worker's leading blocks on every prompt, on every tier set.
    if (a.totalBlocks !== b.totalBlocks || a.nodeCount !== b.nodeCount) {
      throw new Error(`${spec}: ${a.totalBlocks} resident blocks on ${a.nodeCount} positions against ${b.totalBlocks} on ${b.nodeCount}`);
    }
    const key = (r: MatchResult): string => JSON.stringify(r.workers.map((w) => [String(w.workerId), w.deviceBlocks, w.hostBlocks, w.diskBlocks, w.anyBlocks, w.treeSize]).sort());
    for (const [qi, p] of prompts.entries()) {
      if (key(a.match(p.local)) !== key(b.match(p.local))) throw new Error(`${spec}: prompt ${qi} answered differently`);
    }
    const ta: number[] = [];
    const tb: number[] = [];
    for (let r = 0; r < REPS; r++) {
      if (r % 2 === 0) {
        ta.push(time(fillA));
        tb.push(time(fillB));
      } else {
        tb.push(time(fillB));
        ta.push(time(fillA));
      }
    }
    tot.ops += sim.blockOps * REPS;
    tot.cpuA += ta.reduce((x, y) => x + y, 0);
    tot.cpuB += tb.reduce((x, y) => x + y, 0);
    // Match: each prompt's best of 3 interleaved calls.
    const bestA = new Array<number>(prompts.length).fill(Infinity);
    const bestB = new Array<number>(prompts.length).fill(Infinity);
    for (let r = 0; r < 3; r++) {
      for (const [i, p] of prompts.entries()) {
        let t0 = process.hrtime.bigint();
        a.matchTransient(p.local);
        bestA[i] = Math.min(bestA[i]!, Number(process.hrtime.bigint() - t0) / 1000);
        t0 = process.hrtime.bigint();
        b.matchTransient(p.local);
        bestB[i] = Math.min(bestB[i]!, Number(process.hrtime.bigint() - t0) / 1000);
      }
    }
    bestA.sort((x, y) => x - y);
    bestB.sort((x, y) => x - y);
    // IDLE=N: N more matches of long prompts (256 blocks or more), each alone after a 1 ms sleep, as
    // the indexer answers one query at a time at 1,000/s (caches, TLB and clock as the live service
    // finds them), alternating between the two.
    let idle = '';
    const long = prompts.filter((p) => p.local.length >= 256);
    if (IDLE > 0 && long.length > 0) {
      const ia: number[] = [];
      const ib: number[] = [];
      for (let r = 0; r < IDLE; r++) {
        const q = long[r % long.length]!.local;
        await sleep(1);
        const t0 = process.hrtime.bigint();
        if (r % 2 === 0) a.matchTransient(q);
        else b.matchTransient(q);
        (r % 2 === 0 ? ia : ib).push(Number(process.hrtime.bigint() - t0) / 1000);
      }
      ia.sort((x, y) => x - y);
      ib.sort((x, y) => x - y);
      idle = `  idle match of ${long.length} long prompts, median PrefixIndex ${pct(ia, 50).toFixed(1)}  RunIndex ${pct(ib, 50).toFixed(1)} µs`;
    }
    console.log(
      `${spec.padEnd(20)} apply PrefixIndex ${(sim.blockOps / median(ta) / 1e6).toFixed(2)}  RunIndex ${(sim.blockOps / median(tb) / 1e6).toFixed(2)} M block ops/cpu-s` +
        `  match p50/p99 PrefixIndex ${pct(bestA, 50).toFixed(2)}/${pct(bestA, 99).toFixed(2)}  RunIndex ${pct(bestB, 50).toFixed(2)}/${pct(bestB, 99).toFixed(2)} µs` +
        `  (answers equal on ${prompts.length} prompts)${idle}`,
    );
  }
  console.log(`pooled apply: PrefixIndex ${(tot.ops / tot.cpuA / 1e6).toFixed(2)}  RunIndex ${(tot.ops / tot.cpuB / 1e6).toFixed(2)} M block ops/cpu-s`);
}
