/** The evaluation report as one self-contained HTML page (see fitting's `html.ts`). */
import { escapeHtml, fmt, fmtG, intervalText, lineChartSvg, padded as paddedBy, page, svg, table, xTicks } from '@vantage/fitting';
import type { Difference, Distribution, EvaluationAnalysis, VariantSummary } from './analysis';
import { DIFFERENCE_METRICS } from './analysis';

const padded = (lo: number, hi: number): [number, number] => paddedBy(lo, hi, 0.06);
const xAxis = (sx: (v: number) => number, lo: number, hi: number, y: number): string => xTicks(sx, lo, hi, y, fmtG);

function pct(v: number): string {
  return Number.isFinite(v) ? `${(100 * v).toFixed(1)} %` : '–';
}

const PALETTE = ['#495057', '#1864ab', '#2b8a3e', '#d9480f', '#862e9c', '#0b7285', '#e67700'];

// ---------------------------------------------------------------------------
// Forest plot: one panel per metric, one row per variant.
// ---------------------------------------------------------------------------

/** Layout of the charts with one row per name over a shared x axis: width, name column, right margin, top. */
const ROWS = { W: 520, L: 130, R: 16, top: 24 } as const;

/**
 * One row per name over a shared x axis from `x0` to `x1`: the heading, `behind` (drawn before the
 * rows, given the scale and the rows' bottom), each row's name and `row(i, y, sx)` centred on `y`, the axis.
 */
function axisRows(o: {
  readonly heading: string;
  readonly label: string;
  readonly names: readonly string[];
  readonly rowH: number;
  readonly span: readonly [number, number];
  readonly behind?: (sx: (v: number) => number, bottom: number) => string;
  readonly row: (i: number, y: number, sx: (v: number) => number) => string;
}): string {
  const { W, L, R, top } = ROWS;
  const bottom = top + o.rowH * o.names.length;
  const [x0, x1] = o.span;
  const sx = (v: number): number => L + ((v - x0) / (x1 - x0)) * (W - L - R);
  const parts: string[] = [`<text x="${W / 2}" y="14" text-anchor="middle" class="t">${escapeHtml(o.heading)}</text>`];
  if (o.behind) parts.push(o.behind(sx, bottom));
  o.names.forEach((name, i) => {
    const y = top + o.rowH * i + o.rowH / 2;
    parts.push(`<text x="${L - 8}" y="${y + 4}" text-anchor="end">${escapeHtml(name)}</text>`, o.row(i, y, sx));
  });
  const axisY = bottom + 4;
  parts.push(`<line x1="${L}" x2="${W - R}" y1="${axisY}" y2="${axisY}" stroke="#666"/>`, xAxis(sx, x0, x1, axisY));
  return svg(W, bottom + 34, o.label, parts.join(''));
}

function forestPanel(metricLabel: string, unit: string, diffs: readonly Difference[], colors: ReadonlyMap<string, string>): string {
  const vals = diffs.flatMap((d) => [d.estimate, d.lo ?? NaN, d.hi ?? NaN, 0]).filter(Number.isFinite);
  return axisRows({
    heading: `${metricLabel}: variant − baseline (${unit})`,
    label: `${metricLabel} differences`,
    names: diffs.map((d) => d.variant),
    rowH: 22,
    span: padded(Math.min(...vals), Math.max(...vals)),
    behind: (sx, bottom) => `<line x1="${sx(0).toFixed(1)}" x2="${sx(0).toFixed(1)}" y1="${ROWS.top - 4}" y2="${bottom}" stroke="#888" stroke-dasharray="4 3"/>`,
    row: (i, y, sx) => {
      const d = diffs[i]!;
      const c = colors.get(d.variant) ?? '#333';
      let out = '';
      if (d.lo !== null && d.hi !== null) {
        out += `<line x1="${sx(d.lo).toFixed(1)}" x2="${sx(d.hi).toFixed(1)}" y1="${y}" y2="${y}" stroke="${c}" stroke-width="2"/>`;
        for (const e of [d.lo, d.hi]) out += `<line x1="${sx(e).toFixed(1)}" x2="${sx(e).toFixed(1)}" y1="${y - 5}" y2="${y + 5}" stroke="${c}" stroke-width="2"/>`;
      }
      if (Number.isFinite(d.estimate)) return `${out}<circle cx="${sx(d.estimate).toFixed(1)}" cy="${y}" r="4" fill="${c}"><title>${escapeHtml(`${d.variant}: ${intervalText(d)} ${unit}, ${d.method}`)}</title></circle>`;
      return `${out}<text x="${ROWS.L + 4}" y="${y + 4}" class="muted">no data</text>`;
    },
  });
}

// ---------------------------------------------------------------------------
// TTFT distributions: box plots and ECDFs.
// ---------------------------------------------------------------------------

