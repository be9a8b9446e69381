// Threshold search: the seed's ranking (mean selected TTFT, then fewer
// overrides, then fewer terms) on hand-built pairs, and the simulated rule
// against @vantage/rules' decide on random pairs.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decide, DEFAULT_PARAMETER_SET, observed, type CandidateReport, type ParameterSet } from '@vantage/rules';
import type { WorkerId } from '@vantage/types';
import { estimatorRuleChoice } from '../src/margins';
import type { CalibrationPair, CalibrationRow } from '../src/rows';
import { countRuleChoice, rankCandidates, searchThresholds } from '../src/thresholds';

function pair(id: string, eff: { r: number; p: number | null; ttft: number; n?: number; k?: number }, cap: { r: number; p?: number | null; ttft: number; n?: number; k?: number }, proposal: 'efficient' | 'capable' = 'efficient'): CalibrationPair {
  const row = (role: 'efficient' | 'capable', x: { r: number; p?: number | null; ttft: number; n?: number; k?: number }): CalibrationRow => ({
    line: 0,
    requestId: `${id}-${role}`,
    conditionId: id,
    repeat: 0,
    role,
    model: role,
    n: x.n ?? 1000,
    k: x.k ?? 0,
    r: x.r,
    p: x.p === undefined ? 0 : x.p,
    ttftMs: x.ttft,
    noBackgroundLoad: false,
    noContention: false,
  });
  return { conditionId: id, repeat: 0, proposal, efficient: row('efficient', eff), capable: row('capable', cap) };
}

const LIMIT = 64;

describe('searchThresholds', () => {
  it('equal mean: the candidate with fewer overrides wins', () => {
    // Overriding a costs nothing and gains nothing; overriding b gains 100 ms.
    const pairs = [pair('a', { r: 1, p: 0, ttft: 100 }, { r: 0, ttft: 100 }), pair('b', { r: 3, p: 0, ttft: 300 }, { r: 0, ttft: 200 })];
    const s = searchThresholds(pairs, 'count', LIMIT);
    expect(s.table.map((c) => [c.r, c.meanSelectedTtftMs, c.overrides])).toEqual([
      [3, 150, 1],
      [1, 150, 2],
      [null, 200, 0],
    ]);
    expect(s.best.r).toBe(3);
    expect(s.stageMeanTtftMs).toBe(200);
  });

  it('equal mean and overrides: the candidate with fewer terms wins', () => {
    // P is the same everywhere, so p = 0.5 (P > 0.5) never triggers: (3, 0.5) selects what (3, off) does.
    const pairs = [pair('a', { r: 1, p: 0.5, ttft: 100 }, { r: 0, ttft: 150 }), pair('b', { r: 3, p: 0.5, ttft: 300 }, { r: 0, ttft: 200 })];
    const s = searchThresholds(pairs, 'count_prefill', LIMIT);
    expect(s.best).toMatchObject({ r: 3, p: null, overrides: 1, terms: 1, meanSelectedTtftMs: 150 });
    expect(s.table[1]).toMatchObject({ r: 3, p: 0.5, overrides: 1, terms: 2, meanSelectedTtftMs: 150 });
    expect(s.table).toHaveLength(3 * 2);
  });

  it('a lower mean beats fewer overrides and fewer terms', () => {
    const pairs = [
      pair('a', { r: 1, p: 3, ttft: 500 }, { r: 0, ttft: 200 }),
      pair('b', { r: 4, p: 0, ttft: 400 }, { r: 0, ttft: 200 }),
      pair('c', { r: 1, p: 0, ttft: 100 }, { r: 0, ttft: 200 }),
    ];
    const s = searchThresholds(pairs, 'count_prefill', LIMIT);
    // Only r = 4 OR p > 0 overrides exactly a and b.
    expect(s.best).toMatchObject({ r: 4, p: 0, overrides: 2, terms: 2 });
    expect(s.best.meanSelectedTtftMs).toBeCloseTo(500 / 3, 9);
  });

  it('keeps Stage when no threshold helps, and disabled is a candidate of each term', () => {
    const pairs = [pair('a', { r: 2, p: 1, ttft: 100 }, { r: 0, ttft: 300 })];
    const s = searchThresholds(pairs, 'count_prefill', LIMIT);
    expect(s.best).toMatchObject({ r: null, p: null, overrides: 0, terms: 0 });
    expect(s.table.some((c) => c.r === null && c.p === 1)).toBe(true);
  });

  it('leaves capable proposals, unknown P and a full destination alone', () => {
    expect(countRuleChoice(pair('a', { r: 9, p: 9, ttft: 1 }, { r: 0, ttft: 1 }, 'capable'), null, null, LIMIT)).toBe('capable');
    expect(countRuleChoice(pair('a', { r: 9, p: null, ttft: 1 }, { r: 0, ttft: 1 }), 1, 0.5, LIMIT)).toBe('efficient');
    expect(countRuleChoice(pair('a', { r: 9, p: null, ttft: 1 }, { r: 0, ttft: 1 }), 1, null, LIMIT)).toBe('capable');
    expect(countRuleChoice(pair('a', { r: 9, p: 0, ttft: 1 }, { r: LIMIT, ttft: 1 }), 1, null, LIMIT)).toBe('efficient');
  });

  it('rankCandidates breaks a full tie by the larger threshold', () => {
    const ranked = rankCandidates([
      { r: 2, p: null, meanSelectedTtftMs: 10, overrides: 1, terms: 1 },
      { r: 5, p: null, meanSelectedTtftMs: 10 + 1e-12, overrides: 1, terms: 1 },
    ]);
    expect(ranked[0]?.r).toBe(5);
  });
});

