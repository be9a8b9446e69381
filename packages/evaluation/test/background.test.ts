// Competing traffic: the seeded, matched background load of an evaluation
// run, and its effect per variant computed from outcome records with
// background = true (lifecycle-only joins timed from the request's arrival),
// plus the records the outcome service writes before it honours the flag.
import { describe, expect, it } from 'vitest';
import { joinOutcome, outcomeToJsonRow, type JsonRow } from '@vantage/records';
import {
  DEFAULT_BACKGROUND_TRAFFIC,
  analyzeEvaluation,
  backgroundTraffic,
  evaluationBackgroundSessionId,
  formatBackgroundSpec,
  parseBackgroundSpec,
  parseEvaluationRows,
  renderEvaluationHtml,
} from '../src/index';
import { MODELS, outcomeRow } from './synthetic';

describe('background traffic plan', () => {
  const plan = backgroundTraffic(DEFAULT_BACKGROUND_TRAFFIC);

  it('is fixed by its spec: same requests every time, ordered by arrival, on both pools', () => {
    expect(backgroundTraffic({ ...DEFAULT_BACKGROUND_TRAFFIC })).toEqual(plan);
    expect(plan).toHaveLength(DEFAULT_BACKGROUND_TRAFFIC.streams * DEFAULT_BACKGROUND_TRAFFIC.requestsPerStream);
    for (let i = 1; i < plan.length; i++) expect(plan[i]!.arrivalMs).toBeGreaterThanOrEqual(plan[i - 1]!.arrivalMs);
    expect(new Set(plan.map((r) => r.role))).toEqual(new Set(['efficient', 'capable']));
    for (const r of plan) {
      expect(r.promptTokens).toBeGreaterThanOrEqual(DEFAULT_BACKGROUND_TRAFFIC.promptTokens.min);
      expect(r.promptTokens).toBeLessThanOrEqual(DEFAULT_BACKGROUND_TRAFFIC.promptTokens.max);
      expect(r.outputTokens).toBeGreaterThanOrEqual(DEFAULT_BACKGROUND_TRAFFIC.outputTokens.min);
      expect(r.outputTokens).toBeLessThanOrEqual(DEFAULT_BACKGROUND_TRAFFIC.outputTokens.max);
      expect(r.arrivalMs).toBeGreaterThan(0);
    }
    expect(new Set(plan.map((r) => r.contentSeed)).size).toBe(plan.length);
    expect(backgroundTraffic({ ...DEFAULT_BACKGROUND_TRAFFIC, seed: 2 })).not.toEqual(plan);
  });

  it('keeps each stream\'s requests when streams are added (streams are independent)', () => {
    const more = backgroundTraffic({ ...DEFAULT_BACKGROUND_TRAFFIC, streams: DEFAULT_BACKGROUND_TRAFFIC.streams + 2 });
    expect(more.filter((r) => r.stream < DEFAULT_BACKGROUND_TRAFFIC.streams)).toEqual(plan);
  });

  it('parses and formats the command-line spec, and refuses bad ones', () => {
    expect(parseBackgroundSpec(formatBackgroundSpec(DEFAULT_BACKGROUND_TRAFFIC))).toEqual(DEFAULT_BACKGROUND_TRAFFIC);
    expect(parseBackgroundSpec('off')).toBeNull();
    expect(parseBackgroundSpec('2:3:500:9')).toMatchObject({ streams: 2, requestsPerStream: 3, meanGapMs: 500, seed: 9, capableFraction: 0.5 });
    expect(() => parseBackgroundSpec('2:0:500:9')).toThrow(/requestsPerStream/);
    expect(() => parseBackgroundSpec('2:3:500:9:1.5')).toThrow(/capableFraction/);
    expect(() => parseBackgroundSpec('two')).toThrow(RangeError);
  });
});

/** A competing request as the outcome service writes it once it honours `background`: no decision, timed from arrival. */
function bgRow(attempt: number, variant: string, stream: number, i: number, ttftMs: number, latencyMs: number): JsonRow {
  return outcomeRow({
    requestId: `r-${attempt}-${variant}-${stream}-${i}`,
    sessionId: evaluationBackgroundSessionId(attempt, variant, stream),
    noDecision: true,
    background: true,
    arrivalMs: 1_780_000_000_000 + attempt * 1e6 + i * 1000,
    ttftMs,
    durationMs: latencyMs,
    finalRole: stream % 2 === 0 ? 'efficient' : 'capable',
  });
}

function fgRow(attempt: number, variant: string, i: number): JsonRow {
  return outcomeRow({ requestId: `f-${attempt}-${variant}-${i}`, sessionId: `eval:${attempt}:${variant}:${i}`, variant, arrivalMs: 1_780_000_000_000 + i, ttftMs: 200 });
}

