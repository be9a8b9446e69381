import { PrefixIndex } from '@vantage/prefix-index';
import { loadTracePrompts, simulate } from './trace-sim';
const prompts = loadTracePrompts('/work/shared/traces/conversation_2k.jsonl', 64);
const sim = simulate(prompts, Number(process.env.NW ?? 64), 16384);
for (let r = 0; r < 4; r++) {
  const idx = new PrefixIndex(64);
  const t0 = performance.now();
  for (const e of sim.events) idx.apply(e, 0);
  const t1 = performance.now();
  console.log('apply ms', (t1 - t0).toFixed(0), (sim.blockOps / ((t1 - t0) / 1000) / 1e6).toFixed(2), 'M/s');
}
