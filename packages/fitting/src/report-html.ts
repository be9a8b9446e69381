/** The fit report as one self-contained HTML page (see `html.ts`). */
import type { FitReport, ModelReport } from './fit';
import type { EstimatorFit } from './estimator-fit';
import { escapeHtml, fmt, fmtG as fmtDigits, padded, page, svg, table as htmlTable, ticks, xTicks } from './html';
import { ESTIMATORS } from './margins';
import { ROLES } from './rows';
import { SPLIT_NAMES } from './splits';

const fmtG = (v: number): string => fmtDigits(v, 6);
const table = (head: readonly string[], rows: readonly (readonly string[])[]): string => htmlTable(head, rows, escapeHtml);

const W = 420;
const H = 300;
const M = { l: 56, r: 12, t: 24, b: 40 };
const COLORS: Record<string, string> = { fitting: '#9aa5b1', uncertainty: '#d9480f', selection: '#1864ab' };

interface Pt {
  readonly x: number;
  readonly y: number;
  readonly color: string;
}

function extent(vs: readonly number[]): [number, number] {
  const f = vs.filter(Number.isFinite);
  return padded(Math.min(...f), Math.max(...f), 0.05);
}

/** The plot's box, its own parts, the title and both axis labels. */
function framed(title: string, xLabel: string, yLabel: string, parts: readonly string[]): string {
  return svg(W, H, title, [
    `<rect x="${M.l}" y="${M.t}" width="${W - M.l - M.r}" height="${H - M.t - M.b}" fill="#fff" stroke="#ccc"/>`,
    ...parts,
    `<text x="${W / 2}" y="14" text-anchor="middle" class="t">${escapeHtml(title)}</text>`,
    `<text x="${(M.l + W - M.r) / 2}" y="${H - 6}" text-anchor="middle">${escapeHtml(xLabel)}</text>`,
    `<text transform="translate(12 ${(M.t + H - M.b) / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(yLabel)}</text>`,
  ].join(''));
}

/** Scatter plot; `diagonal` draws y = x, `zero` draws y = 0. */
function scatter(title: string, xLabel: string, yLabel: string, pts: readonly Pt[], opts: { diagonal?: boolean; zero?: boolean } = {}): string {
  let [x0, x1] = extent(pts.map((p) => p.x));
  let [y0, y1] = extent(pts.map((p) => p.y));
  if (opts.diagonal) {
    x0 = y0 = Math.min(x0, y0);
    x1 = y1 = Math.max(x1, y1);
  }
  const sx = (v: number): number => M.l + ((v - x0) / (x1 - x0)) * (W - M.l - M.r);
  const sy = (v: number): number => H - M.b - ((v - y0) / (y1 - y0)) * (H - M.t - M.b);
  const parts: string[] = [xTicks(sx, x0, x1, H - M.b, fmtG)];
  for (const t of ticks(y0, y1)) parts.push(`<line x1="${M.l - 4}" x2="${M.l}" y1="${sy(t).toFixed(1)}" y2="${sy(t).toFixed(1)}" stroke="#666"/><text x="${M.l - 6}" y="${(sy(t) + 3).toFixed(1)}" text-anchor="end">${fmtG(t)}</text>`);
  if (opts.diagonal) parts.push(`<line x1="${sx(x0)}" y1="${sy(x0)}" x2="${sx(x1)}" y2="${sy(x1)}" stroke="#888" stroke-dasharray="4 3"/>`);
  if (opts.zero && y0 < 0 && y1 > 0) parts.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${sy(0).toFixed(1)}" y2="${sy(0).toFixed(1)}" stroke="#888" stroke-dasharray="4 3"/>`);
  for (const p of pts) {
    if (!Number.isFinite(p.x) || !Number.isFinite(p.y)) continue;
    parts.push(`<circle cx="${sx(p.x).toFixed(1)}" cy="${sy(p.y).toFixed(1)}" r="2.2" fill="${p.color}" fill-opacity="0.7"/>`);
  }
  return framed(title, xLabel, yLabel, parts);
}

/** CV curve: lambdas on an evenly spaced categorical axis (lambda 0 cannot sit on a log axis). */
function cvPlot(title: string, fit: EstimatorFit): string {
  const pts = fit.cvCurve.map((c, i) => ({ i, lambda: c.lambda, mse: c.mse }));
  const ok = pts.filter((p) => p.mse !== null) as { i: number; lambda: number; mse: number }[];
  const [y0, y1] = extent(ok.map((p) => p.mse));
  const n = Math.max(1, pts.length - 1);
  const sx = (i: number): number => M.l + (i / n) * (W - M.l - M.r);
  const sy = (v: number): number => H - M.b - ((v - y0) / (y1 - y0)) * (H - M.t - M.b);
  const parts: string[] = pts.map((p) => `<text x="${sx(p.i).toFixed(1)}" y="${H - M.b + 15}" text-anchor="middle">${fmtG(p.lambda)}</text>`);
  for (const t of ticks(y0, y1)) parts.push(`<text x="${M.l - 6}" y="${(sy(t) + 3).toFixed(1)}" text-anchor="end">${fmtG(t)}</text>`);
  if (ok.length > 0) parts.push(`<polyline fill="none" stroke="#1864ab" stroke-width="1.5" points="${ok.map((p) => `${sx(p.i).toFixed(1)},${sy(p.mse).toFixed(1)}`).join(' ')}"/>`);
  for (const p of ok) {
    const chosen = p.lambda === fit.lambda;
    parts.push(`<circle cx="${sx(p.i).toFixed(1)}" cy="${sy(p.mse).toFixed(1)}" r="${chosen ? 5 : 3}" fill="${chosen ? '#d9480f' : '#1864ab'}"/>`);
  }
  return framed(title, 'lambda (chosen in orange)', 'CV mean squared error (ms²)', parts);
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
    const pts = (g: (r: EstimatorFit['residuals'][number]) => Pt): Pt[] => f.residuals.map(g);
    out.push(scatter(`${m.role} ${e}: residual vs predicted`, 'predicted TTFT (ms)', 'measured − predicted (ms)', pts((r) => ({ x: r.predictedMs, y: r.measuredMs - r.predictedMs, color: COLORS[r.split] ?? '#000' })), { zero: true }));
    out.push(scatter(`${m.role} ${e}: measured vs predicted`, 'predicted TTFT (ms)', 'measured TTFT (ms)', pts((r) => ({ x: r.predictedMs, y: r.measuredMs, color: COLORS[r.split] ?? '#000' })), { diagonal: true }));
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
    out.push(scatter(`${e}: predicted vs measured advantage`, 'predicted T_eff − T_cap (ms)', 'measured TTFT_eff − TTFT_cap (ms)', m.pairErrors.map((p) => ({ x: p.predictedAdvantageMs, y: p.measuredAdvantageMs, color: COLORS['uncertainty'] as string })), { diagonal: true }));
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
