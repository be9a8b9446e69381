/**
 * Event-loop stalls of a live decision service, and what the main thread did during each. Loaded as a
 * preload, it ticks every millisecond; a tick later than 4 ms is a stall, written at exit to
 * LOOP_STALLS_FILE (default /tmp/vantage-loop-stalls.txt) as `startMs stallMs run <ms> wait <ms>`:
 * the main thread's time on a core and its time runnable but waiting for one during the stall, from
 * the kernel's /proc/self/task/<pid>/schedstat (on-CPU ns, run-queue ns). Linux only.
 *
 *   flock /tmp/vantage-bench.lock env BENCH_SECONDS=20 BENCH_RATES=1500 BENCH_SEARCH_MAX=0 BENCH_MODES=local \
 *     BENCH_DYNAMO_SELECT=0 BENCH_SCENARIOS=32k-hashes \
 *     BENCH_DECISION_NODE_ARGS="--import tsx --import ./services/decision/bench/loop-stalls.ts" npm run bench:decision
 *   sort -k2 -n -r /tmp/vantage-loop-stalls.txt | head
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const FILE = process.env.LOOP_STALLS_FILE ?? '/tmp/vantage-loop-stalls.txt';
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;
const STALL_MS = 4;

const sched = (): [number, number] => {
  const [run, wait] = readFileSync(SCHEDSTAT, 'utf8').split(' ').map(Number);
  return [run!, wait!];
};
const stalls: string[] = [];
let lastMs = performance.now();
let last = sched();
setInterval(() => {
  const now = performance.now();
  const s = sched();
  if (now - lastMs > STALL_MS) stalls.push(`${lastMs.toFixed(1)} ${(now - lastMs).toFixed(1)} run ${((s[0] - last[0]) / 1e6).toFixed(1)} wait ${((s[1] - last[1]) / 1e6).toFixed(1)}`);
  lastMs = now;
  last = s;
}, 1).unref();
process.once('exit', () => writeFileSync(FILE, stalls.join('\n') + '\n'));