function boxPlot(title: string, unit: string, rows: readonly { name: string; d: Distribution; color: string }[]): string {
  const vals = rows.flatMap((r) => [r.d.p5, r.d.p95]).filter(Number.isFinite);
  return axisRows({
    heading: title,
    label: title,
    names: rows.map((r) => r.name),
    rowH: 26,
    span: padded(Math.min(...vals, 0), Math.max(...vals, 1)),
    row: (i, y, sx) => {
      const { d, color, name } = rows[i]!;
      if (d.n === 0) return `<text x="${ROWS.L + 4}" y="${y + 4}" class="muted">no executed requests</text>`;
      return [
        `<line x1="${sx(d.p5).toFixed(1)}" x2="${sx(d.p95).toFixed(1)}" y1="${y}" y2="${y}" stroke="${color}"/>`,
        `<rect x="${sx(d.p25).toFixed(1)}" y="${y - 8}" width="${Math.max(1, sx(d.p75) - sx(d.p25)).toFixed(1)}" height="16" fill="${color}" fill-opacity="0.25" stroke="${color}"/>`,
        `<line x1="${sx(d.p50).toFixed(1)}" x2="${sx(d.p50).toFixed(1)}" y1="${y - 8}" y2="${y + 8}" stroke="${color}" stroke-width="2"/>`,
        `<line x1="${sx(d.p90).toFixed(1)}" x2="${sx(d.p90).toFixed(1)}" y1="${y - 5}" y2="${y + 5}" stroke="${color}" stroke-dasharray="2 2"/>`,
        `<circle cx="${sx(d.mean).toFixed(1)}" cy="${y}" r="3" fill="#fff" stroke="${color}"><title>${escapeHtml(`${name}: mean ${fmtG(d.mean)}, p50 ${fmtG(d.p50)}, p90 ${fmtG(d.p90)} ${unit} (n ${d.n})`)}</title></circle>`,
      ].join('');
    },
  });
}

/** Each series' ECDF as a step line, thinned to at most ~400 steps so the page stays small (`values` sorted). */
function ecdf(title: string, unit: string, series: readonly { name: string; values: readonly number[]; color: string }[]): string {
  const steps = (vs: readonly number[]): (readonly [number, number])[] => {
    const n = vs.length;
    if (n === 0) return [];
    const stride = Math.max(1, Math.floor(n / 400));
    const pts: (readonly [number, number])[] = [[vs[0]!, 0]];
    for (let i = 0; i < n; i += stride) pts.push([vs[i]!, i / n], [vs[i]!, (i + 1) / n]);
    pts.push([vs[n - 1]!, 1]);
    return pts;
  };
  return lineChartSvg({ title, xLabel: unit, yLabel: 'share of requests', width: 520, height: 320, series: series.map((s) => ({ name: s.name, color: s.color, dots: false, points: steps(s.values) })) });
}

// ---------------------------------------------------------------------------
// Rule outcomes: stacked bars of decision reasons.
// ---------------------------------------------------------------------------

const FIXED_SEGMENTS: readonly { key: string; count: 'baseline' | 'stageCapable' | 'kept' | 'overrode'; label: string; color: string }[] = [
  { key: 'baseline', count: 'baseline', label: 'baseline (no rule)', color: '#adb5bd' },
  { key: 'stage_capable', count: 'stageCapable', label: 'Stage proposed capable', color: '#74c0fc' },
  { key: 'kept', count: 'kept', label: 'kept (could act, no trigger)', color: '#51cf66' },
  { key: 'overrode', count: 'overrode', label: 'overrode → capable', color: '#f76707' },
];
const FALLBACK_COLORS = ['#c92a2a', '#a61e4d', '#862e9c', '#5f3dc4', '#364fc7', '#e03131', '#9c36b5'];

