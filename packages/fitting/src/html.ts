/**
 * What the HTML reports share: each is one self-contained page, inline CSS
 * and SVG, no scripts, fonts or images from anywhere, so it opens offline and can be archived with
 * what it was computed from.
 */

/** Text for an HTML element or attribute value. */
export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** A number with `digits` decimals, or an en dash where there is none. */
export function fmt(v: number | null | undefined, digits = 1): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return v.toFixed(digits);
}

/** A number to `digits` significant digits, trailing zeros dropped, or an en dash where there is none. */
export function fmtG(v: number | null | undefined, digits = 4): string {
  return typeof v === 'number' && Number.isFinite(v) ? Number(v.toPrecision(digits)).toString() : '–';
}

/** `estimate [lo, hi]` to four significant digits, or an em dash for no difference. */
export const intervalText = (d: { estimate: number; lo: number | null; hi: number | null } | undefined): string => (d === undefined ? '—' : `${fmtG(d.estimate)} [${fmtG(d.lo)}, ${fmtG(d.hi)}]`);

/** Round tick values from lo to hi: steps of 1, 2 or 5 times a power of ten, at most six of them. */
export function ticks(lo: number, hi: number): number[] {
  if (!(hi > lo)) return [lo];
  const step = 10 ** Math.floor(Math.log10((hi - lo) / 4));
  const s = [1, 2, 5, 10].map((m) => m * step).find((c) => (hi - lo) / c <= 6) ?? step * 10;
  const out: number[] = [];
  for (let v = Math.ceil(lo / s) * s; v <= hi + 1e-9 * s; v += s) out.push(Number(v.toPrecision(12)));
  return out;
}

/** [lo, hi] widened by `pad` of its width on both sides; a single point becomes ±1, no finite range [0, 1]. */
export function padded(lo: number, hi: number, pad: number): [number, number] {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
  if (lo === hi) return [lo - 1, hi + 1];
  const p = (hi - lo) * pad;
  return [lo - p, hi + p];
}

/** An SVG element; the font attributes serve it as a file of its own (the page's style overrides them). */
export function svg(w: number, h: number, title: string, body: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif" font-size="11" role="img" aria-label="${escapeHtml(title)}">${body}</svg>`;
}

/** Tick marks and their labels below a horizontal axis at height y. */
export function xTicks(sx: (v: number) => number, lo: number, hi: number, y: number, label: (v: number) => string): string {
  return ticks(lo, hi)
    .map((t) => `<line x1="${sx(t).toFixed(1)}" x2="${sx(t).toFixed(1)}" y1="${y}" y2="${y + 4}" stroke="#666"/><text x="${sx(t).toFixed(1)}" y="${y + 15}" text-anchor="middle">${label(t)}</text>`)
    .join('');
}

