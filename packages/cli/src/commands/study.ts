/**
 * `vantage study`: seed 000's whole study offline — the calibration plan, the
 * fit, the five-variant evaluation and the report — on two simulated model
 * pools behind the decision service's own decision path. All the logic is in
 * @vantage/study; this file parses options, prints progress and writes files.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { formatBackgroundSpec, DEFAULT_BACKGROUND_TRAFFIC, parseBackgroundSpec, parseProposalSpec, type CalibrationPreset } from '@vantage/evaluation';
import { serializeParameterSet, VARIANTS } from '@vantage/rules';
import { calibrateAndFit, DEFAULT_FLEET, runLimitationStudy, runLoadStudy, runStudy, toJsonl } from '@vantage/study';
import { choice, numOpt, parseOptions, writeOutput } from '../args';
import { EXIT, UsageError } from '../exit-codes';
import type { CliIo } from '../io';
import { intervalText } from '@vantage/fitting';
import { differenceLines, variantFigures } from '../print';

export const name = 'study';
export const summary = 'run the calibration, fit and five-variant evaluation offline on two simulated pools; write the reports';
export const help = `Usage: vantage study [--out DIR] [--calibration tiny|small|job|full] [--attempts N] [--sessions N]
                     [--proposal SPEC] [--background SPEC|off] [--destination-limit N]
                     [--seed N] [--bootstrap N] [--max-context TOKENS]
       vantage study --load [--out DIR] [--calibration PLAN] [--attempts N] [--sessions N] [--seed N] [--bootstrap N]
       vantage study --limitation [--out DIR] [--calibration PLAN] [--seed N]

Run the study offline on the discrete-event simulator: the calibration plan on an
efficient pool (4 workers, the mocker's timing, 64-token blocks) and a capable pool
(4 workers at 0.6 of its speed, 32-token blocks), every request through the
decision service's decision path (observe, gate, rule, booking in the pools'
ledgers); the fit (the rows as vantage fit reads them); the five variants with
repeated attempts in seeded random order and matched sessions, each run on fresh
pools; the analysis with bootstrap intervals and the HTML reports. Progress and
timing on stderr, a summary on stdout.

Writes into DIR: calibration-outcomes.jsonl and evaluation-outcomes.jsonl (outcome
rows with the outcome service's schema: vantage fit and vantage evaluate read them),
params-fitted.json, params-<variant>.json, fit-report.html, schedule.json,
report.html, analysis.json.

With --load: calibrate and fit once, then run the five-variant evaluation at each
load point — competing traffic on the efficient pool (none, then a mean gap of
1600, 800, 400, 200 ms per stream, 4 streams) crossed with Stage proposing capable
for 20 % and 50 % of turns — and write load.html (per variant, the difference from
Stage in mean and p90 TTFT and session completion time against the measured
efficient-pool busy fraction, with bootstrap intervals, beside how often each rule
could act, overrode and fell back) and load.json.

With --limitation: calibrate and fit once, then seed 000's named limitation as a
controlled case: every efficient worker with the same booked requests (4, 16) in
short/long pairs that differ only in remaining generation (8 vs 2048 output
tokens), decoding with P = 0 or still prefilling, beside an idle capable pool; a
proposal on fresh fleets measures both candidates' TTFT and each variant's choice.
Prints the table and writes limitation.html (cases, charts of simulated and
predicted efficient TTFT against R, the proposal's E2E, estimator errors, every
rule's choice), limitation-decoding.svg, limitation-prefilling.svg,
limitation-e2e.svg and limitation.json.

Options:
  --load                  the load curve instead of one evaluation
  --limitation            the remaining-generation case instead of one evaluation
  --out DIR               output folder (default out/study)
  --calibration PLAN      calibration plan preset: tiny, small, job, full (default full)
  --attempts N            repeated attempts (default 5; 2 per load point with --load)
  --sessions N            agentic sessions per run (default 40; 10 with --load)
  --proposal SPEC         Stage proposal: always_efficient, fraction:F:SEED, length:TOKENS (default fraction:0.2:7)
  --background SPEC       competing traffic STREAMS:REQUESTS:GAP_MS:SEED[:CAPABLE_FRACTION] or off (default ${formatBackgroundSpec(DEFAULT_BACKGROUND_TRAFFIC)})
  --destination-limit N   gate G's destination limit (default 8)
  --seed N                schedule and bootstrap seed; token content seed with --limitation (default 1)
  --bootstrap N           bootstrap replicates (default 1000)
  --max-context TOKENS    longest session prompt (default 32768)
  -h, --help              this help

Exit codes: 0 written, 64 bad arguments, 1 the study failed or an output was not writable.
`;

const int = (name: string, v: string | boolean | undefined, fallback: number, min: number): number => numOpt(name, v, fallback, { integer: true, min });

function spec<T>(name: string, v: string | boolean | undefined, fallback: T, parse: (s: string) => T): T {
  if (typeof v !== 'string') return fallback;
  try {
    return parse(v);
  } catch (e) {
    throw new UsageError(`--${name}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(
    argv,
    ['out', 'calibration', 'attempts', 'sessions', 'proposal', 'background', 'destination-limit', 'seed', 'bootstrap', 'max-context'],
    ['load', 'limitation'],
  );
  const out = typeof values['out'] === 'string' && values['out'] !== '' ? values['out'] : join('out', 'study');
  const preset = choice<CalibrationPreset>('calibration', values['calibration'], ['tiny', 'small', 'job', 'full'], 'full');
  const t0 = performance.now();
  const stamp = (): string => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
  const progress = (line: string): void => io.stderr(`study [${stamp()}]: ${line}\n`);
  try {
    mkdirSync(out, { recursive: true });
  } catch (e) {
    throw new UsageError(`--out ${out}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (values['load'] === true && values['limitation'] === true) throw new UsageError('--load and --limitation are separate studies: give one');
  const seed = int('seed', values['seed'], 1, 0);
  const destinationLimit = int('destination-limit', values['destination-limit'], 8, 1);
  if (values['limitation'] === true) {
    const { fit } = calibrateAndFit({ preset, destinationLimit, onProgress: progress });
    const lim = runLimitationStudy({ fleet: DEFAULT_FLEET, fit, seed, onProgress: progress });
    await writeOutput(join(out, 'limitation.html'), lim.html);
    await writeOutput(join(out, 'limitation-decoding.svg'), `${lim.svgs.decoding}\n`);
    await writeOutput(join(out, 'limitation-prefilling.svg'), `${lim.svgs.prefilling}\n`);
    await writeOutput(join(out, 'limitation-e2e.svg'), `${lim.svgs.e2e}\n`);
    await writeOutput(join(out, 'limitation.json'), `${JSON.stringify({ parameterSetVersion: fit.parameterSet.version, cases: lim.cases }, null, 1)}\n`);
    io.stdout(`${lim.table}\nlimitation case written to ${out}/limitation.html in ${stamp()}\n`);
    return EXIT.OK;
  }
  if (values['load'] === true) {
    const { fit } = calibrateAndFit({ preset, destinationLimit, onProgress: progress });
    const load = runLoadStudy({
      fleet: DEFAULT_FLEET,
      fit,
      attempts: int('attempts', values['attempts'], 2, 1),
      sessions: int('sessions', values['sessions'], 10, 1),
      seed,
      bootstrap: int('bootstrap', values['bootstrap'], 500, 1),
      maxContextTokens: int('max-context', values['max-context'], 32_768, 1),
      onProgress: progress,
    });
    await writeOutput(join(out, 'load.html'), load.html);
    const summary = load.points.map((p) => ({
      point: p.point,
      efficientUtilisation: p.efficientUtilisation,
      capableUtilisation: p.capableUtilisation,
      variants: p.analysis.variants.map((v) => ({ variant: v.variant, rules: v.rules, sessions: v.sessions })),
      differences: p.analysis.differences.filter((d) => d.metric === 'ttft_mean_ms' || d.metric === 'ttft_p90_ms' || d.metric === 'session_completion_mean_ms'),
    }));
    await writeOutput(join(out, 'load.json'), `${JSON.stringify(summary, null, 1)}\n`);
    const lines = [`load curve written to ${out}/load.html in ${stamp()}`];
    for (const p of load.points) {
      const d = p.analysis.differences.filter((x) => x.metric === 'ttft_mean_ms').map((x) => `${x.variant} ${intervalText(x)}`);
      lines.push(`${p.label} (efficient ${(100 * p.efficientUtilisation).toFixed(0)} % busy): mean TTFT - Stage ms: ${d.join('; ')}`);
    }
    io.stdout(`${lines.join('\n')}\n`);
    return EXIT.OK;
  }
  const result = runStudy({
    preset,
    attempts: int('attempts', values['attempts'], 5, 1),
    sessions: int('sessions', values['sessions'], 40, 1),
    proposal: spec('proposal', values['proposal'], parseProposalSpec('fraction:0.2:7'), parseProposalSpec),
    background: spec('background', values['background'], DEFAULT_BACKGROUND_TRAFFIC, parseBackgroundSpec),
    destinationLimit,
    scheduleSeed: seed,
    bootstrap: int('bootstrap', values['bootstrap'], 1000, 1),
    maxContextTokens: int('max-context', values['max-context'], 32_768, 1),
    onProgress: progress,
  });
  await writeOutput(join(out, 'calibration-outcomes.jsonl'), toJsonl(result.calibrationRows));
  await writeOutput(join(out, 'evaluation-outcomes.jsonl'), toJsonl(result.evaluationRows));
  await writeOutput(join(out, 'params-fitted.json'), serializeParameterSet(result.fit.parameterSet));
  for (const v of VARIANTS) await writeOutput(join(out, `params-${v}.json`), serializeParameterSet(result.fit.variants[v]));
  await writeOutput(join(out, 'fit-report.html'), result.fitHtml);
  await writeOutput(join(out, 'schedule.json'), `${JSON.stringify(result.schedule, null, 1)}\n`);
  await writeOutput(join(out, 'report.html'), result.reportHtml);
  await writeOutput(join(out, 'analysis.json'), `${JSON.stringify(result.analysis, null, 1)}\n`);
  const lines = [`study written to ${out} in ${stamp()} (${Object.entries(result.phasesMs).map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`).join(', ')})`];
  const c = result.fit.report.chosen;
  lines.push(`fit ${result.fit.parameterSet.version}: chosen threshold rule ${c.thresholdRule.rule}, chosen estimator ${c.estimator.rule}`);
  for (const v of result.analysis.variants) lines.push(`${v.variant.padEnd(14)} sessions ${v.sessions.completed}/${v.sessions.total} completed, ${variantFigures(v)}`);
  lines.push(...differenceLines(result.analysis));
  lines.push('TTFT here is engine time on the simulated clock (no routing overhead, no host load); session completion (every turn served) stands in for task success.');
  io.stdout(`${lines.join('\n')}\n`);
  return EXIT.OK;
}
