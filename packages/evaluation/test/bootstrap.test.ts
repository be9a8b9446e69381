// The session bootstrap on cases that can be checked by hand.
import { describe, expect, it } from 'vitest';
import { mulberry32, streamFor } from '@vantage/random';
import { quantileSorted } from '@vantage/fitting';
import { bootstrapDifference, isPaired, type Unit } from '../src/bootstrap';

interface V extends Unit {
  readonly x: number;
}

const meanX = (us: readonly V[]): number => us.reduce((s, u) => s + u.x, 0) / us.length;

/** n units with values drawn from N(mu, sd) (Box-Muller on the seeded generator). */
function normalUnits(n: number, mu: number, sd: number, seed: number, keyed: boolean): V[] {
  const r = mulberry32(seed);
  const out: V[] = [];
  for (let i = 0; i < n; i++) {
    const z = Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
    out.push({ matchKey: keyed ? `k${i}` : null, x: mu + sd * z });
  }
  return out;
}

function popSd(xs: readonly number[]): number {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / xs.length);
}

describe('quantiles (type 7)', () => {
  it('interpolates between order statistics', () => {
    expect(quantileSorted([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantileSorted([1, 2, 3, 4], 0.9)).toBeCloseTo(3.7, 12);
    expect(quantileSorted([10], 0.9)).toBe(10);
    expect(quantileSorted([1, 2, 3, 4], 0)).toBe(1);
    expect(quantileSorted([1, 2, 3, 4], 1)).toBe(4);
    expect(Number.isNaN(quantileSorted([], 0.5))).toBe(true);
  });
});

describe('bootstrapDifference', () => {
  it('a constant shift on matched sessions gives exactly that shift, with a zero-width paired interval', () => {
    const base = normalUnits(12, 1000, 200, 1, true);
    const shifted = base.map((u) => ({ matchKey: u.matchKey, x: u.x + 100 }));
    expect(isPaired(shifted, base)).toBe(true);
    const r = bootstrapDifference(shifted, base, meanX, { iterations: 500, confidence: 0.95, rand: mulberry32(3) });
    expect(r.method).toBe('paired');
    expect(r.estimate).toBeCloseTo(100, 9);
    expect(r.lo).toBeCloseTo(100, 9);
    expect(r.hi).toBeCloseTo(100, 9);
    expect(r.validIterations).toBe(500);
  });

  it('covers a known shift, and its width matches the normal-theory width of a difference of means', () => {
    const n = 60;
    const sd = 100;
    const a = normalUnits(n, 1150, sd, 21, false);
    const b = normalUnits(n, 1000, sd, 22, false);
    const r = bootstrapDifference(a, b, meanX, { iterations: 4000, confidence: 0.95, rand: mulberry32(5) });
    expect(r.method).toBe('independent');
    expect(r.estimate).toBeCloseTo(meanX(a) - meanX(b), 9);
    // Coverage of the known shift is a property of many samples, not of one: 95 % intervals over 40
    // seeded sample pairs must cover it about 38 times (34 or more; an interval half as wide covers ~26).
    let covered = 0;
    for (let k = 0; k < 40; k++) {
      const ka = normalUnits(n, 1150, sd, 100 + 2 * k, false);
      const kb = normalUnits(n, 1000, sd, 101 + 2 * k, false);
      const c = bootstrapDifference(ka, kb, meanX, { iterations: 1000, confidence: 0.95, rand: mulberry32(k) });
      if ((c.lo as number) < 150 && (c.hi as number) > 150) covered++;
    }
    expect(covered).toBeGreaterThanOrEqual(34);
    // By hand: 2 * 1.96 * sqrt(sa^2/n + sb^2/n) with the samples' plug-in (population) sds.
    const expected = 2 * 1.96 * Math.sqrt(popSd(a.map((u) => u.x)) ** 2 / n + popSd(b.map((u) => u.x)) ** 2 / n);
    const width = (r.hi as number) - (r.lo as number);
    expect(width / expected).toBeGreaterThan(0.94);
    expect(width / expected).toBeLessThan(1.06);
    // Each tail on its own: 1.96 standard errors either side of the estimate (α/2 in each tail).
    expect((r.estimate - (r.lo as number)) / (expected / 2)).toBeGreaterThan(0.88);
    expect(((r.hi as number) - r.estimate) / (expected / 2)).toBeGreaterThan(0.88);
    expect((r.estimate - (r.lo as number)) / (expected / 2)).toBeLessThan(1.12);
    expect(((r.hi as number) - r.estimate) / (expected / 2)).toBeLessThan(1.12);
  });

  it('narrows as sessions are added (about 1/sqrt(n))', () => {
    const width = (n: number): number => {
      const r = bootstrapDifference(normalUnits(n, 1100, 100, 31, false), normalUnits(n, 1000, 100, 32, false), meanX, {
        iterations: 2000,
        confidence: 0.95,
        rand: mulberry32(9),
      });
      return (r.hi as number) - (r.lo as number);
    };
    const w20 = width(20);
    const w80 = width(80);
    const w320 = width(320);
    expect(w80).toBeLessThan(w20);
    expect(w320).toBeLessThan(w80);
    expect(w20 / w320).toBeGreaterThan(2.5);
    expect(w20 / w320).toBeLessThan(6);
  });

  it('is reproducible from its seed and changes with it', () => {
    const a = normalUnits(30, 1050, 100, 41, false);
    const b = normalUnits(30, 1000, 100, 42, false);
    const run = (seed: number) => bootstrapDifference(a, b, meanX, { iterations: 1000, confidence: 0.95, rand: streamFor(seed, 'x') });
    expect(run(7)).toEqual(run(7));
    expect(run(7).lo).not.toBe(run(8).lo);
  });

  it('pairs only identical key sets, and drops undefined replicates', () => {
    const a = normalUnits(5, 0, 1, 1, true);
    expect(isPaired(a, a.slice(0, 4))).toBe(false);
    expect(isPaired(a, normalUnits(5, 0, 1, 2, false))).toBe(false);
    // A statistic undefined whenever unit k0 is missing from the resample.
    const stat = (us: readonly V[]): number => (us.some((u) => u.matchKey === 'k0') ? meanX(us) : NaN);
    const r = bootstrapDifference(a, a, stat, { iterations: 400, confidence: 0.9, rand: mulberry32(1) });
    // P(k0 drawn at least once in 5 draws) = 1 - 0.8^5 = 0.672: fewer than 90 % defined, so no interval.
    expect(r.validIterations).toBeGreaterThan(220);
    expect(r.validIterations).toBeLessThan(320);
    expect(r.lo).toBeNull();
    expect(() => bootstrapDifference(a, a, meanX, { iterations: 0, confidence: 0.95, rand: mulberry32(1) })).toThrow(RangeError);
  });
});
