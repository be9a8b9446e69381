/**
 * The binary observe reply's trailing JSON, two ways, as the indexer meets them: each call after a
 * millisecond of idling (a 1 ms timer, as between requests at 1,000/s), timed alone. `string`
 * builds the text (`metaJson`) and writes it as UTF-8 (`Buffer#write`), what `finish` did before;
 * `bytes` writes it straight into the buffer (`writeMetaJson`), what it does now. The two
 * alternate call by call (with `none`, an empty call: the floor of timing one after idling), on the params a reply carries (Dynamo's cost terms of the chosen worker).
 * Run: node --import tsx packages/protocol/bench/meta-json.ts [iterations]
 */
import { writeMetaJson } from '../src/observe-binary';
import { metaJson } from './meta-string';

const N = Number(process.argv[2] ?? 3000);
const WARM = 500;
const out = Buffer.alloc(1 << 18);
const params = { overlapBlocks: 0, rawPrefillBlocks: 0, overlapCreditBlocks: 0, adjustedPrefillBlocks: 0, prefillCostBlocks: 0, decodeBlocks: 0, activeRequestCost: 0 };
const policy = { name: 'kv_router:lowest_cost', params };
const ways = {
  // The floor: what timing a call costs right after idling.
  none: (at: number): number => at + 1,
  string: (at: number): number => out.write(metaJson('bench', policy, []), at, 'utf8'),
  bytes: (at: number): number => writeMetaJson(out, at, out.length, 'bench', policy, []),
};
const times = { none: new Float64Array(N), string: new Float64Array(N), bytes: new Float64Array(N) };
const order = ['none', 'string', 'bytes'] as const;

for (let i = 0; i < WARM + 3 * N; i++) {
  const timed = i >= WARM;
  if (timed) await new Promise((r) => setTimeout(r, 1));
  // Terms as a 32k-token prompt against varied overlaps gives them: integers and fractions.
  params.overlapBlocks = 100 + (i % 400);
  params.rawPrefillBlocks = 512 + (i % 7) / 64;
  params.overlapCreditBlocks = params.overlapBlocks + 0.75 * (i % 3);
  params.adjustedPrefillBlocks = Math.max(0, params.rawPrefillBlocks - params.overlapCreditBlocks);
  params.prefillCostBlocks = params.adjustedPrefillBlocks;
  params.decodeBlocks = 2048 + (i % 100);
  const way = order[i % 3]!;
  const at = (i * 512) % (out.length - 4096);
  const t0 = process.hrtime.bigint();
  const n = ways[way](at);
  const dt = Number(process.hrtime.bigint() - t0) / 1000;
  if (n <= 0) throw new Error(`${way} wrote nothing`);
  if (timed) times[way][Math.floor((i - WARM) / 3)] = dt;
}
for (const way of order) {
  const t = times[way].sort();
  process.stdout.write(`${way.padEnd(7)} idle median ${t[N >> 1]!.toFixed(1)} µs  p90 ${t[Math.floor(N * 0.9)]!.toFixed(1)} µs\n`);
}
