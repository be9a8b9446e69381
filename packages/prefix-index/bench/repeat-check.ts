/**
 * What the self-referencing check (src/repeats.ts) costs the apply loop, same run:
 *
 *   flock /tmp/vantage-bench.lock node --import tsx packages/prefix-index/bench/repeat-check.ts [trace:workers] [rounds]
 *
 * (in a worktree, with VANTAGE_SHARED=/work/shared)
 * (default `conversation_2k:8 8`). The scenario's event stream is simulated once (trace-sim.ts, as
 * `npm run bench:index` does). Then, in alternating rounds, a fresh index is filled from it as
 * shipped and one whose check is switched off (the baseline: the same code without the check), each
 * with every worker's `expectBlocks`; and the check alone is run over every stored event. Prints
 * the median block ops per CPU-second of both fills, their ratio, and the check's own CPU time as a
 * share of a fill's.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrefixIndex } from '@vantage/prefix-index';
import type { KvEvent, WorkerId } from '@vantage/types';
import { RepeatCheck } from '../src/repeats';
import { mix2, u64Hi, u64Lo } from '../src/hash32';
import { loadTracePrompts, simulate } from './trace-sim';

// The shared data folder: VANTAGE_SHARED, or beside the repository.
const besideSource = fileURLToPath(new URL('../../../../shared', import.meta.url));
const SHARED = process.env.VANTAGE_SHARED ?? (existsSync(besideSource) ? besideSource : resolve('../shared'));
const BLOCK = 64;
const CAPACITY = 16_384;

const spec = process.argv[2] ?? 'conversation_2k:8';
const rounds = Number(process.argv[3] ?? 8);
const [name, w] = spec.split(':');
if (!name || !(Number(w) > 0) || !(rounds > 0)) {
  process.stderr.write('usage: repeat-check.ts [trace:workers] [rounds]\n');
  process.exit(2);
}
const events: readonly KvEvent[] = simulate(loadTracePrompts(`${SHARED}/traces/${name}.jsonl`, BLOCK), Number(w), CAPACITY).events;
const workers: WorkerId[] = [...new Set(events.map((e) => e.workerId))];
const ops = events.reduce((a, e) => a + (e.data.kind === 'cleared' ? 0 : e.data.blockHashes.length), 0);

const cpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

function fill(checked: boolean): number {
  const x = new PrefixIndex(BLOCK);
  // The baseline: the same index with its check answering "no repeat" at once.
  if (!checked) (x as unknown as { repeats: { has: () => boolean } }).repeats = { has: () => false };
  for (const id of workers) x.expectBlocks(id, CAPACITY);
  const c0 = cpu();
  for (let i = 0; i < events.length; i++) x.apply(events[i]!, 0);
  return cpu() - c0;
}

// The check alone, given the homes the apply computes anyway (here computed up front, untimed).
const check = new RepeatCheck();
const stores = events.flatMap((e) => {
  const d = e.data;
  if (d.kind !== 'stored') return [];
  const ext = new Int32Array(d.blockHashes.buffer, d.blockHashes.byteOffset, d.blockHashes.length * 2);
  const homes = Int32Array.from({ length: d.blockHashes.length }, (_, i) => mix2(ext[2 * i]!, ext[2 * i + 1]!) & 0xfffff);
  const p = d.parentHash;
  const lo = p === null ? 0 : u64Lo(p);
  const hi = p === null ? 0 : u64Hi(p);
  return [{ ext, homes, n: d.blockHashes.length, parent: p === null ? -1 : mix2(lo, hi) & 0xfffff, lo, hi }];
});
function checkOnly(): { s: number; found: number } {
  let found = 0;
  const c0 = cpu();
  for (const s of stores) if (check.has(s.ext, s.homes, s.n, s.parent, s.lo, s.hi)) found++;
  return { s: cpu() - c0, found };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const on: number[] = [];
const off: number[] = [];
const alone: number[] = [];
let found = 0;
for (let r = 0; r < rounds + 2; r++) {
  const a = r % 2 === 0 ? fill(true) : fill(false);
  const b = r % 2 === 0 ? fill(false) : fill(true);
  const c = checkOnly();
  found = c.found;
  if (r < 2) continue;
  on.push(r % 2 === 0 ? a : b);
  off.push(r % 2 === 0 ? b : a);
  alone.push(c.s);
}
const mOn = median(on);
const mOff = median(off);
process.stdout.write(
  JSON.stringify({
    scenario: spec,
    events: events.length,
    block_ops: ops,
    rounds,
    with_check_block_ops_per_s: Math.round(ops / mOn),
    without_check_block_ops_per_s: Math.round(ops / mOff),
    ratio_with_over_without: Number((mOff / mOn).toFixed(3)),
    check_alone_share_of_fill: Number((median(alone) / mOn).toFixed(4)),
    self_referencing_events: found,
  }) + '\n',
);
