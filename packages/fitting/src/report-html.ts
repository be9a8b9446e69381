/** The fit report as one self-contained HTML page (see `html.ts`). */
import type { FitReport, ModelReport } from './fit';
import type { EstimatorFit } from './estimator-fit';
import { escapeHtml, fmt, fmtG as fmtDigits, lineChartSvg, page, table as htmlTable, type Series } from './html';
import { ESTIMATORS } from './margins';
import { ROLES } from './rows';
import { SPLIT_NAMES } from './splits';

const fmtG = (v: number): string => fmtDigits(v, 6);
const table = (head: readonly string[], rows: readonly (readonly string[])[]): string => htmlTable(head, rows, escapeHtml);

const COLORS: Record<string, string> = { fitting: '#9aa5b1', uncertainty: '#d9480f', selection: '#1864ab' };

const CHART = { width: 420, height: 300 } as const;

/** One series of dots per split, in the legend's colours. */
function bySplit<T extends { readonly split: string }>(rows: readonly T[], xy: (r: T) => readonly [number, number]): Series[] {
  return Object.entries(COLORS).map(([name, color]) => ({ name, color, line: false, points: rows.filter((r) => r.split === name).map(xy) }));
}

/** CV curve: lambdas on an evenly spaced categorical axis (lambda 0 cannot sit on a log axis). */
function cvPlot(title: string, fit: EstimatorFit): string {
  const at = (keep: (lambda: number) => boolean): (readonly [number, number])[] => fit.cvCurve.map((c, i) => [i, c.mse !== null && keep(c.lambda) ? c.mse : NaN] as const);
  return lineChartSvg({
    ...CHART,
    title,
    xLabel: 'lambda',
    yLabel: 'CV mean squared error (ms²)',
    xTicks: fit.cvCurve.map((c, i) => ({ x: i, label: fmtG(c.lambda) })),
    series: [
      { name: 'CV error', color: '#1864ab', points: at(() => true) },
      { name: 'chosen lambda', color: '#d9480f', line: false, points: at((l) => l === fit.lambda) },
    ],
  });
}

function modelSection(m: ModelReport): string {
  const out: string[] = [`<h2>${escapeHtml(m.role)}: ${escapeHtml(m.name)}</h2>`];
  out.push(
    `<p>Rows per split: ${SPLIT_NAMES.map((s) => `${s} ${m.rows[s]}`).join(', ')}. Standardisation (fitting split only): ` +
      (['logN', 'logR', 'logP'] as const).map((k) => `${k} mean ${fmtG(m.standardization[k].mean)} sd ${fmtG(m.standardization[k].sd)}`).join('; ') +
      (m.constantFeatures.length > 0 ? `. Constant (coefficient fixed at 0): ${escapeHtml(m.constantFeatures.join(', '))}` : '') +
      '.</p>',
  );
  out.push('<h3>Coefficients and errors</h3>');
  out.push(
    table(
      ['estimator', 'intercept', 'N', 'R', 'P', 'lambda', 'train rows', 'fit MAE', 'uncert. MAE', 'uncert. RMSE', 'select. MAE', 'select. RMSE', 'excluded'],
      ESTIMATORS.map((e) => {
        const f = m.estimators[e];
        return [
          e,
          ...f.coefficients.map((c) => fmt(c, 3)),
          fmtG(f.lambda),
          String(f.trainingRows),
          fmt(f.errors.fitting.maeMs),
          fmt(f.errors.uncertainty.maeMs),
          fmt(f.errors.uncertainty.rmseMs),
          fmt(f.errors.selection.maeMs),
          fmt(f.errors.selection.rmseMs),
          JSON.stringify(f.excluded),
        ];
      }),
    ),
  );
  out.push('<div class="plots">');
  for (const e of ESTIMATORS) {
    const f = m.estimators[e];
    const chart = { ...CHART, xLabel: 'predicted TTFT (ms)' };
    out.push(lineChartSvg({ ...chart, title: `${m.role} ${e}: residual vs predicted`, yLabel: 'measured − predicted (ms)', series: bySplit(f.residuals, (r) => [r.predictedMs, r.measuredMs - r.predictedMs]), zeroLine: true }));
    out.push(lineChartSvg({ ...chart, title: `${m.role} ${e}: measured vs predicted`, yLabel: 'measured TTFT (ms)', series: bySplit(f.residuals, (r) => [r.predictedMs, r.measuredMs]), diagonal: true }));
    out.push(cvPlot(`${m.role} ${e}: grouped CV (${f.cvFolds} folds)`, f));
  }
  out.push('</div>');
  out.push('<h3>Q table (ms; * = interpolated)</h3>');
  const cell = new Map(m.qCells.map((c) => [`${c.n}|${c.f}`, c]));
  out.push(
    table(
      ['N \\ f', ...m.qTable.fGrid.map(fmtG)],
      m.qTable.nGrid.map((n) => [
        fmtG(n),
        ...m.qTable.fGrid.map((f) => {
          const c = cell.get(`${n}|${f}`);
          return c === undefined ? '–' : `${fmt(c.valueMs)}${c.source === 'measured' ? '' : '*'}`;
        }),
      ]),
    ),
  );
  return out.join('\n');
}

/** Top rows of the threshold table shown in the page. */
const TOP = 15;

