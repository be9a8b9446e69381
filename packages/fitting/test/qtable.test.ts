// Q tables: medians at grid points, holes filled along the grid, refusals,
// and the round trip through @vantage/rules' lookupQ and parameter-set validation.
import { describe, expect, it } from 'vitest';
import { DEFAULT_PARAMETER_SET, lookupQ, validateParameterSet } from '@vantage/rules';
import { buildQTable as buildOn, designGrid, type QMeasurement } from '../src/qtable';

/** Bilinear in (N, f): bilinear interpolation reproduces it exactly. */
const q = (n: number, f: number): number => 20 + 0.03 * n - 0.025 * n * f + 5 * f;
const N = [1000, 2000, 8000, 32000];
const F = [0, 0.25, 0.5, 0.9];

function grid(skip: (n: number, f: number) => boolean = () => false): QMeasurement[] {
  const out: QMeasurement[] = [];
  for (const n of N) for (const f of F) if (!skip(n, f)) out.push({ n, k: Math.round(n * f), ttftMs: q(n, f) });
  return out;
}

/** The table on the measurements' own design grid, or on the grid given. */
const buildQTable = (ms: readonly QMeasurement[], grid = designGrid(ms)): ReturnType<typeof buildOn> => buildOn(ms, grid);

describe('buildQTable', () => {
  it('uses the design grid and is exact at grid points and bilinear inside', () => {
    const b = buildQTable(grid());
    if (!b.ok) throw new Error(b.errors.join('; '));
    expect(b.table.nGrid).toEqual(N);
    expect(b.table.fGrid).toEqual(F);
    for (const n of N) for (const f of F) expect(lookupQ(b.table, n, f)).toEqual({ ok: true, valueMs: b.table.valuesMs[N.indexOf(n)]?.[F.indexOf(f)] });
    const mid = lookupQ(b.table, 5000, 0.4);
    expect(mid.ok && mid.valueMs).toBeCloseTo(q(5000, 0.4), 9);
    expect(lookupQ(b.table, 40000, 0).ok).toBe(false);
  });

  it('takes the median of a cell, so one slow repeat does not move it', () => {
    const ms = grid().concat([
      { n: 1000, k: 0, ttftMs: q(1000, 0) },
      { n: 1000, k: 0, ttftMs: q(1000, 0) + 5000 },
    ]);
    const b = buildQTable(ms);
    if (!b.ok) throw new Error(b.errors.join('; '));
    expect(b.table.valuesMs[0]?.[0]).toBeCloseTo(q(1000, 0), 9);
    expect(b.cells.find((c) => c.n === 1000 && c.f === 0)?.count).toBe(3);
  });

  it('rounds block-aligned fractions onto the designed column', () => {
    const ms = grid().map((m) => (m.n === 2000 && m.k === 500 ? { ...m, k: 496 } : m));
    const b = buildQTable(ms);
    if (!b.ok) throw new Error(b.errors.join('; '));
    expect(b.table.fGrid).toEqual(F);
  });

  it('fills interior holes by interpolation along N, then along f, and the result round-trips', () => {
    const holes = new Set(['2000|0.25', '8000|0.5', '32000|0.25']);
    const b = buildQTable(grid((n, f) => holes.has(`${n}|${f}`)));
    if (!b.ok) throw new Error(b.errors.join('; '));
    const src = (n: number, f: number): string | undefined => b.cells.find((c) => c.n === n && c.f === f)?.source;
    expect(src(2000, 0.25)).toBe('interpolated_n');
    expect(src(8000, 0.5)).toBe('interpolated_n');
    // Last N row: no neighbour above, so along f between 0 and 0.5.
    expect(src(32000, 0.25)).toBe('interpolated_f');
    // q is bilinear, so interpolated holes carry its exact values.
    for (const [n, f] of [[2000, 0.25], [8000, 0.5], [32000, 0.25]] as const) {
      const v = lookupQ(b.table, n, f);
      expect(v.ok && v.valueMs).toBeCloseTo(q(n, f), 9);
    }
    const set = validateParameterSet({ ...DEFAULT_PARAMETER_SET, models: { ...DEFAULT_PARAMETER_SET.models, efficient: { ...DEFAULT_PARAMETER_SET.models.efficient, qTable: b.table } } });
    expect(set.ok).toBe(true);
  });

  it('refuses a corner hole rather than extrapolating', () => {
    const b = buildQTable(grid((n, f) => n === 32000 && f === 0.9), { nGrid: N, fGrid: F });
    expect(b.ok).toBe(false);
    if (!b.ok) expect(b.errors.join()).toMatch(/N = 32000, f = 0.9/);
  });

  it('refuses an empty grid row or column', () => {
    const b = buildQTable(grid((n) => n === 8000), { nGrid: N, fGrid: F });
    expect(!b.ok && b.errors).toEqual(['Q table row N = 8000 has no measurement']);
    const c = buildQTable(grid((_, f) => f === 0.5), { nGrid: N, fGrid: F });
    expect(!c.ok && c.errors).toEqual(['Q table column f = 0.5 has no measurement']);
  });

  it('refuses a table without f = 0 (the blind estimator reads Q(N, 0))', () => {
    const b = buildQTable(grid((_, f) => f === 0));
    expect(b.ok).toBe(false);
    if (!b.ok) expect(b.errors.join()).toMatch(/f = 0/);
  });

  it('keeps grid coordinates exact: f = 63/64 names its column and K/N up to 63/64 is in range', () => {
    const f63 = 63 / 64;
    const ns = [4096, 8192, 16384];
    const ms: QMeasurement[] = [];
    for (const n of ns) for (const f of [0, 0.5, 0.875, f63]) ms.push({ n, k: n * f, ttftMs: q(n, f) });
    const b = buildQTable(ms);
    if (!b.ok) throw new Error(b.errors.join('; '));
    expect(b.table.fGrid).toEqual([0, 0.5, 0.875, f63]);
    for (const n of ns) {
      const v = lookupQ(b.table, n, (n * f63) / n);
      expect(v.ok, `N ${n}, K = 63 N / 64`).toBe(true);
      expect(lookupQ(b.table, n, 0.98).ok, `N ${n}, K/N 0.98`).toBe(true);
      expect(v.ok && v.valueMs).toBeCloseTo(q(n, f63), 9);
    }
    // A measurement a 16-token block off the design still lands on the designed column, which keeps its exact name.
    const off = buildQTable(ms.concat([{ n: 8192, k: 8192 * f63 - 16, ttftMs: q(8192, f63) }]));
    if (!off.ok) throw new Error(off.errors.join('; '));
    expect(off.table.fGrid).toEqual([0, 0.5, 0.875, f63]);
    expect(off.cells.find((c) => c.n === 8192 && c.f === f63)?.count).toBe(2);
  });
});
