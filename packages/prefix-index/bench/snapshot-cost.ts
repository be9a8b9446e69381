/**
 * Snapshot size and the time to write and restore one, for both layouts, on two of the benchmark's
 * filled indexes (trace-sim.ts, as `npm run bench:index` fills them, without size hints):
 *
 *   flock /tmp/vantage-bench.lock node --import tsx packages/prefix-index/bench/snapshot-cost.ts
 *
 * `RunIndex` writes the layout-neutral version 3 and restores by storing the blocks again;
 * `PrefixIndex` writes its tables (version 2) and restores by copying them. Each restore runs twice
 * (the first one includes compiling the restore path). For `RunIndex` it also prints the room the
 * fill left (block positions handed out against those in the tree; a compaction starts above 4x
 * plus 65,536) and how long an explicit `compact()` of the filled index takes, the same rebuild.
 * Scenarios: trace:workers arguments (default conversation_2k:64 synthetic_trace:8).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrefixIndex, RunIndex } from '@vantage/prefix-index';
import { loadTracePrompts, simulate } from './trace-sim';

const besideSource = fileURLToPath(new URL('../../../../shared', import.meta.url));
const SHARED = existsSync(besideSource) ? besideSource : resolve('../shared');

const specs = process.argv.length > 2 ? process.argv.slice(2) : ['conversation_2k:64', 'synthetic_trace:8'];
for (const spec of specs) {
  const [name, w] = spec.split(':');
  const sim = simulate(loadTracePrompts(`${SHARED}/traces/${name}.jsonl`, 64), Number(w), 16_384);
  for (const Index of [RunIndex, PrefixIndex]) {
    const x = new Index(64);
    for (const e of sim.events) x.apply(e, 0);
    let t = performance.now();
    const bytes = x.snapshot();
    const writeMs = performance.now() - t;
    const restoreMs: number[] = [];
    for (let r = 0; r < 2; r++) {
      t = performance.now();
      const y = Index.restore(bytes);
      restoreMs.push(performance.now() - t);
      if (y.totalBlocks !== x.totalBlocks) throw new Error(`${Index.name}: restored ${y.totalBlocks} blocks of ${x.totalBlocks}`);
    }
    let room = '';
    if (x instanceof RunIndex) {
      const before = x.room;
      t = performance.now();
      x.compact();
      const ms = performance.now() - t;
      room = `; room ${before.positions} positions for ${before.inTree} in the tree (${(before.positions / before.inTree).toFixed(2)}x, ${before.compactions} compactions during the fill), compact() ${ms.toFixed(0)} ms -> ${x.room.positions}`;
    }
    console.log(
      `${spec.padEnd(20)} ${Index.name.padEnd(12)} ${x.totalBlocks} blocks: snapshot ${(bytes.length / 1e6).toFixed(1)} MB written in ${writeMs.toFixed(0)} ms, restored in ${restoreMs.map((m) => m.toFixed(0)).join(' / ')} ms${room}`,
    );
  }
}
