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
export function fmtG(v: number, digits: number): string {
  return Number.isFinite(v) ? Number(v.toPrecision(digits)).toString() : '–';
}

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
