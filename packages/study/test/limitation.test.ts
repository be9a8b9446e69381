// Seed 000's named limitation as a controlled case: the matched pairs really have equal booked
// counts (and prefill pressure) and different remaining generations, the decoding phase really has
// P = 0 while the worker decodes, each rule's TTFT is the simulated TTFT of the candidate it chose,
// the rows are deterministic for a seed, and the report section is produced.
import { describe, expect, it } from 'vitest';
import { calibrateAndFit, DEFAULT_FLEET, limitationCases, runLimitationStudy, type LimitationOptions } from '../src/index';

const { fit } = calibrateAndFit({ preset: 'tiny' });
// A smaller case than the command's default, so the test stays fast: 3 background requests per
// worker, a 2,048-token shared prefix when decoding, 4,096-token fresh prompts (two passes' worth
// for three requests) when prefilling, 4 versus 256 output tokens.
const small: Omit<LimitationOptions, 'seed'> = {
  fleet: DEFAULT_FLEET,
  fit,
  counts: [3],
  decodingPrefixTokens: 2048,
  decodingSuffixTokens: 128,
  prefillingPromptTokens: 4096,
  shortOutputTokens: 4,
  longOutputTokens: 256,
  probePromptTokens: 1024,
  probeOutputTokens: 16,
};
const r = runLimitationStudy({ ...small, seed: 5 });
const byId = new Map(r.cases.map((c) => [c.case.id, c]));

describe('the remaining-generation case (seed 000 limitation)', () => {
  it('builds idle plus a short/long pair per phase and count', () => {
    expect(limitationCases({ counts: [4, 16] }).map((c) => c.id)).toEqual([
      'idle',
      'decoding-c4-short',
      'decoding-c4-long',
      'decoding-c16-short',
      'decoding-c16-long',
      'prefilling-c4-short',
      'prefilling-c4-long',
      'prefilling-c16-short',
      'prefilling-c16-long',
    ]);
    expect(() => limitationCases({ shortOutputTokens: 1 })).toThrow(/at least 2/);
    expect(() => limitationCases({ shortOutputTokens: 300, longOutputTokens: 200 })).toThrow(/shorter/);
  });

  it('gives each pair equal booked requests and prefill pressure, and different remaining generations', () => {
    for (const phase of ['decoding', 'prefilling'] as const) {
      const short = byId.get(`${phase}-c3-short`)!;
      const long = byId.get(`${phase}-c3-long`)!;
      for (const c of [short, long]) {
        expect(c.efficient.bookedRequests, c.case.id).toBe(3);
        expect(c.efficient.ledgerRequests, c.case.id).toBe(3);
      }
      expect(long.efficient.prefillPressure).toBe(short.efficient.prefillPressure);
      expect(long.efficient.remainingOutputTokens).toBeGreaterThan(short.efficient.remainingOutputTokens);
      expect(long.efficient.backgroundBusyAfterMs).toBeGreaterThan(short.efficient.backgroundBusyAfterMs);
      // Equal inputs, so both estimators predict the same for both cases of the pair.
      expect(long.estimators.map((e) => [e.efficientMs, e.capableMs])).toEqual(short.estimators.map((e) => [e.efficientMs, e.capableMs]));
    }
    // Decoding: every background request has its first token (P = 0), 3 x (4 - 1) and 3 x (256 - 1) tokens still to come.
    expect(byId.get('decoding-c3-short')!.efficient.prefillPressure).toBe(0);
    expect(byId.get('decoding-c3-short')!.efficient.remainingOutputTokens).toBe(3 * 3);
    expect(byId.get('decoding-c3-long')!.efficient.remainingOutputTokens).toBe(3 * 255);
    // Prefilling: nothing has a first token yet: P is the booked prompts over the pass budget.
    expect(byId.get('prefilling-c3-long')!.efficient.prefillPressure).toBeCloseTo((3 * 4096) / 8192, 9);
    expect(byId.get('prefilling-c3-long')!.efficient.remainingOutputTokens).toBe(3 * 256);
    const idle = byId.get('idle')!;
    expect([idle.efficient.bookedRequests, idle.efficient.prefillPressure, idle.efficient.remainingOutputTokens]).toEqual([0, 0, 0]);
  });

  it('runs every rule through the decision path: the TTFT each gets is the simulated TTFT of its choice', () => {
    for (const c of r.cases) {
      expect(c.rules.map((x) => x.variant)).toEqual(['baseline', 'request_count', 'count_prefill', 'cache_blind', 'cache_aware']);
      const baseline = c.rules.find((x) => x.variant === 'baseline')!;
      expect([baseline.choice, baseline.reason]).toEqual(['efficient', 'kept_stage_variant']);
      for (const x of c.rules) {
        expect(x.ttftMs, `${c.case.id} ${x.variant}`).toBe(c.measured[x.choice].ttftMs);
        expect(x.reason === 'overrode', `${c.case.id} ${x.variant}`).toBe(x.choice === 'capable');
      }
      for (const e of c.estimators) {
        if (e.efficientMs !== null) expect(e.efficientErrorMs).toBeCloseTo(e.efficientMs - c.measured.efficient.ttftMs, 9);
      }
      expect(c.measured.efficient.ttftMs).toBeGreaterThan(0);
      expect(c.measured.capable.ttftMs).toBeGreaterThan(0);
    }
    // The queued prefill shows in TTFT: the prefilling cases wait longer than idle.
    expect(byId.get('prefilling-c3-short')!.measured.efficient.ttftMs).toBeGreaterThan(byId.get('idle')!.measured.efficient.ttftMs);
  });

  it('is deterministic for a seed', () => {
    const again = runLimitationStudy({ ...small, seed: 5 });
    expect(JSON.stringify(again.cases)).toBe(JSON.stringify(r.cases));
    expect(again.html).toBe(r.html);
    expect(again.table).toBe(r.table);
  });

  it('produces the report section: the cases, the charts, the estimator errors and every rule for every case', () => {
    expect(r.html).toContain('<h1>Offline study: equal booked requests, different remaining generations</h1>');
    expect(r.html.match(/<svg /g)).toHaveLength(3);
    expect(r.svgs.e2e).toContain('full-response latency');
    expect(r.svgs.decoding.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(r.svgs.prefilling).toContain('background still prefilling');
    // Cases table (5 cases), estimator table (2 per case), rules table (5 per case).
    expect(r.html.match(/<tr><td>/g)).toHaveLength(5 + 2 * 5 + 5 * 5);
    for (const c of r.cases) expect(r.table).toContain(c.case.id);
    for (const v of ['baseline', 'request_count', 'count_prefill', 'cache_blind', 'cache_aware']) expect(r.table).toContain(v);
  });
});

describe('an uncontrolled case is refused', () => {
  it('throws when a short generation finishes before the proposal (the pair no longer has equal booked counts)', () => {
    // 8 x 2,048 fresh suffix tokens need two passes: the first pass's requests finish their 2 tokens before the last first token.
    expect(() => runLimitationStudy({ ...small, counts: [8], decodingSuffixTokens: 2048, shortOutputTokens: 2, seed: 5 })).toThrow(/not the same booked count/);
  });
});
