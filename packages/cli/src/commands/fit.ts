/**
 * `vantage fit`: calibrate seed 000's rules from the JSON Lines `vantage
 * replay --kind outcome --format jsonl` writes, and write the parameter set
 * the decision service loads plus an HTML report. All the arithmetic is in
 * @vantage/fitting; this file reads, reports progress and writes.
 */
import { join } from 'node:path';
import { FIT_VARIANTS, fitAll, Q_SOURCES, variantParameterSet, parseCalibrationJsonl, renderFitReportHtml, type FitOptions, type FitReport } from '@vantage/fitting';
import { serializeParameterSet, DEFAULT_PARAMETER_SET, VARIANTS, type GateLimits } from '@vantage/rules';
import { choice, numOpt, parseOptions, readRows, required, writeOutput } from '../args';
import { EXIT, InputError, UsageError } from '../exit-codes';
import type { CliIo } from '../io';

export const name = 'fit';
export const summary = 'fit Q tables, load corrections, thresholds and margins from calibration rows; write a parameter set and report';
export const help = `Usage: vantage fit --input FILE|- --out-params FILE --out-report FILE
                   [--seed N] [--variant count|count_prefill|blind|cache]
                   [--fractions F,U,S] [--q-source qset|fitting|all] [--lenient]
                   [--max-age-ms MS] [--destination-limit N] [--local-limit N]
                   [--out-json FILE] [--out-variants DIR]

Fit the rules of seed 000 from calibration measurements: Q tables, ridge load
corrections (lambda by grouped cross-validation), count thresholds r and p on
the fitting split, and estimator margins on the uncertainty split; the
selection split chooses one threshold rule and one estimator. Writes a
validated parameter set and a self-contained HTML report; progress on stderr,
a summary on stdout.

Input: outcome rows as \`vantage replay --kind outcome --format jsonl\` writes
them. A calibration measurement has session id cal:<condition>:<repeat>:<idle|loaded|qgrid>
(or calibration.conditionId / .repeat / .noBackgroundLoad / .qSet columns); other rows,
background traffic and unfinished requests are skipped and counted. qgrid marks the
Q set: the no-contention grid measured for the Q tables alone, never split; the
other (contention) conditions are split into fitting, uncertainty and selection.

Options:
  --input FILE            JSON Lines file, or - for standard input (required)
  --out-params FILE       parameter set to write (required)
  --out-report FILE       HTML report to write (required)
  --seed N                seed of the grouped split and CV folds (default 1)
  --variant V             rule of the parameter set: count, count_prefill, blind, cache (default cache)
  --fractions F,U,S       fitting, uncertainty, selection fractions of conditions (default 0.6,0.2,0.2)
  --q-source S            rows the Q tables come from: qset (default: the Q set alone),
                          fitting (no-contention rows of the fitting split, for data
                          without a Q set) or all (every no-contention row; optimistic)
  --lenient               leave bad rows out (listed on stderr) instead of refusing the file
  --max-age-ms MS         gate: largest observation age (default ${DEFAULT_PARAMETER_SET.gate.maxAgeMs})
  --destination-limit N   gate: capable booked requests must stay below N (default ${DEFAULT_PARAMETER_SET.gate.destinationLimit})
  --local-limit N         gate: local in-flight capable calls must stay below N (default ${DEFAULT_PARAMETER_SET.gate.localLimit})
  --out-json FILE         also write the fit report as JSON
  --out-variants DIR      also write the frozen set once per rule variant (stage, count, count_prefill,
                          blind, cache) as DIR/params-<variant>.json, version <version>+<variant>,
                          for an evaluation that runs every variant with the same fitted numbers
  -h, --help              this help

Exit codes: 0 written, 64 bad arguments, 65 bad rows or data that cannot be
fitted (reasons on stderr), 66 unreadable input, 1 output not writable.
`;

function fractions(v: string | boolean | undefined): FitOptions['fractions'] {
  if (v === undefined) return undefined;
  const parts = typeof v === 'string' ? v.split(',').map((x) => Number(x.trim())) : [];
  if (parts.length !== 3 || parts.some((x) => !Number.isFinite(x))) throw new UsageError('--fractions must be three numbers F,U,S');
  const [fitting, uncertainty, selection] = parts as [number, number, number];
  return { fitting, uncertainty, selection };
}

function ms(v: number): string {
  return Number.isFinite(v) ? `${v.toFixed(1)} ms` : 'n/a';
}