// --- Differential: the simulated rules against decide() ----------------------

const worker = 1n as WorkerId;
function report(model: string, row: CalibrationRow): CandidateReport {
  return {
    kind: 'observed',
    observation: {
      model,
      placement: { workerId: worker, dpRank: 0 },
      schedulable: observed.ok(true, 0),
      promptTokens: observed.ok(row.n, 0),
      reusablePrefixTokens: observed.ok(row.k, 0),
      bookedRequests: observed.ok(row.r, 0),
      prefillPressure: row.p === null ? observed.missing('no capacity') : observed.ok(row.p, 0),
      suspicions: [],
    },
  };
}

const arbPair = fc
  .record({
    effR: fc.integer({ min: 0, max: 10 }),
    effP: fc.option(fc.integer({ min: 0, max: 40 }).map((x) => x / 10), { nil: null }),
    capR: fc.integer({ min: 0, max: 12 }),
    capP: fc.integer({ min: 0, max: 40 }).map((x) => x / 10),
    n: fc.integer({ min: 2, max: 100_000 }),
    kf: fc.double({ min: 0, max: 1, noNaN: true }),
    proposal: fc.constantFrom('efficient' as const, 'capable' as const),
  })
  .map((x) =>
    pair('c', { r: x.effR, p: x.effP, ttft: 100, n: x.n, k: Math.floor(x.n * x.kf) }, { r: x.capR, p: x.capP, ttft: 100, n: x.n, k: Math.floor(x.n * x.kf) }, x.proposal),
  );

function paramsWith(over: Partial<ParameterSet>): ParameterSet {
  return { ...DEFAULT_PARAMETER_SET, gate: { ...DEFAULT_PARAMETER_SET.gate, destinationLimit: 8 }, ...over };
}

function decided(p: CalibrationPair, params: ParameterSet): string {
  return decide({ proposal: p.proposal, efficient: report('efficient', p.efficient), capable: report('capable', p.capable), localCapableInFlight: 0 }, params).choice;
}

describe('simulation agrees with decide', () => {
  it('count + prefill', () => {
    fc.assert(
      fc.property(arbPair, fc.option(fc.integer({ min: 1, max: 10 }), { nil: null }), fc.option(fc.integer({ min: 0, max: 40 }).map((x) => x / 10), { nil: null }), (p, r, pp) => {
        const params = paramsWith({ variant: 'count_prefill', thresholds: { r, p: pp } });
        expect(countRuleChoice(p, r, pp, 8)).toBe(decided(p, params));
      }),
      { seed: 11, numRuns: 500 },
    );
  });

  it('count', () => {
    fc.assert(
      fc.property(arbPair, fc.integer({ min: 1, max: 10 }), (p, r) => {
        expect(countRuleChoice(p, r, null, 8)).toBe(decided(p, paramsWith({ variant: 'count', thresholds: { r, p: 2 } })));
      }),
      { seed: 12, numRuns: 300 },
    );
  });

  it('blind and cache estimators with a margin', () => {
    const models = DEFAULT_PARAMETER_SET.models;
    fc.assert(
      fc.property(arbPair, fc.constantFrom('blind' as const, 'cache' as const), fc.integer({ min: 0, max: 400 }), (p, est, margin) => {
        const params = paramsWith({ variant: est, margins: { deltaBlindMs: margin, deltaCacheMs: margin } });
        expect(estimatorRuleChoice(p, models, est, margin, 8)).toBe(decided(p, params));
      }),
      { seed: 13, numRuns: 500 },
    );
  });
});