function ruleBars(variants: readonly VariantSummary[]): string {
  const fallbackKeys = [...new Set(variants.flatMap((v) => [...Object.keys(v.rules.fallback), ...Object.keys(v.rules.other).map((k) => `other:${k}`)]))].sort();
  const legend = [...FIXED_SEGMENTS, ...fallbackKeys.map((k, i) => ({ key: k, label: k, color: FALLBACK_COLORS[i % FALLBACK_COLORS.length] as string }))];
  const colorOfKey = new Map(legend.map((l) => [l.key, l.color]));
  const W = 620;
  const L = 130;
  const R = 60;
  const rowH = 26;
  const top = 24;
  const legendRows = Math.ceil(legend.length / 2);
  const H = top + rowH * variants.length + 12 + legendRows * 16 + 8;
  const parts: string[] = [`<text x="${W / 2}" y="14" text-anchor="middle" class="t">Decisions by reason (share of foreground decisions)</text>`];
  variants.forEach((v, i) => {
    const y = top + rowH * i;
    parts.push(`<text x="${L - 8}" y="${y + 15}" text-anchor="end">${escapeHtml(v.variant)}</text>`);
    const total = v.rules.decisions;
    if (total === 0) {
      parts.push(`<text x="${L + 4}" y="${y + 15}" class="muted">no decisions</text>`);
      return;
    }
    let x = L;
    const r = v.rules;
    const segments = [
      ...FIXED_SEGMENTS.map((f) => ({ key: f.key, n: r[f.count] })),
      ...Object.entries(r.fallback).map(([key, n]) => ({ key, n })),
      ...Object.entries(r.other).map(([k, n]) => ({ key: `other:${k}`, n })),
    ];
    for (const s of segments) {
      if (s.n === 0) continue;
      const w = (s.n / total) * (W - L - R);
      parts.push(`<rect x="${x.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="18" fill="${colorOfKey.get(s.key) ?? '#333'}"><title>${escapeHtml(`${v.variant}: ${s.key} ${s.n} of ${total} (${pct(s.n / total)})`)}</title></rect>`);
      x += w;
    }
    parts.push(`<text x="${W - R + 4}" y="${y + 15}">${total}</text>`);
  });
  const ly = top + rowH * variants.length + 12;
  legend.forEach((l, i) => {
    const x = L + (i % 2) * 240;
    const y = ly + Math.floor(i / 2) * 16;
    parts.push(`<rect x="${x}" y="${y}" width="10" height="10" fill="${l.color}"/><text x="${x + 14}" y="${y + 9}">${escapeHtml(l.label)}</text>`);
  });
  return svg(W, H, 'Decisions by reason', parts.join(''));
}

// ---------------------------------------------------------------------------

function variantTable(vs: readonly VariantSummary[]): string {
  const head = [
    'variant', 'sessions', 'completed sessions', 'requests', 'executed', 'TTFT mean ms', 'TTFT p90 ms', 'latency mean ms', 'latency p90 ms',
    'session completion mean ms', 'session completion p90 ms', 'uncached input tokens (by model)', 'uncached / session', 'routing overhead mean µs',
    'observe mean µs', 'background TTFT mean ms', 'background TTFT p90 ms',
  ];
  const rows = vs.map((v) => {
    const byModel = Object.entries(v.uncachedInput.byModel).map(([m, s]) => `${escapeHtml(m)}: ${s.tokens}${s.missingUsage > 0 ? ` (+${s.missingUsage} without usage)` : ''}`).join('<br>');
    return [
      escapeHtml(v.variant), String(v.sessions.total), String(v.sessions.completed), String(v.requests.total), String(v.requests.executed),
      fmt(v.ttftMs.mean), fmt(v.ttftMs.p90), fmt(v.latencyMs.mean), fmt(v.latencyMs.p90), fmt(v.sessionCompletionMs.mean), fmt(v.sessionCompletionMs.p90),
      byModel || '–', fmt(v.uncachedInput.perSession.mean, 0), fmt(v.routingOverheadUs.mean, 0), fmt(v.observeDurationUs.mean, 0),
      v.background.requests === 0 ? '–' : fmt(v.background.ttftMs.mean), v.background.requests === 0 ? '–' : fmt(v.background.ttftMs.p90),
    ];
  });
  return table(head, rows);
}

/** Competing traffic per variant: the same seeded load in every run, served beside the sessions (see background.ts). */
function backgroundTable(a: EvaluationAnalysis): string {
  const head = ['variant', 'streams', 'requests', 'completed', 'by status', 'TTFT mean ms', 'TTFT p90 ms', 'latency mean ms', 'latency p90 ms'];
  const rows = a.variants.map((v) => {
    const b = v.background;
    const none = b.executed === 0;
    return [
      escapeHtml(v.variant), String(b.streams), String(b.requests), String(b.executed),
      escapeHtml(Object.entries(b.byStatus).map(([k, n]) => `${k} ${n}`).join(', ')) || '–',
      none ? '–' : fmt(b.ttftMs.mean), none ? '–' : fmt(b.ttftMs.p90), none ? '–' : fmt(b.latencyMs.mean), none ? '–' : fmt(b.latencyMs.p90),
    ];
  });
  const diffs = a.differences.filter((d) => d.metric.startsWith('background_'));
  return `${table(head, rows)}${diffs.length === 0 ? '<p>No competing-traffic differences (no timed background requests in the baseline or the variants).</p>' : differenceTable(diffs)}`;
}

