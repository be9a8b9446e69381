/**
 * `vantage sweep`: search Dynamo's kv_router settings (overlap_score_credit,
 * prefill_load_scale, router_temperature) for the lowest mean E2E latency of
 * a closed-loop replay on one trace, validate the winner on another, and
 * write the results as JSON and a self-contained HTML report. Grid search or
 * GP Bayesian optimisation; all logic is in @vantage/sim.
 */
import { basename } from 'node:path';
import {
  SEED001_GRID,
  knobsKey,
  prepareTrace,
  renderSweepReportHtml,
  runSweep,
  stderrProgress,
  sweepReportJson,
  type KnobGrid,
  type SweepReport,
} from '@vantage/sim';
import { choice, listOpt, numOpt, parseOptions, required, writeOutput } from '../args';
import { EXIT } from '../exit-codes';
import type { CliIo } from '../io';
import { ENGINE_OPTIONS, engineConfig, readTrace } from './replay-sim';

const METHODS = ['smart', 'grid'] as const;
const DEFAULT_CURVE = [0, 0.25, 0.5, 1, 2, 4, 8, 16, 32];

export const name = 'sweep';
export const summary = 'tune kv_router settings for mean E2E on a trace (grid or GP Bayesian optimisation), validate, write JSON + HTML';
export const help = `Usage: vantage sweep --trace FILE [--validate FILE] [--method smart|grid] [--budget N]
                     [--concurrency N] [--workers N] [engine options] [--grid-credit LIST]
                     [--grid-scale LIST] [--grid-temperature LIST] [--curve LIST|none]
                     [--no-llmd] [--seed N] [--out-json FILE] [--out-html FILE] [--quiet]

Tune kv_router settings for mean E2E latency on one Mooncake trace (closed
loop), then compare round_robin, default kv_router, the winner and llm-d on it
and on the validation trace. Smart search: Gaussian-process Bayesian
optimisation with expected improvement over credit [0,1], prefill_load_scale
[0,32] (log scale) and temperature [0,1]. Progress on stderr; a summary on
stdout, its last line one JSON object.

Options:
  --trace FILE             tuning trace (required)
  --validate FILE          validation trace (optional)
  --method M               smart (default) or grid
  --budget N               smart: evaluations, initial design included (default 24)
  --initial N              smart: initial design size (default 6; Dynamo's defaults are the first point)
  --grid-credit LIST       grid: overlap_score_credit values (default 0,0.5,1)
  --grid-scale LIST        grid: prefill_load_scale values (default 0,0.25,0.5,1,2,4,8,16,32)
  --grid-temperature LIST  grid: router_temperature values (default 0,0.2,0.5,1)
  --curve LIST|none        prefill_load_scale response curve at credit 1, T 0 (default ${DEFAULT_CURVE.join(',')})
  --concurrency N          closed-loop concurrency (default 32)
  --workers N              engines (default 8)
  --block-size N, --num-gpu-blocks N
  --max-num-batched-tokens N  default 16384 (seed 001's agg_max_num_batched_tokens)
  --max-num-seqs N         default 512 (seed 001's agg_max_num_seqs)
  --no-llmd                skip llm-d token-aware routing in the comparisons
  --seed N                 selection and search seed (default 1)
  --out-json FILE          write the results as JSON
  --out-html FILE          write the HTML report
  --quiet                  no per-replay progress
  -h, --help               this help

Exit codes: 0 done, 1 output not writable, 64 bad arguments, 65 bad trace line, 66 unreadable trace.
`;

