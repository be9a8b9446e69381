// Grouped splits: no workload condition ever appears in two splits
// (property test with a fixed seed), and determinism.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pairRows, type CalibrationRow } from '../src/rows';
import { allocate, applySplit, SPLIT_NAMES, splitConditions } from '../src/splits';

function row(conditionId: string, repeat: number, role: 'efficient' | 'capable', idle: boolean): CalibrationRow {
  return {
    line: 0,
    requestId: `${conditionId}/${repeat}/${role}`,
    conditionId,
    repeat,
    role,
    model: role === 'efficient' ? 'e' : 'c',
    n: 1000,
    k: 0,
    r: idle ? 0 : 2,
    p: 0,
    ttftMs: 100,
    noBackgroundLoad: idle,
    noContention: idle,
  };
}

const arbRows = fc
  .array(fc.record({ id: fc.string({ minLength: 1, maxLength: 6 }), repeats: fc.integer({ min: 1, max: 4 }), idle: fc.boolean() }), { minLength: 1, maxLength: 40 })
  .map((conds) => {
    const seen = new Set<string>();
    const rows: CalibrationRow[] = [];
    for (const c of conds) {
      if (seen.has(c.id)) continue;
      seen.add(c.id);
      for (let r = 0; r < c.repeats; r++) for (const role of ['efficient', 'capable'] as const) rows.push(row(c.id, r, role, c.idle));
    }
    return rows;
  });

const arbFractions = fc
  .tuple(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 8 }))
  .map(([a, b, c]) => ({ fitting: a / (a + b + c), uncertainty: b / (a + b + c), selection: 1 - a / (a + b + c) - b / (a + b + c) }));

describe('splitConditions', () => {
  it('never puts a condition in two splits, and places every row and pair exactly once', () => {
    fc.assert(
      fc.property(arbRows, arbFractions, fc.nat(), (rows, fractions, seed) => {
        const split = splitConditions(rows, fractions, seed);
        const byRows = applySplit(rows, split);
        const byPairs = applySplit(pairRows(rows).pairs, split);
        for (const s of SPLIT_NAMES) for (const x of [...byRows[s], ...byPairs[s]]) expect(split[s]).toContain(x.conditionId);
        expect(SPLIT_NAMES.reduce((n, s) => n + byRows[s].length, 0)).toBe(rows.length);
        const ids = SPLIT_NAMES.flatMap((s) => [...split[s]]);
        expect(new Set(ids).size).toBe(ids.length);
        expect(new Set(ids)).toEqual(new Set(rows.map((r) => r.conditionId)));
      }),
      { seed: 20240601, numRuns: 300 },
    );
  });

  it('never puts a Q-set condition in any split, and splits every contention condition exactly once', () => {
    const withQ = arbRows.chain((rows) =>
      fc.array(fc.boolean(), { minLength: rows.length, maxLength: rows.length }).map((flags) => {
        // Q set decided per condition (by its first row's flag), only among idle conditions.
        const q = new Map<string, boolean>();
        rows.forEach((r, i) => {
          if (!q.has(r.conditionId)) q.set(r.conditionId, r.noBackgroundLoad && (flags[i] as boolean));
        });
        return rows.map((r) => (q.get(r.conditionId) === true ? { ...r, conditionId: `q/${r.conditionId}`, qSet: true } : r));
      }),
    );
    fc.assert(
      fc.property(withQ, arbFractions, fc.nat(), (rows, fractions, seed) => {
        const split = splitConditions(rows, fractions, seed);
        const ids = SPLIT_NAMES.flatMap((s) => [...split[s]]);
        const qIds = new Set(rows.filter((r) => r.qSet === true).map((r) => r.conditionId));
        const contention = new Set(rows.filter((r) => r.qSet !== true).map((r) => r.conditionId));
        for (const id of ids) expect(qIds.has(id)).toBe(false);
        expect(new Set(ids).size).toBe(ids.length);
        expect(new Set(ids)).toEqual(contention);
        const byRows = applySplit(rows, split);
        for (const s of SPLIT_NAMES) for (const r of byRows[s]) expect(split[s]).toContain(r.conditionId);
        for (const s of SPLIT_NAMES) for (const r of byRows[s]) expect(r.qSet).not.toBe(true);
        expect(SPLIT_NAMES.reduce((n, s) => n + byRows[s].length, 0)).toBe(rows.filter((r) => r.qSet !== true).length);
      }),
      { seed: 20261129, numRuns: 300 },
    );
  });

  it('a Q set leaves the contention split unchanged (same seed, same contention conditions)', () => {
    const rows: CalibrationRow[] = [];
    for (let i = 0; i < 12; i++) rows.push(row(`load${i}`, 0, 'efficient', false), row(`zero${i}`, 0, 'efficient', true));
    const q = Array.from({ length: 9 }, (_, i): CalibrationRow => ({ ...row(`nc${i}`, 0, 'capable', true), qSet: true }));
    expect(splitConditions([...rows, ...q], undefined, 11)).toEqual(splitConditions(rows, undefined, 11));
  });

  it('depends on the seed and the set of conditions, not on row order', () => {
    fc.assert(
      fc.property(arbRows, fc.nat(), (rows, seed) => {
        expect(splitConditions([...rows].reverse(), undefined, seed)).toEqual(splitConditions(rows, undefined, seed));
      }),
      { seed: 7, numRuns: 100 },
    );
  });

  it('splits idle and loaded conditions separately, each by the fractions', () => {
    const rows: CalibrationRow[] = [];
    for (let i = 0; i < 10; i++) rows.push(row(`idle${i}`, 0, 'efficient', true));
    for (let i = 0; i < 20; i++) rows.push(row(`load${i}`, 0, 'efficient', false));
    const s = splitConditions(rows, { fitting: 0.6, uncertainty: 0.2, selection: 0.2 }, 5);
    const count = (name: 'fitting' | 'uncertainty' | 'selection', prefix: string): number => s[name].filter((id) => id.startsWith(prefix)).length;
    expect([count('fitting', 'idle'), count('uncertainty', 'idle'), count('selection', 'idle')]).toEqual([6, 2, 2]);
    expect([count('fitting', 'load'), count('uncertainty', 'load'), count('selection', 'load')]).toEqual([12, 4, 4]);
    expect(splitConditions(rows, undefined, 6)).not.toEqual(s);
  });

  it('largest-remainder allocation adds up', () => {
    expect(allocate(7, { fitting: 0.6, uncertainty: 0.2, selection: 0.2 })).toEqual({ fitting: 4, uncertainty: 2, selection: 1 });
    expect(allocate(2, { fitting: 0.6, uncertainty: 0.2, selection: 0.2 })).toEqual({ fitting: 1, uncertainty: 1, selection: 0 });
  });

  it('refuses fractions that do not sum to 1', () => {
    expect(() => splitConditions([], { fitting: 0.5, uncertainty: 0.2, selection: 0.2 })).toThrow(/sum/);
  });
});
