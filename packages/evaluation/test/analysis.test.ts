// The analysis on genuine flattened outcome rows: hand-computed session
// completion, TTFT and rule counters; labelling; differences with intervals.
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '@vantage/random';
import { OUTCOME_CSV_COLUMNS } from '@vantage/records';
import { analyzeEvaluation, parseEvaluationRows } from '../src/index';
import { EVALUATION_LABEL_COLUMNS } from '../src/rows';
import { outcomeRow, syntheticEvaluation, toJsonl } from './synthetic';

function shuffleForTest<T>(xs: readonly T[], seed: number): T[] {
  const r = mulberry32(seed);
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('column table', () => {
  it('adds a label column the outcome flattening does not write (fitting checks the ones it writes)', () => {
    for (const c of Object.values(EVALUATION_LABEL_COLUMNS)) expect(OUTCOME_CSV_COLUMNS).not.toContain(c);
  });
});

describe('session completion, TTFT and latency by hand', () => {
  const S = 'eval:0:cache_aware:0';
  const rows = [
    // Session 0: arrivals 1000, 5000, 9000; ends 2500, 7000, 12000 → completion 12000 − 1000 = 11000.
    outcomeRow({ requestId: 'a', sessionId: S, variant: 'cache_aware', arrivalMs: 1000, ttftMs: 100, durationMs: 1500 }),
    outcomeRow({ requestId: 'b', sessionId: S, variant: 'cache_aware', arrivalMs: 5000, ttftMs: 300, durationMs: 2000 }),
    outcomeRow({ requestId: 'c', sessionId: S, variant: 'cache_aware', arrivalMs: 9000, ttftMs: 200, durationMs: 3000 }),
    // Session 1: 2 requests, 20000 → 20000 + 4000 = 24000 → completion 4000 (listed out of order).
    outcomeRow({ requestId: 'e', sessionId: 'eval:0:cache_aware:1', variant: 'cache_aware', arrivalMs: 22000, ttftMs: 600, durationMs: 2000 }),
    outcomeRow({ requestId: 'd', sessionId: 'eval:0:cache_aware:1', variant: 'cache_aware', arrivalMs: 20000, ttftMs: 400, durationMs: 1000 }),
    // Session 2: second request failed → no completion time, counted as a session with failures.
    outcomeRow({ requestId: 'f', sessionId: 'eval:0:cache_aware:2', variant: 'cache_aware', arrivalMs: 30000, ttftMs: 1000, durationMs: 2000 }),
    outcomeRow({ requestId: 'g', sessionId: 'eval:0:cache_aware:2', variant: 'cache_aware', arrivalMs: 33000, ttftMs: 50, durationMs: 500, terminal: 'failed' }),
  ];
  const a = analyzeEvaluation(rows, { iterations: 50 });
  const v = a.variants.find((x) => x.variant === 'cache_aware');

  it('first arrival to last completion, sessions that completed only', () => {
    expect(v?.sessions).toEqual({ total: 3, completed: 2, withFailures: 1, matched: 3 });
    expect(v?.sessionCompletionMs.n).toBe(2);
    expect(v?.sessionCompletionMs.mean).toBe((11000 + 4000) / 2);
    expect(v?.sessionCompletionMs.max).toBe(11000);
  });

  it('TTFT and latency of executed requests only', () => {
    // Executed TTFTs: 100, 300, 200, 600, 400, 1000 (the failed request is excluded).
    expect(v?.requests).toEqual({ total: 7, executed: 6, byStatus: { completed: 6, failed: 1 } });
    expect(v?.ttftMs.mean).toBeCloseTo(2600 / 6, 9);
    // Type 7 p90 of [100, 200, 300, 400, 600, 1000]: h = 4.5 → 600 + 0.5 × 400 = 800.
    expect(v?.ttftMs.p90).toBeCloseTo(800, 9);
    expect(v?.latencyMs.mean).toBeCloseTo((1500 + 2000 + 3000 + 2000 + 1000 + 2000) / 6, 9);
    expect(v?.ttftValues).toEqual([100, 200, 300, 400, 600, 1000]);
  });

  it('uncached input by model and routing overhead', () => {
    // Default usage: 1000 in, 600 cached → 400 uncached, served by the efficient pool ('kept').
    expect(v?.uncachedInput.byModel).toEqual({ 'eff-8b': { requests: 6, tokens: 2400, missingUsage: 0 } });
    // Per session, executed requests only: 3 × 400, 2 × 400, and 1 × 400 (the failed request is not executed).
    expect(v?.uncachedInput.perSession.mean).toBeCloseTo((1200 + 800 + 400) / 3, 9);
    expect(v?.routingOverheadUs.mean).toBe(1200);
    expect(v?.observeDurationUs.mean).toBe(900);
  });
});

describe('rule counters', () => {
  const S = 'eval:1:count_prefill:0';
  const mk = (id: string, reason: string, over: Partial<Parameters<typeof outcomeRow>[0]> = {}) =>
    outcomeRow({ requestId: id, sessionId: S, variant: 'count_prefill', reason, arrivalMs: 1000 * id.length, ...over });
  const rows = [
    mk('1', 'overrode'),
    mk('22', 'overrode'),
    mk('333', 'kept'),
    mk('4444', 'kept'),
    mk('55555', 'kept'),
    mk('6', 'fallback_destination_limit'),
    mk('7', 'fallback_observations_stale'),
    mk('8', 'fallback_observations_stale'),
    mk('9', 'stage_capable', { proposal: 'capable' }),
    mk('10', 'brand_new_reason'),
    // Background traffic never counts as a decision.
    outcomeRow({ requestId: 'bg', sessionId: 'evalbg:1:count_prefill:0', noDecision: true, background: true, arrivalMs: 5 }),
  ];
  const r = analyzeEvaluation(rows, { iterations: 20 }).variants[0]?.rules;

  it('counts could act, changed and fell back (by reason) over efficient proposals', () => {
    expect(r).toMatchObject({
      decisions: 10,
      withoutDecision: 0,
      efficientProposals: 9,
      capableProposals: 1,
      couldAct: 5,
      overrode: 2,
      kept: 3,
      stageCapable: 1,
      baseline: 0,
      fallback: { fallback_destination_limit: 1, fallback_observations_stale: 2 },
      fallbackTotal: 3,
      other: { brand_new_reason: 1 },
      finalCapable: 3,
    });
    expect(r?.couldActRate).toBeCloseTo(5 / 9, 12);
    expect(r?.overrodeRate).toBeCloseTo(2 / 9, 12);
    expect(r?.fallbackRate).toBeCloseTo(3 / 9, 12);
  });
});

describe('labelling rows with their variant', () => {
  it('takes the decision variant, background traffic from its session id, and reports mismatches by line', () => {
    const rows = [
      outcomeRow({ requestId: 'x', sessionId: 'eval:0:request_count:0', variant: 'request_count', arrivalMs: 1 }),
      outcomeRow({ requestId: 'y', sessionId: 'evalbg:0:request_count:0', noDecision: true, background: true, arrivalMs: 1, ttftMs: 70 }),
      outcomeRow({ requestId: 'z', sessionId: 'eval:0:request_count:1', variant: 'cache_aware', arrivalMs: 1 }),
      outcomeRow({ requestId: 'w', sessionId: 'cal:nc-n1024-f0:0:idle', variant: 'baseline', arrivalMs: 1 }),
      outcomeRow({ requestId: 'u', sessionId: 'warmup', noDecision: true, background: true, arrivalMs: 1 }),
      { ...outcomeRow({ requestId: 'v', sessionId: 'bgx', noDecision: true, background: true, arrivalMs: 1 }), 'evaluation.variant': 'request_count' },
      { requestId: 'q' },
    ];
    const p = parseEvaluationRows(rows);
    expect(p.rows.map((r) => [r.requestId, r.variant, r.background, r.matchKey])).toEqual([
      ['x', 'request_count', false, '0:0'],
      ['y', 'request_count', true, '0:bg0'],
      ['w', 'baseline', false, null],
      ['v', 'request_count', true, null],
    ]);
    expect(p.problems).toEqual([
      { line: 3, message: expect.stringContaining('names variant request_count, the decision says cache_aware') as string },
      { line: 7, message: expect.stringContaining('not an outcome row') as string },
    ]);
    expect(p.skipped).toEqual({ no_variant: 1 });
  });

  it('reads JSON Lines with line numbers, blank lines kept in the count', () => {
    const a = JSON.stringify(outcomeRow({ requestId: 'a', sessionId: 'eval:0:baseline:0', arrivalMs: 1 }));
    const p = parseEvaluationRows(`${a}\n\nnot json\n${a}\n`);
    expect(p.rows.map((r) => r.line)).toEqual([1]);
    expect(p.problems.map((x) => [x.line, x.message.slice(0, 20)])).toEqual([
      [3, 'not JSON: Unexpected'],
      [4, 'second outcome of re'],
    ]);
    expect(p.problems[1]?.message).toContain('first on line 1');
  });
});

describe('differences from the baseline on a synthetic evaluation', () => {
  const syn = syntheticEvaluation();
  const a = analyzeEvaluation(syn.rows, { seed: 4, iterations: 1000 });

  it('lists every variant, baseline first, with matched sessions', () => {
    expect(a.variants.map((v) => v.variant)).toEqual(['baseline', 'request_count', 'count_prefill', 'cache_blind', 'cache_aware']);
    for (const v of a.variants) expect(v.sessions).toMatchObject({ total: 24, completed: 24, matched: 24 });
    expect(a.input.problems).toEqual([]);
    expect(a.warnings).toEqual([]);
    expect(a.gaps.length).toBeGreaterThan(3);
  });

  it('says when too few attempts leave run-to-run variation out of the intervals', () => {
    const two = analyzeEvaluation(syntheticEvaluation({ attempts: 2, sessions: 4 }).rows, { seed: 4, iterations: 200 });
    expect(two.warnings.join('\n')).toContain('2 attempt(s) per variant');
  });

  it('recovers each known TTFT shift inside its paired interval', () => {
    for (const [variant, shift] of Object.entries(syn.shiftMs)) {
      if (variant === 'baseline') continue;
      const d = a.differences.find((x) => x.metric === 'ttft_mean_ms' && x.variant === variant);
      expect(d?.method).toBe('paired');
      expect(d?.estimate).toBeCloseTo(shift, 6);
      expect(d?.lo as number).toBeLessThanOrEqual(shift + 1e-6);
      expect(d?.hi as number).toBeGreaterThanOrEqual(shift - 1e-6);
      // Matched sessions: the constant shift leaves (almost) no between-session noise.
      expect((d?.hi as number) - (d?.lo as number)).toBeLessThan(1);
    }
  });

  it('puts competing traffic on its variant and the override rate against a zero baseline', () => {
    const bg = a.differences.find((x) => x.metric === 'background_ttft_mean_ms' && x.variant === 'cache_aware');
    expect(bg?.estimate).toBeCloseTo(40, 9);
    expect(bg?.method).toBe('paired');
    const ov = a.differences.find((x) => x.metric === 'override_rate' && x.variant === 'cache_aware');
    expect(ov?.baselineValue).toBe(0);
    expect(ov?.estimate).toBeGreaterThan(0.15);
    expect(ov?.lo as number).toBeGreaterThan(0);
    const base = a.variants[0];
    expect(base?.rules.baseline).toBe(base?.rules.decisions);
    expect(base?.observeDurationUs.n).toBe(0);
  });

  it('does not depend on row order, and is reproducible from the seed', () => {
    const again = analyzeEvaluation(shuffleForTest(syn.rows, 99), { seed: 4, iterations: 1000 });
    expect(again.differences).toEqual(a.differences);
    expect(again.variants).toEqual(a.variants);
    const other = analyzeEvaluation(syn.rows, { seed: 5, iterations: 1000 });
    // The override rate varies between sessions, so its interval moves with the bootstrap seed.
    const lat = (x: typeof a) => x.differences.find((d) => d.metric === 'override_rate' && d.variant === 'cache_aware')?.lo;
    expect(lat(other)).not.toBe(lat(a));
  });

  it('falls back to independent resampling, with a warning, when sessions are not matched', () => {
    const dropped = syn.rows.filter((r) => r['sessionId'] !== 'eval:0:cache_aware:0');
    const b = analyzeEvaluation(dropped, { seed: 4, iterations: 200 });
    const d = b.differences.find((x) => x.metric === 'ttft_mean_ms' && x.variant === 'cache_aware');
    expect(d?.method).toBe('independent');
    expect(b.warnings.join('\n')).toContain('independent (unpaired) resampling');
  });

  it('says so when there is no baseline', () => {
    const b = analyzeEvaluation(syn.rows.filter((r) => !String(r['sessionId']).includes(':baseline:')), { iterations: 10 });
    expect(b.differences).toEqual([]);
    expect(b.warnings.join('\n')).toContain('no rows of the baseline variant');
  });

  it('round-trips through JSON Lines', () => {
    const p = parseEvaluationRows(toJsonl(syn.rows));
    expect(p.problems).toEqual([]);
    expect(analyzeEvaluation(p, { seed: 4, iterations: 1000 }).differences).toEqual(a.differences);
  });
});
