// The main job's offline half: the job plan gives the fit something to find on the live fleet's
// pools, and the engine-side analysis reads the engine's TTFT in place of the wall clock's.
import { describe, expect, it } from 'vitest';
import { calibrationPlan } from '@vantage/evaluation';
import { calibrateAndFit } from '@vantage/study';
import { engineSideRows, LIVE_FLEET, verdict } from '../src/job-study';

describe('the job calibration plan', () => {
  const plan = calibrationPlan({ preset: 'job', blockSize: 64, destinationLimit: 8 });

  it('measures backlogs on both sides of break-even, capable warm and cold, busy capable below and at the limit', () => {
    const pf = plan.conditions.filter((c) => c.factor === 'prefill_contention');
    const pressure = (c: (typeof pf)[number]): number => c.background.reduce((s, b) => s + (b.count * b.promptTokens) / 8192, 0);
    expect(new Set(pf.map(pressure))).toEqual(new Set([0.25, 0.5, 1, 2, 4]));
    expect(pf.every((c) => c.background.every((b) => b.pool === 'efficient'))).toBe(true);
    const cold = pf.filter((c) => c.warm.length === 1);
    expect(cold.length).toBeGreaterThan(0);
    expect(cold.every((c) => c.warm[0] === 'efficient' && c.probe.prefixTokens > 0 && c.id.endsWith('-capcold'))).toBe(true);
    // Every cold condition has its warm twin.
    for (const c of cold) expect(plan.conditions.some((w) => w.id === c.id.replace(/-capcold$/, '') && w.warm.length === 2)).toBe(true);
    const busy = plan.conditions.filter((c) => c.factor === 'busy_capable');
    expect(busy.some((c) => c.atDestinationLimit)).toBe(true);
    expect(busy.some((c) => !c.atDestinationLimit)).toBe(true);
    expect(plan.totals.warmupRequests).toBe(plan.conditions.reduce((s, c) => s + (c.probe.prefixTokens > 0 ? c.repeats * c.warm.length : 0), 0));
  });

  it('on the live pools offline: real thresholds, margins from at least 10 uncertainty conditions, cold capable pairs where K differs', () => {
    const { calibrationRows, fit } = calibrateAndFit({ preset: 'job', fleet: LIVE_FLEET, destinationLimit: 8 });
    const r = fit.report;
    expect(r.thresholds.count.best.r).not.toBeNull();
    expect(r.thresholds.countPrefill.best.r !== null || r.thresholds.countPrefill.best.p !== null).toBe(true);
    expect(r.splits.uncertainty.conditionIds.length).toBeGreaterThanOrEqual(10);
    for (const e of ['blind', 'cache'] as const) {
      expect(r.margins[e].perCondition.length).toBeGreaterThanOrEqual(10);
      expect(r.margins[e].marginMs).toBeLessThan(500);
    }
    const coldProbes = calibrationRows.filter((x) => typeof x['sessionId'] === 'string' && (x['sessionId'] as string).startsWith('cal:') && (x['sessionId'] as string).includes('-capcold:'));
    expect(coldProbes.length).toBeGreaterThan(0);
    for (const x of coldProbes) {
      expect(x['decision.observations.capable.overlapTokens']).toBe(0);
      expect(x['decision.observations.efficient.overlapTokens'] as number).toBeGreaterThan(0);
    }
  }, 60_000);
});

describe('engine-side rows', () => {
  it("replace a foreground row's TTFT by the engine's and leave the rest", () => {
    const lines = [JSON.stringify({ requestId: 'a', ttftMs: 120, latencyMs: 300 }), JSON.stringify({ requestId: 'b', ttftMs: 80 }), JSON.stringify({ requestId: 'c', ttftMs: null })];
    const out = engineSideRows(lines, new Map([['a', 90], ['c', 40]]));
    expect(out).toEqual([{ requestId: 'a', ttftMs: 90, latencyMs: 300 }, { requestId: 'b', ttftMs: 80 }, { requestId: 'c', ttftMs: null }]);
  });

  it('name a difference by its interval', () => {
    const d = (lo: number | null, hi: number | null): Parameters<typeof verdict>[0] => ({ metric: 'ttft_mean_ms', label: '', unit: 'ms', variant: 'x', baseline: 'baseline', variantValue: 0, baselineValue: 0, estimate: 0, lo, hi, confidence: 0.95, method: 'paired', iterations: 1, validIterations: 1, units: { variant: 1, baseline: 1 } });
    expect(verdict(d(-5, -1))).toBe('lowered');
    expect(verdict(d(1, 5))).toBe('raised');
    expect(verdict(d(-1, 5))).toBe('no resolved difference');
    expect(verdict(d(null, null))).toBe('not measured');
    expect(verdict(undefined)).toBe('not measured');
  });
});
