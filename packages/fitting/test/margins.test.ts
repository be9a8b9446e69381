// Margins: nearest-rank p90 across conditions of each condition's largest
// absolute error in predicted advantage, on a hand-computed example.
import { describe, expect, it } from 'vitest';
import type { ModelParameters } from '@vantage/rules';
import { calibrateMargin } from '../src/margins';
import type { CalibrationPair, CalibrationRow } from '../src/rows';
import { percentileNearestRank } from '../src/stats';

function flatModel(name: string, ms: number): ModelParameters {
  return {
    name,
    qTable: { nGrid: [1, 100_000], fGrid: [0, 1], valuesMs: [[ms, ms], [ms, ms]], clampN: false, clampF: false },
    standardization: { logN: { mean: 0, sd: 1 }, logR: { mean: 0, sd: 1 }, logP: { mean: 0, sd: 1 } },
    blind: { b0: 0, bN: 0, bR: 0, bP: 0 },
    cache: { c0: 0, cN: 0, cR: 0, cP: 0 },
  };
}
// Predicted advantage is always 1000 - 400 = 600 ms.
const models = { efficient: flatModel('e', 1000), capable: flatModel('c', 400) };

function pair(conditionId: string, repeat: number, measuredAdvantage: number, p: number | null = 0): CalibrationPair {
  const row = (role: 'efficient' | 'capable', ttftMs: number): CalibrationRow => ({
    line: 0, requestId: '', conditionId, repeat, role, model: role[0] as string, n: 5000, k: 0, r: 1, p, ttftMs, noBackgroundLoad: false, noContention: false,
  });
  return { conditionId, repeat, proposal: 'efficient', efficient: row('efficient', 1000 + measuredAdvantage), capable: row('capable', 1000) };
}

describe('percentileNearestRank', () => {
  const xs = [15, 20, 35, 40, 50];
  it.each([
    [0.05, 15],
    [0.3, 20],
    [0.4, 20],
    [0.5, 35],
    [0.9, 50],
    [1, 50],
  ])('p%s of [15, 20, 35, 40, 50] = %s', (q, v) => expect(percentileNearestRank(xs, q)).toBe(v));
  it('p90 of 1..10 is 9 (rank ceil(0.9 * 10) = 9, not interpolated)', () => {
    expect(percentileNearestRank([10, 9, 8, 7, 6, 5, 4, 3, 2, 1], 0.9)).toBe(9);
    expect(percentileNearestRank(Array.from({ length: 20 }, (_, i) => i + 1), 0.9)).toBe(18);
  });
});

describe('calibrateMargin', () => {
  it('takes each condition’s largest error, then the p90 across conditions', () => {
    // Measured advantages per condition; |600 - measured| in comments.
    const pairs = [
      pair('c01', 0, 590), pair('c01', 1, 630), // 10, 30 -> 30
      pair('c02', 0, 600), //                       0 -> 0
      pair('c03', 0, 650), //                      50 -> 50
      pair('c04', 0, 520), pair('c04', 1, 700), // 80, 100 -> 100
      pair('c05', 0, 610), //                      10 -> 10
      pair('c06', 0, 560), //                      40 -> 40
      pair('c07', 0, 300), //                     300 -> 300 (the worst condition)
      pair('c08', 0, 580), pair('c08', 1, 605), // 20, 5 -> 20
      pair('c09', 0, 670), //                      70 -> 70
      pair('c10', 0, 540), //                      60 -> 60
    ];
    const m = calibrateMargin(pairs, models, 'cache');
    expect(m.perCondition.map((c) => c.maxAbsErrorMs)).toEqual([30, 0, 50, 100, 10, 40, 300, 20, 70, 60]);
    // Sorted: 0 10 20 30 40 50 60 70 100 300; nearest rank 9 of 10 -> 100.
    expect(m.marginMs).toBe(100);
    expect(m.pairErrors).toHaveLength(13);
    expect(m.perCondition.find((c) => c.conditionId === 'c04')?.pairs).toBe(2);
  });

  it('leaves out pairs whose prediction fails and counts why', () => {
    const m = calibrateMargin([pair('a', 0, 600), pair('b', 0, 0, null)], models, 'blind');
    expect(m.excluded).toEqual({ efficient_invalid: 1 });
    expect(m.perCondition.map((c) => c.conditionId)).toEqual(['a']);
    expect(m.marginMs).toBe(0);
  });

  it('refuses when no condition is usable', () => {
    expect(() => calibrateMargin([pair('b', 0, 0, null)], models, 'blind')).toThrow(/no workload condition/);
  });
});
