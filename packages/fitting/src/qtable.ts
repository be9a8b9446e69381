/**
 * Q_m(N, f): "a table of measured TTFT with no competing requests, indexed
 * by prompt length and cached fraction. Values between measured points use
 * bilinear interpolation" (seed 000). Built here in @vantage/rules' `QTable`
 * format (read by its `lookupQ`). Grid, cell values (medians), hole filling
 * and refusals: README, "Q tables".
 */
import type { QTable } from '@vantage/rules';
import type { CalibrationRow } from './rows';
import { median } from './stats';

export type QMeasurement = Pick<CalibrationRow, 'n' | 'k' | 'ttftMs'>;

export type CellSource = 'measured' | 'interpolated_n' | 'interpolated_f';

export interface QCell {
  readonly n: number;
  readonly f: number;
  readonly valueMs: number;
  readonly source: CellSource;
  /** Measurements in the cell (0 for interpolated cells). */
  readonly count: number;
}

type QBuild = { readonly ok: true; readonly table: QTable; readonly cells: readonly QCell[] } | { readonly ok: false; readonly errors: readonly string[] };

/** Largest distance of a measured f = K / N from the grid column it counts for. */
export const F_TOLERANCE = 0.005;

/** Cached fraction of a measurement, K clipped to [0, N] as the estimator does. */
export function cachedFraction(n: number, k: number): number {
  return Math.min(Math.max(k, 0), n) / n;
}

function distinctSorted(xs: Iterable<number>): number[] {
  return [...new Set(xs)].sort((a, b) => a - b);
}

/**
 * Cluster measured fractions: sorted, a new column starts where a fraction
 * lies more than `tolerance` above the column's smallest. Each column is
 * named by its most frequent exact fraction (ties: the smaller), so a column
 * is always a fraction some measurement actually had.
 */
function fColumns(fs: readonly number[], tolerance: number): number[] {
  const sorted = [...fs].sort((a, b) => a - b);
  const out: number[] = [];
  let at = 0;
  while (at < sorted.length) {
    const first = sorted[at] as number;
    const counts = new Map<number, number>();
    while (at < sorted.length && (sorted[at] as number) - first <= tolerance) {
      const f = sorted[at] as number;
      counts.set(f, (counts.get(f) ?? 0) + 1);
      at++;
    }
    let best = first;
    let bestCount = 0;
    for (const [f, c] of counts) if (c > bestCount) [best, bestCount] = [f, c];
    out.push(best);
  }
  return out;
}

/** Index of the grid column nearest f within the tolerance, or undefined. */
function columnOf(fGrid: readonly number[], f: number, tolerance: number): number | undefined {
  let best: number | undefined;
  let bestD = Infinity;
  fGrid.forEach((g, j) => {
    const d = Math.abs(g - f);
    if (d <= tolerance && d < bestD) [best, bestD] = [j, d];
  });
  return best;
}

/** The design grid of a set of no-contention measurements (exact coordinates). */
export function designGrid(ms: readonly QMeasurement[]): { nGrid: number[]; fGrid: number[] } {
  return {
    nGrid: distinctSorted(ms.map((m) => m.n)),
    fGrid: fColumns(ms.map((m) => cachedFraction(m.n, m.k)), F_TOLERANCE),
  };
}

/**
 * Linear interpolation at index i of a line of cells between the nearest
 * known cells on both sides, or undefined when one side has none.
 */
function between(line: readonly (number | undefined)[], grid: readonly number[], i: number): number | undefined {
  let lo = i - 1;
  while (lo >= 0 && line[lo] === undefined) lo--;
  let hi = i + 1;
  while (hi < line.length && line[hi] === undefined) hi++;
  if (lo < 0 || hi >= line.length) return undefined;
  const a = grid[lo] as number;
  const b = grid[hi] as number;
  const t = ((grid[i] as number) - a) / (b - a);
  return (1 - t) * (line[lo] as number) + t * (line[hi] as number);
}

