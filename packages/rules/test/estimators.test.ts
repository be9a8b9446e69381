import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { lookupQ, predictBlind, predictCache, standardize, type QTable } from '@vantage/rules';
import { CAP_ROWS, CAPABLE, EFF_ROWS, EFFICIENT, model } from './fixtures';

const table: QTable = {
  nGrid: [1000, 3000, 5000],
  fGrid: [0, 0.5, 1],
  valuesMs: EFF_ROWS,
  clampN: false,
  clampF: false,
};

function q(t: QTable, n: number, f: number): number {
  const r = lookupQ(t, n, f);
  if (!r.ok) throw new Error(r.message);
  return r.valueMs;
}

describe('lookupQ: bilinear interpolation', () => {
  it('reproduces every grid point exactly', () => {
    table.nGrid.forEach((n, i) =>
      table.fGrid.forEach((f, j) => expect(q(table, n, f)).toBe(table.valuesMs[i]?.[j])),
    );
  });

  it('is exact on grid points of an irregular table with awkward values', () => {
    const t: QTable = {
      nGrid: [7, 333, 4097.5],
      fGrid: [0, 0.1, 0.7, 1],
      valuesMs: [
        [0.1, 0.2, 0.3, 0.7],
        [11.1, 13.3, 17.7, 19.9],
        [1e5 / 3, 1e4 / 7, 123.456, 1 / 3],
      ],
      clampN: false,
      clampF: false,
    };
    t.nGrid.forEach((n, i) => t.fGrid.forEach((f, j) => expect(q(t, n, f)).toBe(t.valuesMs[i]?.[j])));
  });

  it('is linear along the N edges (f fixed at a grid value)', () => {
    fc.assert(
      fc.property(fc.double({ min: 1000, max: 3000, noNaN: true }), fc.constantFrom(0, 0.5, 1), (n, f) => {
        const j = table.fGrid.indexOf(f);
        const a = table.valuesMs[0]?.[j] as number;
        const b = table.valuesMs[1]?.[j] as number;
        const t = (n - 1000) / 2000;
        expect(q(table, n, f)).toBeCloseTo(a + (b - a) * t, 9);
      }),
      { seed: 4242, numRuns: 200 },
    );
  });

  it('is linear along the f edges (N fixed at a grid value)', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.5, max: 1, noNaN: true }), (f) => {
        // Row N = 5000: 1200 at f = 0.5, 400 at f = 1.
        expect(q(table, 5000, f)).toBeCloseTo(1200 + (400 - 1200) * ((f - 0.5) / 0.5), 9);
      }),
      { seed: 4243, numRuns: 200 },
    );
  });

  it('matches a hand computation at an interior point', () => {
    // N = 2000 is halfway between 1000 and 3000; f = 0.25 halfway between 0 and 0.5.
    // Row 1000: (800 + 600) / 2 = 700.  Row 3000: (1200 + 800) / 2 = 1000.  Mean: 850.
    expect(q(table, 2000, 0.25)).toBe(850);
    // N = 4500: t = 0.75 between 3000 and 5000; f = 0.9: t = 0.8 between 0.5 and 1.
    // Row 3000: 0.2*800 + 0.8*400 = 480.  Row 5000: 0.2*1200 + 0.8*400 = 560.
    // 0.25*480 + 0.75*560 = 540.
    expect(q(table, 4500, 0.9)).toBeCloseTo(540, 9);
  });

  it.each([
    [999, 0, 'out_of_range'],
    [5001, 0, 'out_of_range'],
    [0, 0, 'out_of_range'],
    [2000, -0.01, 'out_of_range'],
    [2000, 1.01, 'out_of_range'],
    [Number.NaN, 0, 'invalid'],
    [Number.POSITIVE_INFINITY, 0, 'invalid'],
  ] as const)('refuses N=%s f=%s as %s rather than extrapolating', (n, f, problem) => {
    const r = lookupQ(table, n, f);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problem).toBe(problem);
  });

  it('clamps an axis only when the table declares it', () => {
    const clampedN = { ...table, clampN: true };
    expect(q(clampedN, 10, 0)).toBe(800);
    expect(q(clampedN, 1e9, 0.5)).toBe(1200);
    expect(lookupQ(clampedN, 2000, 1.5).ok).toBe(false);
    const short: QTable = { ...table, fGrid: [0, 0.5, 0.9], clampF: true };
    expect(q(short, 1000, 0.99)).toBe(400);
    expect(lookupQ({ ...short, clampF: false }, 1000, 0.99).ok).toBe(false);
  });

  it('rejects a table whose values do not match its grids', () => {
    const r = lookupQ({ ...table, valuesMs: [[1, 2, 3]] }, 2000, 0.2);
    expect(r).toMatchObject({ ok: false, problem: 'invalid' });
  });
});

