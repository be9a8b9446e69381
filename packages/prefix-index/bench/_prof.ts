import { PrefixIndex } from '@vantage/prefix-index';
import { loadTracePrompts, simulate } from './trace-sim';
const prompts = loadTracePrompts(process.env.TR ?? '/work/shared/traces/conversation_2k.jsonl', 64);
const sim = simulate(prompts, Number(process.env.NW ?? 64), 16384);
for (let r = 0; r < 5; r++) {
  const idx = new PrefixIndex(64);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (const e of sim.events) idx.apply(e, 0);
  const t1 = performance.now();
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6;
  console.log('wall', (sim.blockOps / ((t1 - t0) / 1000) / 1e6).toFixed(2), 'M/s  cpu', (sim.blockOps / cpu / 1e6).toFixed(2), 'M/s');
}