const QSOURCE_TEXT: Readonly<Record<FitReport['options']['qSource'], string>> = {
  qset: 'the Q set only',
  fitting: "the fitting split's no-contention rows (no Q set used)",
  all: 'every no-contention row, uncertainty and selection splits included (optimistic margins and selection)',
};

export function renderFitReportHtml(report: FitReport): string {
  const out: string[] = [];
  out.push(`<h1>Calibration fit ${escapeHtml(report.parameterSetVersion)}</h1>`);
  out.push(
    `<p>Variant <b>${escapeHtml(report.variant)}</b>, seed ${report.seed}. ${report.input.rows} measurements: ` +
      `the Q set (no-contention grid measured for the Q tables alone, in no split) ${report.input.qSetConditions} conditions, ${report.input.qSetRows} rows; ` +
      `${report.input.pairs} pairs over ${report.input.conditions} contention conditions, split below. ` +
      `Q tables from ${QSOURCE_TEXT[report.options.qSource]}; lambda grid ${escapeHtml(report.options.lambdas.map(fmtG).join(', '))}; margins at p${report.options.marginQuantile * 100} (nearest rank). ` +
      `Gate (not fitted): max age ${report.options.gate.maxAgeMs} ms, destination limit ${report.options.gate.destinationLimit}, local limit ${report.options.gate.localLimit}.</p>`,
  );
  out.push(
    `<p class="legend">Points by split:${Object.entries(COLORS)
      .map(([k, c]) => `<span style="background:${c}"></span>${escapeHtml(k)}`)
      .join('')}</p>`,
  );
  if (report.warnings.length > 0) out.push(`<ul class="warn">${report.warnings.map((w) => `<li>${escapeHtml(w)}</li>`).join('')}</ul>`);

  out.push('<h2>Splits (grouped by workload condition)</h2>');
  out.push(table(['split', 'conditions', 'rows', 'pairs', 'condition ids'], SPLIT_NAMES.map((s) => {
    const x = report.splits[s];
    return [s, String(x.conditionIds.length), String(x.rows), String(x.pairs), x.conditionIds.join(' ')];
  })));

  out.push('<h2>Rules on the selection split</h2>');
  const c = report.chosen;
  out.push(
    `<p>Thresholds and margins were fitted on other splits; the selection split only compares the fitted rules and chooses one of each kind: <b>chosen threshold rule: ${escapeHtml(c.thresholdRule.rule)}</b> (${fmt(c.thresholdRule.meanSelectedTtftMs)} ms, ${c.thresholdRule.overrides} overrides), <b>chosen estimator: ${escapeHtml(c.estimator.rule)}</b> (${fmt(c.estimator.meanSelectedTtftMs)} ms, ${c.estimator.overrides} overrides), on ${c.estimator.pairs} selection pairs.</p>`,
  );
  out.push(table(['rule', 'mean selected TTFT (ms)', 'overrides'], report.selection.map((r) => [r.rule, fmt(r.meanSelectedTtftMs), String(r.overrides)])));

  for (const [label, s] of [
    ['count', report.thresholds.count],
    ['count + prefill', report.thresholds.countPrefill],
  ] as const) {
    out.push(`<h2>Threshold search: ${label} (top ${Math.min(TOP, s.table.length)} of ${s.table.length}, ${s.pairs} fitting pairs)</h2>`);
    out.push(table(['rank', 'r', 'p', 'mean selected TTFT (ms)', 'overrides', 'terms'], s.table.slice(0, TOP).map((c, i) => [String(i + 1), c.r === null ? 'disabled' : String(c.r), c.p === null ? 'disabled' : fmtG(c.p), fmt(c.meanSelectedTtftMs, 3), String(c.overrides), String(c.terms)])));
  }

  out.push('<h2>Margins (uncertainty split)</h2>');
  out.push(table(['estimator', 'delta (ms)', 'conditions', 'pairs used', 'excluded'], ESTIMATORS.map((e) => {
    const m = report.margins[e];
    return [e, fmt(m.marginMs), String(m.perCondition.length), String(m.pairErrors.length), JSON.stringify(m.excluded)];
  })));
  out.push('<div class="plots">');
  for (const e of ESTIMATORS) {
    const m = report.margins[e];
    const points = m.pairErrors.map((p) => [p.predictedAdvantageMs, p.measuredAdvantageMs] as const);
    out.push(lineChartSvg({ ...CHART, title: `${e}: predicted vs measured advantage`, xLabel: 'predicted T_eff − T_cap (ms)', yLabel: 'measured TTFT_eff − TTFT_cap (ms)', series: [{ name: 'uncertainty', color: COLORS['uncertainty'] as string, line: false, points }], diagonal: true }));
  }
  out.push('</div>');
  out.push(table(['condition', ...ESTIMATORS.map((e) => `${e} max |error| (ms)`)], (() => {
    const ids = [...new Set(ESTIMATORS.flatMap((e) => report.margins[e].perCondition.map((c) => c.conditionId)))].sort();
    const get = (e: (typeof ESTIMATORS)[number], id: string): string => fmt(report.margins[e].perCondition.find((c) => c.conditionId === id)?.maxAbsErrorMs);
    return ids.map((id) => [id, ...ESTIMATORS.map((e) => get(e, id))]);
  })()));

  for (const role of ROLES) out.push(modelSection(report.models[role]));
  return page(`vantage fit ${report.parameterSetVersion}`, out.join('\n'));
}