describe('standardize', () => {
  it('computes (log(1 + x) - mean) / sd', () => {
    expect(standardize(0, { mean: 0, sd: 1 })).toBe(0);
    expect(standardize(Math.E - 1, { mean: 0, sd: 1 })).toBeCloseTo(1, 15);
    expect(standardize(4, { mean: 0, sd: Math.log1p(4) })).toBe(1);
    expect(standardize(99, { mean: Math.log(100), sd: 2 })).toBeCloseTo(0, 15);
    expect(standardize(9999, { mean: Math.log(100), sd: 2 })).toBeCloseTo(Math.log(100) / 2, 12);
  });

  it('keeps precision for small counts (log1p, not log(1 + x))', () => {
    expect(standardize(1e-12, { mean: 0, sd: 1e-12 })).toBeCloseTo(1, 9);
  });
});

describe('predictors', () => {
  const eff = model(EFFICIENT, EFF_ROWS);
  const cap = model(CAPABLE, CAP_ROWS);

  it('T_blind = Q(N, 0) + b0 + bN zN + bR zR + bP zP', () => {
    // Q(2000, 0) = 1000; zN = 0; zR = 1 at R = 4; bP = 0.
    expect(predictBlind(eff, { n: 2000, k: 1900, r: 4, p: 3 })).toEqual({
      ok: true,
      ms: 1400,
      baseMs: 1000,
      correctionMs: 400,
      f: 0,
    });
    // K is ignored: the blind estimator assumes no reusable prefix.
    expect(predictBlind(eff, { n: 2000, k: 0, r: 4, p: 3 })).toEqual(predictBlind(eff, { n: 2000, k: 2000, r: 4, p: 3 }));
    // Every coefficient contributes.
    const withAll = model(EFFICIENT, EFF_ROWS, { blind: { b0: 1, bN: 2, bR: 3, bP: 4 } });
    const x = { n: 4000, k: 0, r: 2, p: 0.5 };
    const s = withAll.standardization;
    const expected =
      1600 + 1 + 2 * standardize(4000, s.logN) + 3 * standardize(2, s.logR) + 4 * standardize(0.5, s.logP);
    const got = predictBlind(withAll, x);
    expect(got.ok && got.ms).toBeCloseTo(expected, 9);
  });

  it('T_cache = Q(N, K/N) + c0 + cN zN + cR zR + cP zP, K clipped to [0, N]', () => {
    // Q(2000, 0.25) = 850; zN = 0; zR = 0 at R = 0.
    expect(predictCache(eff, { n: 2000, k: 500, r: 0, p: 0 })).toMatchObject({ ok: true, ms: 950, baseMs: 850, f: 0.25 });
    expect(predictCache(eff, { n: 2000, k: 5000, r: 0, p: 0 })).toMatchObject({ ok: true, f: 1, baseMs: 400 });
    expect(predictCache(eff, { n: 2000, k: -5, r: 0, p: 0 })).toMatchObject({ ok: true, f: 0, baseMs: 1000 });
    expect(predictCache(cap, { n: 3000, k: 1500, r: 0, p: 0 })).toMatchObject({ ok: true, baseMs: 600 });
  });

  it.each([
    ['N = 0', { n: 0, k: 0, r: 0, p: 0 }, 'invalid'],
    ['negative N', { n: -1, k: 0, r: 0, p: 0 }, 'invalid'],
    ['NaN R', { n: 2000, k: 0, r: Number.NaN, p: 0 }, 'invalid'],
    ['negative P', { n: 2000, k: 0, r: 0, p: -1 }, 'invalid'],
    ['infinite P', { n: 2000, k: 0, r: 0, p: Number.POSITIVE_INFINITY }, 'invalid'],
    ['N beyond the grid', { n: 6000, k: 0, r: 0, p: 0 }, 'out_of_range'],
    ['N below the grid', { n: 500, k: 0, r: 0, p: 0 }, 'out_of_range'],
  ] as const)('refuses %s', (_name, x, problem) => {
    expect(predictBlind(eff, x)).toMatchObject({ ok: false, problem });
    expect(predictCache(eff, x)).toMatchObject({ ok: false, problem });
  });

  it('refuses a non-positive prediction instead of returning it', () => {
    const negative = model(EFFICIENT, EFF_ROWS, { blind: { b0: -1000, bN: 0, bR: 0, bP: 0 } });
    expect(predictBlind(negative, { n: 2000, k: 0, r: 0, p: 0 })).toMatchObject({ ok: false, problem: 'invalid' });
    const zero = model(EFFICIENT, EFF_ROWS, { cache: { c0: -1000, cN: 0, cR: 0, cP: 0 } });
    expect(predictCache(zero, { n: 2000, k: 0, r: 0, p: 0 })).toMatchObject({ ok: false, problem: 'invalid' });
  });

  it('refuses a non-finite prediction', () => {
    const huge = model(EFFICIENT, EFF_ROWS, { blind: { b0: 0, bN: 0, bR: Number.MAX_VALUE, bP: Number.MAX_VALUE } });
    expect(predictBlind(huge, { n: 2000, k: 0, r: 1e6, p: 1e6 })).toMatchObject({ ok: false, problem: 'invalid' });
  });
});