function ruleTable(vs: readonly VariantSummary[]): string {
  const fallbackKeys = [...new Set(vs.flatMap((v) => Object.keys(v.rules.fallback)))].sort();
  const head = ['variant', 'decisions', 'efficient proposals', 'could act', 'changed (overrode)', 'fell back', ...fallbackKeys, 'kept', 'Stage capable', 'final capable', 'no decision'];
  const rows = vs.map((v) => {
    const r = v.rules;
    return [
      escapeHtml(v.variant), String(r.decisions), String(r.efficientProposals), `${r.couldAct} (${pct(r.couldActRate)})`, `${r.overrode} (${pct(r.overrodeRate)})`,
      `${r.fallbackTotal} (${pct(r.fallbackRate)})`, ...fallbackKeys.map((k) => String(r.fallback[k] ?? 0)), String(r.kept), String(r.stageCapable), String(r.finalCapable), String(r.withoutDecision),
    ];
  });
  return `<p class="muted">Rates are shares of Stage's efficient proposals, the only ones a rule reconsiders.</p>${table(head, rows)}`;
}

function differenceTable(ds: readonly Difference[]): string {
  const head = ['metric', 'variant', 'variant value', 'baseline value', 'difference', 'CI low', 'CI high', 'resampling', 'units (v / b)', 'valid replicates'];
  const rows = ds.map((d) => [
    escapeHtml(`${d.label} (${d.unit})`), escapeHtml(d.variant), fmtG(d.variantValue), fmtG(d.baselineValue), fmtG(d.estimate), fmtG(d.lo), fmtG(d.hi),
    d.method, `${d.units.variant} / ${d.units.baseline}`, `${d.validIterations} / ${d.iterations}`,
  ]);
  return table(head, rows);
}

export function renderEvaluationHtml(a: EvaluationAnalysis): string {
  const colors = new Map(a.variants.map((v, i) => [v.variant, PALETTE[i % PALETTE.length] as string]));
  const o = a.options;
  const forest = DIFFERENCE_METRICS.map((m) => {
    const ds = a.differences.filter((d) => d.metric === m.id);
    return ds.length === 0 ? '' : forestPanel(m.label, m.unit, ds, colors);
  }).join('');
  const box = boxPlot('TTFT of executed requests (box p25–p75, whiskers p5–p95, dashed p90, ring mean)', 'ms', a.variants.map((v) => ({ name: v.variant, d: v.ttftMs, color: colors.get(v.variant) ?? '#333' })));
  const cdf = ecdf('TTFT empirical CDF', 'TTFT (ms)', a.variants.map((v) => ({ name: v.variant, values: v.ttftValues, color: colors.get(v.variant) ?? '#333' })));
  const problems = a.input.problems.slice(0, 50).map((p) => `<li>line ${p.line}: ${escapeHtml(p.message)}</li>`).join('');
  const skipped = Object.entries(a.input.skipped).map(([k, n]) => `${escapeHtml(k)} ${n}`).join(', ');
  return page('vantage evaluation report', `<h1>vantage evaluation report</h1>
<p>${a.input.used} outcome rows used of ${a.input.rows}${skipped === '' ? '' : ` (skipped: ${skipped})`}; ${a.input.problems.length} bad. Baseline <b>${escapeHtml(o.baseline)}</b>;
${Math.round(o.confidence * 100)} % percentile-bootstrap intervals over whole sessions, ${o.iterations} replicates, seed ${o.seed}.</p>
${a.warnings.length === 0 ? '' : `<h2>Warnings</h2><ul>${a.warnings.map((w) => `<li>${escapeHtml(w)}</li>`).join('')}</ul>`}
<h2>Per variant</h2>
${variantTable(a.variants)}
<h2>Differences from the baseline</h2>
<div class="plots">${forest || '<p class="muted">No differences (no baseline rows or no other variant).</p>'}</div>
${differenceTable(a.differences)}
<h2>TTFT distributions</h2>
<div class="plots">${box}${cdf}</div>
<h2>Effect on competing traffic</h2>
<p>Background requests (session ids evalbg:&lt;attempt&gt;:&lt;variant&gt;:&lt;stream&gt;, outcome records with background = true): the same seeded open-loop load in every run, booked and served by Dynamo's own choice beside the sessions. TTFT and latency from their arrival; differences from the baseline with bootstrap intervals over streams.</p>
${backgroundTable(a)}
<h2>How often each rule could act, changed the choice or fell back</h2>
<div class="plots">${ruleBars(a.variants)}</div>
${ruleTable(a.variants)}
<h2>What the records do not show</h2>
<ul>${a.gaps.map((g) => `<li>${escapeHtml(g)}</li>`).join('')}</ul>
${problems === '' ? '' : `<h2>Bad rows</h2><ul>${problems}</ul>${a.input.problems.length > 50 ? `<p>... and ${a.input.problems.length - 50} more</p>` : ''}`}`);
}