/** A table: the headers as text, the cells as given (HTML) unless `cell` turns them into it. */
export function table(head: readonly string[], rows: readonly (readonly string[])[], cell: (c: string) => string = (c) => c): string {
  return `<table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${cell(c)}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
}

const STYLE = `body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0 16px}th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;vertical-align:top}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
svg{margin:6px 12px 6px 0;font:11px system-ui,sans-serif}svg .t{font-weight:600;font-size:12px}.muted{color:#868e96;fill:#868e96}
.plots{display:flex;flex-wrap:wrap}.warn{color:#a61e4d}.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}
`;

/** The whole page around `body`. */
export function page(title: string, body: string): string {
  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>\n<style>\n${STYLE}</style></head><body>\n${body}\n</body></html>\n`;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

export interface Series {
  readonly name: string;
  readonly points: readonly (readonly [number, number])[];
  /** Draw the line through the points (default) and a dot on each (default). */
  readonly line?: boolean;
  readonly dots?: boolean;
  /** Default: the palette's colour at the series' position. */
  readonly color?: string;
  /** Optional interval per point (same order as `points`), drawn as a vertical bar; null: none. */
  readonly errors?: readonly (readonly [number, number] | null)[];
}

/** Scatter/line chart; points that are not finite are left out. `xTicks` replaces numeric x ticks by labelled positions. */
export function lineChartSvg(opts: {
  title: string;
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  xTicks?: readonly { x: number; label: string }[];
  width?: number;
  height?: number;
  /** Include y = 0 in the range and draw it dashed (differences). */
  zeroLine?: boolean;
  /** The same range on both axes and y = x drawn dashed (measured against predicted). */
  diagonal?: boolean;
}): string {
  const W = opts.width ?? 640;
  const H = opts.height ?? 300;
  const m = { l: 64, r: 16, t: 28, b: 44 };
  const finite = (p: readonly [number, number]): boolean => Number.isFinite(p[0]) && Number.isFinite(p[1]);
  const pts = opts.series.flatMap((s) => s.points.filter(finite));
  if (pts.length === 0) return '';
  let x0 = Math.min(...pts.map((p) => p[0]));
  let x1 = Math.max(...pts.map((p) => p[0]));
  const ys = [...pts.map((p) => p[1]), ...opts.series.flatMap((s) => (s.errors ?? []).flatMap((e) => (e === null ? [] : [e[0], e[1]])))].filter(Number.isFinite);
  if (opts.zeroLine === true) ys.push(0);
  let y0 = Math.min(...ys);
  let y1 = Math.max(...ys);
  if (x1 === x0) [x0, x1] = [x0 - 1, x1 + 1];
  const pad = (y1 - y0) * 0.08 || Math.abs(y0) * 0.05 || 1;
  y0 -= pad;
  y1 += pad;
  if (opts.diagonal === true) [x0, x1, y0, y1] = [Math.min(x0, y0), Math.max(x1, y1), Math.min(x0, y0), Math.max(x1, y1)];
  const sx = (x: number): number => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
  const sy = (y: number): number => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const parts: string[] = [];
  parts.push(`<text x="${W / 2}" y="16" text-anchor="middle" font-size="13">${escapeHtml(opts.title)}</text>`);
  for (const t of ticks(y0, y1)) {
    parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${sy(t)}" y2="${sy(t)}" stroke="#ddd"/><text x="${m.l - 4}" y="${sy(t) + 4}" text-anchor="end">${t}</text>`);
  }
  const xt = opts.xTicks ?? ticks(x0, x1).map((x) => ({ x, label: String(x) }));
  for (const t of xt) parts.push(`<line x1="${sx(t.x)}" x2="${sx(t.x)}" y1="${H - m.b}" y2="${H - m.b + 4}" stroke="#333"/><text x="${sx(t.x)}" y="${H - m.b + 16}" text-anchor="middle">${escapeHtml(t.label)}</text>`);
  parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/><line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}" stroke="#333"/>`);
  if (opts.zeroLine === true) parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${sy(0).toFixed(1)}" y2="${sy(0).toFixed(1)}" stroke="#888" stroke-dasharray="4 3"/>`);
  if (opts.diagonal === true) parts.push(`<line x1="${sx(x0).toFixed(1)}" y1="${sy(x0).toFixed(1)}" x2="${sx(x1).toFixed(1)}" y2="${sy(x1).toFixed(1)}" stroke="#888" stroke-dasharray="4 3"/>`);
  parts.push(`<text x="${W / 2}" y="${H - 8}" text-anchor="middle">${escapeHtml(opts.xLabel)}</text>`);
  parts.push(`<text transform="translate(14 ${H / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(opts.yLabel)}</text>`);
  opts.series.forEach((s, i) => {
    const c = s.color ?? COLORS[i % COLORS.length]!;
    const own = s.points.filter(finite);
    if (s.line ?? true) parts.push(`<polyline fill="none" stroke="${c}" stroke-width="1.5" points="${own.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ')}"/>`);
    s.errors?.forEach((e, k) => {
      const p = s.points[k];
      if (e === null || p === undefined || !Number.isFinite(e[0]) || !Number.isFinite(e[1])) return;
      const x = sx(p[0]).toFixed(1);
      parts.push(`<line x1="${x}" x2="${x}" y1="${sy(e[0]).toFixed(1)}" y2="${sy(e[1]).toFixed(1)}" stroke="${c}" stroke-width="1"/>`);
    });
    if (s.dots ?? true) for (const p of own) parts.push(`<circle cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="3" fill="${c}"><title>${escapeHtml(`${s.name}: ${p[0]}, ${fmt(p[1])}`)}</title></circle>`);
    parts.push(`<rect x="${m.l + 8}" y="${m.t + 4 + i * 14}" width="10" height="10" fill="${c}"/><text x="${m.l + 22}" y="${m.t + 13 + i * 14}">${escapeHtml(s.name)}</text>`);
  });
  return svg(W, H, opts.title, parts.join(''));
}