function summaryText(r: SweepReport): string {
  const lines: string[] = [];
  lines.push(`${r.settings.method} search on ${r.settings.tuneTrace}: ${r.trials.length} trials, ${r.replays} replays, ${r.wallS.toFixed(0)} s`);
  lines.push(`best: ${knobsKey(r.best.knobs)}  mean E2E ${r.best.objective.toFixed(1)} ms`);
  for (const c of r.comparisons) {
    lines.push(`${c.trace} (${c.requests} requests, c=${c.concurrency}):`);
    for (const row of c.rows) {
      const m = row.metrics;
      lines.push(
        `  ${row.label.padEnd(18)} E2E ${m.e2eMs.mean.toFixed(1).padStart(8)}  TTFT ${m.ttftMs.mean.toFixed(1).padStart(7)}  TPOT ${m.tpotMs.mean.toFixed(2).padStart(6)}  req/s ${m.requestThroughputPerS.toFixed(3)}  reuse ${m.prefixCacheReusedRatio.toFixed(3)}`,
      );
    }
  }
  for (const d of r.deltas) {
    lines.push(
      `tuned vs default on ${d.trace}: E2E ${d.e2eMeanPct.toFixed(1)} %, TTFT ${d.ttftMeanPct.toFixed(1)} %, TPOT ${d.tpotMeanPct.toFixed(1)} %, throughput ${d.requestThroughputPct.toFixed(1)} %, reuse ${d.reuseBefore.toFixed(3)} -> ${d.reuseAfter.toFixed(3)}`,
    );
  }
  lines.push(JSON.stringify({ best: r.best.knobs, best_mean_e2e_ms: r.best.objective, deltas: r.deltas, replays: r.replays, wall_s: r.wallS }));
  return `${lines.join('\n')}\n`;
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(
    argv,
    ['trace', 'validate', 'method', 'budget', 'initial', 'grid-credit', 'grid-scale', 'grid-temperature', 'curve', 'concurrency', ...ENGINE_OPTIONS, 'seed', 'out-json', 'out-html'],
    ['no-llmd', 'quiet'],
  );
  const tracePath = required('trace', values['trace']);
  const method = choice('method', values['method'], METHODS, 'smart');
  const { workers, engine } = engineConfig(values, { batched: 16_384, seqs: 512 });
  const bs = engine.blockSize ?? 64;
  const concurrency = numOpt('concurrency', values['concurrency'], 32, { integer: true, min: 1 });
  const grid: KnobGrid = {
    overlapScoreCredit: listOpt('grid-credit', values['grid-credit'], SEED001_GRID.overlapScoreCredit, 0, 1),
    prefillLoadScale: listOpt('grid-scale', values['grid-scale'], SEED001_GRID.prefillLoadScale, 0, 1e6),
    temperature: listOpt('grid-temperature', values['grid-temperature'], SEED001_GRID.temperature, 0, 1e6),
  };
  const curve = values['curve'] === 'none' ? [] : listOpt('curve', values['curve'], DEFAULT_CURVE, 0, 1e6);
  const seed = numOpt('seed', values['seed'], 1, { integer: true, min: 0 });
  const tune = prepareTrace((await readTrace(io, tracePath)).records, bs, basename(tracePath));
  const validatePath = values['validate'];
  const validate = typeof validatePath === 'string' ? prepareTrace((await readTrace(io, validatePath)).records, bs, basename(validatePath)) : undefined;
  const quiet = values['quiet'] === true;

  const report = runSweep({
    tune,
    ...(validate ? { validate } : {}),
    concurrency,
    workers,
    engine,
    seed,
    method,
    grid,
    budget: numOpt('budget', values['budget'], 24, { integer: true, min: 1 }),
    initial: numOpt('initial', values['initial'], 6, { integer: true, min: 1 }),
    responseCurve: curve,
    llmd: values['no-llmd'] !== true,
    log: (line) => io.stderr(`sweep: ${line}\n`),
    onReplayProgress: (label) => (quiet ? undefined : stderrProgress(`  ${label}`, io.stderr)),
  });
  const jsonPath = values['out-json'];
  const htmlPath = values['out-html'];
  if (typeof jsonPath === 'string') await writeOutput(jsonPath, sweepReportJson(report));
  if (typeof htmlPath === 'string') await writeOutput(htmlPath, renderSweepReportHtml(report, `Router sweep: ${report.settings.tuneTrace}`));
  io.stdout(summaryText(report));
  return EXIT.OK;
}
