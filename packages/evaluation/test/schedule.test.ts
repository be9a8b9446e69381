// The evaluation schedule: blocks, matched sessions, seeded variant order, Stage proposals.
import { describe, expect, it } from 'vitest';
import { VARIANTS } from '@vantage/records';
import { DEFAULT_BACKGROUND_TRAFFIC, evaluationSchedule, stageProposal, type StageProposalModel } from '../src/index';
import { parseEvaluationSessionId } from '../src/schedule';

const opts = { attempts: 12, sessionsPerAttempt: 4, seed: 5, background: { ...DEFAULT_BACKGROUND_TRAFFIC, streams: 2 } } as const;

describe('evaluationSchedule', () => {
  const s = evaluationSchedule(opts);

  it('runs every variant exactly once per attempt block, blocks in order', () => {
    expect(s.runs).toHaveLength(12 * VARIANTS.length);
    for (let a = 0; a < 12; a++) {
      const block = s.runs.slice(a * 5, a * 5 + 5);
      expect(block.every((r) => r.attempt === a)).toBe(true);
      expect([...block.map((r) => r.variant)].sort()).toEqual([...VARIANTS].sort());
      expect(block.map((r) => r.position)).toEqual([0, 1, 2, 3, 4]);
    }
    expect(s.runs.map((r) => r.order)).toEqual(s.runs.map((_, i) => i));
  });

  it('gives every variant of an attempt the same sessions (matched), fresh ones per attempt', () => {
    for (let a = 0; a < 12; a++) {
      const block = s.runs.filter((r) => r.attempt === a);
      const seeds = new Set(block.map((r) => r.sessionSeed));
      expect(seeds.size).toBe(1);
      const keys = block.map((r) => r.sessions.map((x) => `${x.matchKey}@${x.sessionIndex}`).join(','));
      expect(new Set(keys).size).toBe(1);
      expect(block.every((r) => r.flushCachesBefore)).toBe(true);
    }
    expect(new Set(s.runs.map((r) => r.sessionSeed)).size).toBe(12);
    const ids = s.runs.flatMap((r) => [...r.sessions.map((x) => x.sessionId), ...r.backgroundSessionIds]);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('shuffles the variant order per block with the seed, reproducibly', () => {
    const orders = (sch: typeof s): string[] => Array.from({ length: sch.attempts }, (_, a) => sch.runs.filter((r) => r.attempt === a).map((r) => r.variant).join(','));
    const o = orders(s);
    expect(new Set(o).size).toBeGreaterThan(6);
    // Not a fixed rotation either: the baseline is not always in the same place.
    expect(new Set(s.runs.filter((r) => r.variant === 'baseline').map((r) => r.position)).size).toBeGreaterThan(2);
    expect(evaluationSchedule(opts)).toEqual(s);
    expect(orders(evaluationSchedule({ ...opts, seed: 6 }))).not.toEqual(o);
  });

  it('writes session ids the analysis parses back to (attempt, variant, index)', () => {
    for (const r of s.runs) {
      for (const x of r.sessions) expect(parseEvaluationSessionId(x.sessionId)).toEqual({ background: false, attempt: r.attempt, variant: r.variant, index: x.sessionIndex, matchKey: x.matchKey });
      r.backgroundSessionIds.forEach((id, i) => expect(parseEvaluationSessionId(id)).toMatchObject({ background: true, attempt: r.attempt, variant: r.variant, index: i }));
    }
    expect(parseEvaluationSessionId('cal:x:0:idle')).toBeNull();
  });

  it('refuses designs that cannot be analysed', () => {
    expect(() => evaluationSchedule({ ...opts, attempts: 0 })).toThrow(RangeError);
    expect(() => evaluationSchedule({ ...opts, proposal: { kind: 'fraction_capable', fraction: 1.5, seed: 1 } })).toThrow(RangeError);
  });
});

describe('stageProposal', () => {
  it('always efficient', () => {
    expect(stageProposal({ kind: 'always_efficient' }, { matchKey: '0:0', turn: 3, promptTokens: 1e6 })).toBe('efficient');
  });

  it('a seeded capable fraction, the same for a session in every variant', () => {
    const m: StageProposalModel = { kind: 'fraction_capable', fraction: 0.3, seed: 9 };
    let capable = 0;
    const n = 4000;
    for (let i = 0; i < n; i++) {
      const ctx = { matchKey: `${i % 40}:${i % 7}`, turn: i, promptTokens: 100 };
      const p = stageProposal(m, ctx);
      expect(stageProposal(m, ctx)).toBe(p);
      if (p === 'capable') capable++;
    }
    expect(capable / n).toBeGreaterThan(0.27);
    expect(capable / n).toBeLessThan(0.33);
  });

  it('a length heuristic', () => {
    const m: StageProposalModel = { kind: 'length', capableAboveTokens: 32_000 };
    expect(stageProposal(m, { matchKey: 'a', turn: 0, promptTokens: 32_000 })).toBe('efficient');
    expect(stageProposal(m, { matchKey: 'a', turn: 0, promptTokens: 32_001 })).toBe('capable');
  });
});
