/** A sweep's self-contained HTML report (inline SVG plots; no scripts, no external resources). */
import { escapeHtml as esc, fmt, lineChartSvg, page, svg, table, ticks } from '@vantage/fitting';
import type { Distribution, ReplayMetrics } from './metrics';
import { knobsKey, type SweepReport } from './sweep';

const sgn = (v: number): string => (Number.isFinite(v) ? `${v > 0 ? '+' : ''}${v.toFixed(1)} %` : fmt(v));

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

/** Grouped bars: one group per label, one bar per metric. */
function barChartSvg(opts: { title: string; yLabel: string; groups: readonly { label: string; values: readonly number[] }[]; metrics: readonly string[] }): string {
  const W = 640;
  const H = 300;
  const m = { l: 64, r: 16, t: 28, b: 52 };
  const max = Math.max(...opts.groups.flatMap((g) => g.values.filter(Number.isFinite)), 0) * 1.1 || 1;
  const sy = (y: number): number => H - m.b - (y / max) * (H - m.t - m.b);
  const gw = (W - m.l - m.r) / Math.max(1, opts.groups.length);
  const bw = (gw * 0.8) / Math.max(1, opts.metrics.length);
  const parts: string[] = [];
  parts.push(`<text x="${W / 2}" y="16" text-anchor="middle" font-size="13">${esc(opts.title)}</text>`);
  for (const t of ticks(0, max)) parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${sy(t)}" y2="${sy(t)}" stroke="#ddd"/><text x="${m.l - 4}" y="${sy(t) + 4}" text-anchor="end">${t}</text>`);
  opts.groups.forEach((g, gi) => {
    g.values.forEach((v, mi) => {
      const x = m.l + gi * gw + gw * 0.1 + mi * bw;
      const c = COLORS[mi % COLORS.length]!;
      if (Number.isFinite(v)) parts.push(`<rect x="${x.toFixed(1)}" y="${sy(v).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${(H - m.b - sy(v)).toFixed(1)}" fill="${c}"><title>${esc(`${g.label} ${opts.metrics[mi]}: ${fmt(v)}`)}</title></rect>`);
      if (Number.isFinite(v)) parts.push(`<text x="${(x + bw / 2 - 1).toFixed(1)}" y="${(sy(v) - 3).toFixed(1)}" text-anchor="middle" font-size="9">${Math.round(v)}</text>`);
    });
    parts.push(`<text x="${(m.l + gi * gw + gw / 2).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${esc(g.label)}</text>`);
  });
  opts.metrics.forEach((name, i) => {
    parts.push(`<rect x="${m.l + 8 + i * 110}" y="${H - 18}" width="10" height="10" fill="${COLORS[i % COLORS.length]!}"/><text x="${m.l + 22 + i * 110}" y="${H - 9}">${esc(name)}</text>`);
  });
  parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/>`);
  parts.push(`<text transform="translate(14 ${H / 2}) rotate(-90)" text-anchor="middle">${esc(opts.yLabel)}</text>`);
  return svg(W, H, opts.title, parts.join(''));
}

const distCells = (d: Distribution): string[] => [d.mean, d.p50, d.p90, d.p99].map((v) => fmt(v));

function metricsTable(rows: readonly { label: string; router: string; metrics: ReplayMetrics }[]): string {
  const dist = (what: string): string[] => ['mean', 'p50', 'p90', 'p99'].map((q) => `${what} ${q} ms`);
  return table(
    ['policy', 'router', ...dist('TTFT'), ...dist('E2E'), 'TPOT mean ms', 'TPOT p90 ms', 'ITL mean ms', 'req/s', 'out tok/s', 'prefix reuse', 'preempt.'],
    rows.map(({ label, router, metrics: m }) => [
      ...[esc(label), `<code>${esc(router)}</code>`, ...distCells(m.ttftMs), ...distCells(m.e2eMs), fmt(m.tpotMs.mean, 2), fmt(m.tpotMs.p90, 2), fmt(m.itlMs.mean, 2)],
      ...[fmt(m.requestThroughputPerS, 3), fmt(m.outputTokenThroughputPerS), fmt(m.prefixCacheReusedRatio, 3), String(m.preemptions)],
    ]),
  );
}

/** Response-curve x positions: the search's log1p scale, labelled with the raw values. */
const curveX = (s: number): number => Math.log1p(s / 0.25);

export function renderSweepReportHtml(r: SweepReport, title = 'Router sweep'): string {
  const s = r.settings;
  const parts: string[] = [];
  parts.push(`<h1>${esc(title)}</h1>`);
  parts.push(
    `<p class="muted">Objective: mean E2E latency (lower is better). Tuning trace <code>${esc(s.tuneTrace)}</code>${s.validateTrace ? `, validation trace <code>${esc(s.validateTrace)}</code>` : ''}; ` +
      `${s.workers} workers, closed loop, concurrency ${s.concurrency}; engine ${esc(JSON.stringify(s.engine))}; seed ${s.seed}; ` +
      `search ${s.method} (${r.trials.length} trials); ${r.replays} replays in ${r.wallS.toFixed(0)} s wall.</p>`,
  );
  parts.push(`<h2>Winner</h2><p><code>${esc(knobsKey(r.best.knobs))}</code>: mean E2E ${fmt(r.best.objective)} ms on the tuning trace.${r.gp ? ` GP length scales (credit, log-scale, temperature): ${r.gp.lengthScales.map((v) => v.toFixed(2)).join(', ')}.` : ''}</p>`);
  parts.push(
    table(
      ['trace', 'E2E mean', 'TTFT mean', 'TPOT mean', 'req/s', 'prefix reuse default → tuned'],
      r.deltas.map((d) => [esc(d.trace), ...[d.e2eMeanPct, d.ttftMeanPct, d.tpotMeanPct, d.requestThroughputPct].map(sgn), `${fmt(d.reuseBefore, 3)} → ${fmt(d.reuseAfter, 3)}`]),
    ),
  );
  parts.push('<p class="muted">Tuned versus default kv_router (credit 1, scale 1, temperature 0); seed 001 reports E2E −3.6 %, TTFT −14 %, TPOT −27 %, throughput +3.6 %, reuse 0.494 → 0.554 on its own trace and deployment.</p>');

  for (const c of r.comparisons) {
    parts.push(`<h2>Policies on ${esc(c.trace)} (${c.requests} requests, concurrency ${c.concurrency})</h2>`);
    parts.push(metricsTable(c.rows));
    parts.push(
      barChartSvg({
        title: `Mean TTFT and E2E per policy — ${c.trace}`,
        yLabel: 'ms',
        metrics: ['mean TTFT', 'mean E2E', 'p90 TTFT'],
        groups: c.rows.map((row) => ({ label: row.label, values: [row.metrics.ttftMs.mean, row.metrics.e2eMs.mean, row.metrics.ttftMs.p90] })),
      }),
    );
  }

  parts.push('<h2>Search</h2>');
  let runBest = Infinity;
  parts.push(
    lineChartSvg({
      title: 'Objective per trial',
      xLabel: 'trial',
      yLabel: 'mean E2E (ms)',
      series: [
        { name: 'trial', points: r.trials.map((t) => [t.index + 1, t.objective] as const), line: false },
        { name: 'best so far', points: r.trials.map((t) => [t.index + 1, (runBest = Math.min(runBest, t.objective))] as const) },
      ],
    }),
  );
  if (r.responseCurve.length > 0) {
    const xTicks = r.responseCurve.map((p) => ({ x: curveX(p.prefillLoadScale), label: String(p.prefillLoadScale) }));
    parts.push('<h2>prefill_load_scale response (credit 1.0, temperature 0)</h2>');
    parts.push(
      lineChartSvg({
        title: 'Mean E2E vs prefill_load_scale',
        xLabel: 'prefill_load_scale (log(1 + s/0.25) axis)',
        yLabel: 'ms',
        xTicks,
        series: [{ name: 'mean E2E', points: r.responseCurve.map((p) => [curveX(p.prefillLoadScale), p.metrics.e2eMs.mean] as const) }],
      }),
    );
    parts.push(
      lineChartSvg({
        title: 'Mean TTFT and TPOT×10 vs prefill_load_scale',
        xLabel: 'prefill_load_scale',
        yLabel: 'ms',
        xTicks,
        series: [
          { name: 'mean TTFT', points: r.responseCurve.map((p) => [curveX(p.prefillLoadScale), p.metrics.ttftMs.mean] as const) },
          { name: 'mean TPOT ×10', points: r.responseCurve.map((p) => [curveX(p.prefillLoadScale), p.metrics.tpotMs.mean * 10] as const) },
        ],
      }),
    );
    parts.push(
      table(
        ['prefill_load_scale', 'E2E mean', 'TTFT mean', 'TPOT mean', 'prefix reuse'],
        r.responseCurve.map(({ prefillLoadScale, metrics: m }) => [String(prefillLoadScale), fmt(m.e2eMs.mean), fmt(m.ttftMs.mean), fmt(m.tpotMs.mean, 2), fmt(m.prefixCacheReusedRatio, 3)]),
      ),
    );
  }
  parts.push('<h2>All trials (tuning trace)</h2>');
  parts.push(
    table(
      ['#', 'how', 'credit', 'prefill_load_scale', 'temperature', 'E2E mean', 'TTFT mean', 'TPOT mean', 'reuse', 'GP mean ± sd', 'EI'],
      r.trials.map(({ index, method, knobs: k, objective, metrics: m, predicted: p }) => [
        ...[String(index + 1), method, fmt(k.overlapScoreCredit, 3), fmt(k.prefillLoadScale, 3), fmt(k.temperature, 3)],
        ...[fmt(objective), fmt(m.ttftMs.mean), fmt(m.tpotMs.mean, 2), fmt(m.prefixCacheReusedRatio, 3), p ? `${fmt(p.mean)} ± ${fmt(p.sd)}` : '', p ? fmt(p.ei, 2) : ''],
      ]),
    ),
  );
  return page(title, parts.join('\n'));
}

/** The report as JSON (metrics only; per-request records are never included). */
export function sweepReportJson(r: SweepReport): string {
  return `${JSON.stringify(r, (_k, v: unknown) => (typeof v === 'number' && !Number.isInteger(v) ? Number(v.toPrecision(6)) : v), 1)}\n`;
}