function summaryText(report: FitReport, paramsPath: string, reportPath: string): string {
  const lines = [
    `parameter set ${report.parameterSetVersion} (variant ${report.variant}) -> ${paramsPath}`,
    `report -> ${reportPath}`,
    `input: ${report.input.rows} measurements; Q set ${report.input.qSetConditions} conditions (${report.input.qSetRows} rows, Q from ${report.options.qSource}); ` +
      `${report.input.pairs} pairs over ${report.input.conditions} contention conditions; ` +
      `splits (conditions): fitting ${report.splits.fitting.conditionIds.length}, uncertainty ${report.splits.uncertainty.conditionIds.length}, selection ${report.splits.selection.conditionIds.length}`,
  ];
  for (const role of ['efficient', 'capable'] as const) {
    const m = report.models[role];
    for (const e of ['blind', 'cache'] as const) {
      const f = m.estimators[e];
      lines.push(
        `${role} ${m.name} ${e}: coefficients [${f.coefficients.map((c) => c.toFixed(3)).join(', ')}], lambda ${f.lambda}, ` +
          `uncertainty MAE ${ms(f.errors.uncertainty.maeMs)} RMSE ${ms(f.errors.uncertainty.rmseMs)}, selection MAE ${ms(f.errors.selection.maeMs)} RMSE ${ms(f.errors.selection.rmseMs)}`,
      );
    }
  }
  const c = report.thresholds.count.best;
  const cp = report.thresholds.countPrefill.best;
  lines.push(`thresholds: count r=${String(c.r)}; count_prefill r=${String(cp.r)} p=${String(cp.p)}`);
  lines.push(`margins: delta_blind ${ms(report.margins.blind.marginMs)}, delta_cache ${ms(report.margins.cache.marginMs)}`);
  lines.push('selection split, mean selected TTFT:');
  for (const r of report.selection) lines.push(`  ${r.rule.padEnd(32)} ${ms(r.meanSelectedTtftMs)}  (${r.overrides} overrides)`);
  lines.push(`chosen on the selection split: threshold rule ${report.chosen.thresholdRule.rule}, estimator ${report.chosen.estimator.rule}`);
  for (const w of report.warnings) lines.push(`warning: ${w}`);
  return `${lines.join('\n')}\n`;
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(
    argv,
    ['input', 'out-params', 'out-report', 'seed', 'variant', 'fractions', 'q-source', 'max-age-ms', 'destination-limit', 'local-limit', 'out-json', 'out-variants'],
    ['lenient'],
  );
  const input = required('input', values['input']);
  const paramsPath = required('out-params', values['out-params']);
  const reportPath = required('out-report', values['out-report']);
  const d = DEFAULT_PARAMETER_SET.gate;
  const gate: GateLimits = {
    maxAgeMs: numOpt('max-age-ms', values['max-age-ms'], d.maxAgeMs, { min: Number.MIN_VALUE }),
    destinationLimit: numOpt('destination-limit', values['destination-limit'], d.destinationLimit, { integer: true, min: 1 }),
    localLimit: numOpt('local-limit', values['local-limit'], d.localLimit, { integer: true, min: 1 }),
  };
  const options: FitOptions = {
    seed: numOpt('seed', values['seed'], 1, { integer: true, min: 0 }),
    variant: choice('variant', values['variant'], FIT_VARIANTS, 'cache'),
    fractions: fractions(values['fractions']),
    qSource: choice('q-source', values['q-source'], Q_SOURCES, 'qset'),
    gate,
    onProgress: (line) => io.stderr(`fit: ${line}\n`),
  };

  const parsed = await readRows(io, 'fit', input, 'calibration measurements', values['lenient'] === true, parseCalibrationJsonl);

  const result = fitAll(parsed.rows, options);
  if (!result.ok) {
    const lines = [...result.errors, ...result.problems.map((p) => `line ${p.line}: ${p.message}`)];
    throw new InputError(`cannot fit:\n${lines.map((l) => `  ${l}`).join('\n')}`, EXIT.DATA);
  }
  await writeOutput(reportPath, renderFitReportHtml(result.report));
  io.stderr(`fit: wrote report ${reportPath}\n`);
  await writeOutput(paramsPath, serializeParameterSet(result.parameterSet));
  io.stderr(`fit: wrote parameter set ${paramsPath}\n`);
  const jsonPath = values['out-json'];
  if (typeof jsonPath === 'string') {
    await writeOutput(jsonPath, `${JSON.stringify(result.report, null, 1)}\n`);
    io.stderr(`fit: wrote report JSON ${jsonPath}\n`);
  }
  const dir = values['out-variants'];
  if (typeof dir === 'string') {
    for (const v of VARIANTS) {
      const set = variantParameterSet(result.parameterSet, result.report, v);
      if (!set.ok) throw new InputError(`cannot derive the ${v} set: ${set.errors.join('; ')}`, EXIT.DATA);
      const path = join(dir, `params-${v}.json`);
      await writeOutput(path, serializeParameterSet(set.value));
      io.stderr(`fit: wrote ${v} set ${set.value.version} -> ${path}\n`);
    }
  }
  io.stdout(summaryText(result.report, paramsPath, reportPath));
  return EXIT.OK;
}