/** The table on `grid` (`designGrid` of the measurements, or of a larger set they belong to). */
export function buildQTable(measurements: readonly QMeasurement[], grid: { readonly nGrid: readonly number[]; readonly fGrid: readonly number[] }): QBuild {
  const nGrid = [...grid.nGrid];
  const fGrid = [...grid.fGrid];
  const errors: string[] = [];
  if (nGrid.length < 2) errors.push(`Q table needs at least 2 prompt lengths, has ${nGrid.length} (${nGrid.join(', ')})`);
  if (fGrid.length < 2) errors.push(`Q table needs at least 2 cached fractions, has ${fGrid.length} (${fGrid.join(', ')})`);
  if (fGrid[0] !== 0) errors.push(`Q table needs a no-contention measurement at f = 0 (the cache-blind estimator reads Q(N, 0)); lowest f is ${String(fGrid[0])}`);
  if (nGrid.some((n) => !(n > 0))) errors.push('Q table prompt lengths must be positive');
  if (fGrid.some((f) => !(f >= 0 && f <= 1))) errors.push('Q table cached fractions must lie in [0, 1]');
  if (errors.length > 0) return { ok: false, errors };

  const nIndex = new Map(nGrid.map((n, i) => [n, i]));
  const bins: number[][][] = nGrid.map(() => fGrid.map(() => []));
  for (const m of measurements) {
    // A measurement off the grid is left out.
    const i = nIndex.get(m.n);
    const j = columnOf(fGrid, cachedFraction(m.n, m.k), F_TOLERANCE);
    if (i !== undefined && j !== undefined) (bins[i]?.[j] as number[]).push(m.ttftMs);
  }

  nGrid.forEach((n, i) => {
    if ((bins[i] as number[][]).every((c) => c.length === 0)) errors.push(`Q table row N = ${n} has no measurement`);
  });
  fGrid.forEach((f, j) => {
    if (bins.every((row) => (row[j] as number[]).length === 0)) errors.push(`Q table column f = ${f} has no measurement`);
  });
  if (errors.length > 0) return { ok: false, errors };

  const values: (number | undefined)[][] = bins.map((row) => row.map((c) => (c.length === 0 ? undefined : median(c))));
  const source: CellSource[][] = bins.map((row) => row.map(() => 'measured'));
  for (;;) {
    let changed = false;
    // Along N, within each f column, from the cells known at the start of the pass.
    const byN = values.map((row) => [...row]);
    for (let j = 0; j < fGrid.length; j++) {
      const column = values.map((row) => row[j]);
      for (let i = 0; i < nGrid.length; i++) {
        if (column[i] !== undefined) continue;
        const v = between(column, nGrid, i);
        if (v !== undefined) {
          (byN[i] as (number | undefined)[])[j] = v;
          (source[i] as CellSource[])[j] = 'interpolated_n';
          changed = true;
        }
      }
    }
    // Then along f, within each N row.
    for (let i = 0; i < nGrid.length; i++) {
      const row = byN[i] as (number | undefined)[];
      const known = [...row];
      for (let j = 0; j < fGrid.length; j++) {
        if (known[j] !== undefined) continue;
        const v = between(known, fGrid, j);
        if (v !== undefined) {
          row[j] = v;
          (source[i] as CellSource[])[j] = 'interpolated_f';
          changed = true;
        }
      }
    }
    for (let i = 0; i < nGrid.length; i++) values[i] = byN[i] as (number | undefined)[];
    if (!changed) break;
  }

  const cells: QCell[] = [];
  nGrid.forEach((n, i) =>
    fGrid.forEach((f, j) => {
      const v = values[i]?.[j];
      if (v === undefined) errors.push(`Q table cell (N = ${n}, f = ${f}) has no measurement and no measured neighbours on both sides to interpolate from`);
      else if (!(Number.isFinite(v) && v > 0)) errors.push(`Q table cell (N = ${n}, f = ${f}) = ${v} is not a positive time`);
      else cells.push({ n, f, valueMs: v, source: source[i]?.[j] ?? 'measured', count: bins[i]?.[j]?.length ?? 0 });
    }),
  );
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, table: { nGrid, fGrid, valuesMs: values.map((row) => row.map((v) => v as number)), clampN: false, clampF: false }, cells };
}
