/**
 * Snapshot size and the time to write and restore one, on two of the benchmark's filled indexes
 * (trace-sim.ts, as `npm run bench:index` fills them, without size hints):
 *
 *   flock /tmp/vantage-bench.lock node --import tsx packages/prefix-index/bench/snapshot-cost.ts
 *
 * A restore stores the dumped blocks again; it runs twice (the first one includes compiling the
 * restore path). It also prints the room the fill left (block positions handed out against those
 * in the tree; a compaction starts above 4x plus 65,536) and how long an explicit `compact()` of
 * the filled index takes, the same rebuild.
 * Scenarios: trace:workers arguments (default conversation_2k:64 synthetic_trace:8).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrefixIndex } from '@vantage/prefix-index';
import { loadTracePrompts, simulate } from './trace-sim';

const besideSource = fileURLToPath(new URL('../../../../shared', import.meta.url));
const SHARED = existsSync(besideSource) ? besideSource : resolve('../shared');

const specs = process.argv.length > 2 ? process.argv.slice(2) : ['conversation_2k:64', 'synthetic_trace:8'];
for (const spec of specs) {
  const [name, w] = spec.split(':');
  const sim = simulate(loadTracePrompts(`${SHARED}/traces/${name}.jsonl`, 64), Number(w), 16_384);
  {
    const x = new PrefixIndex(64);
    for (const e of sim.events) x.apply(e, 0);
    let t = performance.now();
    const bytes = x.snapshot();
    const writeMs = performance.now() - t;
    const restoreMs: number[] = [];
    for (let r = 0; r < 2; r++) {
      t = performance.now();
      const y = PrefixIndex.restore(bytes);
      restoreMs.push(performance.now() - t);
      if (y.totalBlocks !== x.totalBlocks) throw new Error(`restored ${y.totalBlocks} blocks of ${x.totalBlocks}`);
    }
    const before = x.room;
    t = performance.now();
    x.compact();
    const ms = performance.now() - t;
    const room = `; room ${before.positions} positions for ${before.inTree} in the tree (${(before.positions / before.inTree).toFixed(2)}x, ${before.compactions} compactions during the fill), compact() ${ms.toFixed(0)} ms -> ${x.room.positions}`;
    console.log(
      `${spec.padEnd(20)} ${x.totalBlocks} blocks: snapshot ${(bytes.length / 1e6).toFixed(1)} MB written in ${writeMs.toFixed(0)} ms, restored in ${restoreMs.map((m) => m.toFixed(0)).join(' / ')} ms${room}`,
    );
  }
}