describe('effect on competing traffic', () => {
  const rows: JsonRow[] = [];
  const base = (s: number, i: number): number => 100 + 10 * s + 5 * i;
  for (let a = 0; a < 3; a++) {
    for (const v of ['baseline', 'cache_aware'] as const) {
      rows.push(fgRow(a, v, 0), fgRow(a, v, 1));
      for (let s = 0; s < 3; s++) {
        for (let i = 0; i < 4; i++) {
          const ttft = base(s, i) + (v === 'cache_aware' ? 30 : 0);
          rows.push(bgRow(a, v, s, i, ttft, base(s, i) + 300 + (v === 'cache_aware' ? 50 : 0)));
        }
      }
    }
  }
  const a = analyzeEvaluation(rows, { seed: 3, iterations: 500 });

  it('reads the records as completed background requests with TTFT and latency from arrival', () => {
    const p = parseEvaluationRows(rows);
    expect(p.problems).toEqual([]);
    const bg = p.rows.filter((r) => r.background);
    expect(bg).toHaveLength(2 * 3 * 3 * 4);
    for (const r of bg) {
      expect(r.status).toBe('completed');
      expect(r.decision).toBeNull();
      expect(r.ttftMs).not.toBeNull();
      expect(r.latencyMs).not.toBeNull();
    }
  });

  it('reports per variant mean and p90 TTFT and full-response latency of the background requests', () => {
    const b = a.variants.find((v) => v.variant === 'baseline')!.background;
    expect(b).toMatchObject({ requests: 36, executed: 36, streams: 9, byStatus: { completed: 36 } });
    // 100 + 10 * mean(stream) + 5 * mean(i) = 100 + 10 + 7.5
    expect(b.ttftMs.mean).toBeCloseTo(117.5, 9);
    expect(b.latencyMs.mean).toBeCloseTo(417.5, 9);
    const c = a.variants.find((v) => v.variant === 'cache_aware')!.background;
    expect(c.ttftMs.mean).toBeCloseTo(147.5, 9);
    expect(c.latencyMs.p90).toBeCloseTo(b.latencyMs.p90 + 50, 9);
    expect(a.warnings.filter((w) => w.includes('competing'))).toEqual([]);
  });

  it('gives each background metric a paired bootstrap difference from the baseline over matched streams', () => {
    for (const [metric, shift] of [
      ['background_ttft_mean_ms', 30],
      ['background_ttft_p90_ms', 30],
      ['background_latency_mean_ms', 50],
      ['background_latency_p90_ms', 50],
    ] as const) {
      const d = a.differences.find((x) => x.metric === metric && x.variant === 'cache_aware');
      expect(d, metric).toBeDefined();
      expect(d?.method).toBe('paired');
      expect(d?.units).toEqual({ variant: 9, baseline: 9 });
      expect(d?.estimate).toBeCloseTo(shift, 9);
      expect(d?.lo as number).toBeLessThanOrEqual(shift + 1e-9);
      expect(d?.hi as number).toBeGreaterThanOrEqual(shift - 1e-9);
    }
  });

  it('shows the competing-traffic table and its differences in the HTML report', () => {
    const html = renderEvaluationHtml(a);
    expect(html).toContain('Effect on competing traffic');
    expect(html).toContain('Competing traffic: p90 full-response latency');
  });

  it('until lifecycle-only joins honour background: keeps the unmarked, incomplete records, untimed, and says why', () => {
    // What the outcome service writes today: no decision, no arrival, not marked background.
    const old = rows.map((r) => {
      if (r['background'] !== true) return r;
      const sessionId = r['sessionId'] as string;
      const requestId = r['requestId'] as string;
      const arrival = r['arrivalMs'] as number;
      const pool = MODELS.efficient;
      const rec = joinOutcome(null, [
        { requestId, sessionId, pool, kind: 'first_token', atMs: arrival + (r['ttftMs'] as number) },
        { requestId, sessionId, pool, kind: 'done', atMs: arrival + (r['latencyMs'] as number), usage: { inputTokens: 1000, cachedTokens: 0, outputTokens: 20 } },
      ], { requestId, closedBy: 'complete' });
      return outcomeToJsonRow(rec);
    });
    const p = parseEvaluationRows(old);
    expect(p.problems).toEqual([]);
    expect(p.rows.filter((r) => r.background).every((r) => r.status === 'incomplete' && r.ttftMs === null)).toBe(true);
    const b = analyzeEvaluation(old, { seed: 3, iterations: 200 });
    const base = b.variants.find((v) => v.variant === 'baseline')!.background;
    expect(base).toMatchObject({ requests: 36, executed: 0, byStatus: { incomplete: 36 } });
    expect(b.warnings.join('\n')).toMatch(/36 of 36 competing-traffic record\(s\) are incomplete/);
    for (const d of b.differences.filter((x) => x.metric.startsWith('background_'))) expect(Number.isFinite(d.estimate)).toBe(false);
    expect(renderEvaluationHtml(b)).toContain('Effect on competing traffic');
  });

  it('still refuses a record with a decision whose evalbg session id says background', () => {
    const bad = { ...fgRow(0, 'baseline', 0), sessionId: evaluationBackgroundSessionId(0, 'baseline', 0) };
    const p = parseEvaluationRows([bad]);
    expect(p.problems.map((x) => x.message).join()).toMatch(/background traffic, the row says otherwise/);
  });
});
