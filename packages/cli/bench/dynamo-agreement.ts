/**
 * How far `vantage replay-sim` is from NVIDIA Dynamo's own replay
 * (`dynamo.replay.run_trace_replay`, ai-dynamo 1.6.1) on the same traces and
 * settings: mean TTFT, mean E2E and prefix reuse, side by side, for
 * round_robin and kv_router, open and closed loop, on
 *   - conversation_2k (single-turn, from the shared traces folder),
 *   - a seeded multi-turn trace in Dynamo's form (`generateMooncakeSessions`),
 *   - conversation_2k regrouped into sessions (`groupConversations`; later
 *     turns' delays inferred from their timestamps).
 * The generated traces are written to out/dynamo-agreement/. Dynamo is the
 * baseline, measured in the same run; the last line is one JSON object.
 *
 *   npm run bench:dynamo-replay [-- --repeats N] [-- --quick]
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadMooncakeTrace } from '@vantage/sim';
import { processIo } from '../src/index';
import { agreementTable, compareWithDynamo, type Agreement, type AgreementSpec } from './dynamo-replay';
import { DEFAULT_MOONCAKE_SESSIONS, generateMooncakeSessions, groupConversations, mooncakeJsonl } from './mooncake-sessions';

const args = process.argv.slice(2);
const repeats = args.includes('--repeats') ? Number(args[args.indexOf('--repeats') + 1]) : 5;
const quick = args.includes('--quick');

const beside = fileURLToPath(new URL('../../../../shared', import.meta.url));
const SHARED = existsSync(beside) ? beside : (process.env['VANTAGE_SHARED'] ?? beside);
const conv = `${SHARED}/traces/conversation_2k.jsonl`;
const outDir = resolve('out/dynamo-agreement');
mkdirSync(outDir, { recursive: true });

const gen = `${outDir}/sessions-200-seed1.jsonl`;
writeFileSync(gen, mooncakeJsonl(generateMooncakeSessions({ ...DEFAULT_MOONCAKE_SESSIONS, sessions: 200, seed: 1 })));
const grouped = `${outDir}/conversation_2k-sessions.jsonl`;
writeFileSync(grouped, mooncakeJsonl(groupConversations(loadMooncakeTrace(conv))));

const specs: AgreementSpec[] = [];
for (const router of ['round_robin', 'kv_router'] as const) {
  specs.push({ trace: conv, router, workers: 8, repeats });
  if (!quick) specs.push({ trace: conv, router, workers: 8, concurrency: 32, repeats });
  specs.push({ trace: gen, router, workers: 4, repeats });
  if (!quick) specs.push({ trace: gen, router, workers: 4, concurrency: 16, repeats });
  if (!quick) specs.push({ trace: grouped, router, workers: 8, repeats });
}

const t0 = performance.now();
const rows: Agreement[] = [];
for (const s of specs) {
  const a = await compareWithDynamo(s, processIo());
  rows.push(a);
  console.log(agreementTable([a]));
}
const worst = (k: 'meanTtftMs' | 'meanE2eMs' | 'prefixReuse'): number => Math.max(...rows.map((r) => Math.abs(r.rel[k])));
console.log(
  JSON.stringify({
    comparisons: rows.length,
    repeats,
    wall_s: +((performance.now() - t0) / 1000).toFixed(1),
    worst_rel_mean_ttft: +worst('meanTtftMs').toFixed(5),
    worst_rel_mean_e2e: +worst('meanE2eMs').toFixed(5),
    worst_rel_prefix_reuse: +worst('prefixReuse').toFixed(5),
    rows: rows.map((r) => ({
      trace: r.spec.trace.split('/').at(-1),
      router: r.spec.router,
      workers: r.spec.workers,
      concurrency: r.spec.concurrency ?? null,
      ours: r.oursMean,
      dynamo: r.dynamoMean,
      rel: r.rel,
    })),
  }),
);
