import { describe, expect, it } from 'vitest';
import {
  GaussianProcess,
  SEED001_GRID,
  cholesky,
  computeMetrics,
  expectedImprovement,
  gridPoints,
  gridSearch,
  knobsKey,
  knobsToUnit,
  normalCdf,
  renderSweepReportHtml,
  smartSearch,
  unitToKnobs,
  type ReplayMetrics,
  type RouterKnobs,
} from '@vantage/sim';

/** Metrics whose mean E2E is exactly `e2e` (one request). */
function fakeMetrics(e2e: number): ReplayMetrics {
  return computeMetrics([{ requestId: 'x', workerIndex: 0, arrivalMs: 0, firstTokenMs: e2e / 2, endMs: e2e, isl: 100, outputTokens: 3, reusedTokens: 0, preemptions: 0 }], 1);
}

describe('Gaussian process', () => {
  const xs = [[0.1, 0.2], [0.5, 0.9], [0.8, 0.3], [0.3, 0.6], [0.95, 0.95], [0.05, 0.85]];
  const f = (x: readonly number[]): number => 100 + 30 * Math.sin(4 * x[0]!) + 20 * (x[1]! - 0.4) ** 2;
  const ys = xs.map(f);

  it('Cholesky factors a known SPD matrix and refuses an indefinite one', () => {
    const l = cholesky(Float64Array.from([4, 2, 2, 3]), 2)!;
    expect(Array.from(l)).toEqual([2, 0, 1, Math.sqrt(2)]);
    expect(cholesky(Float64Array.from([1, 2, 2, 1]), 2)).toBeNull();
  });

  it('interpolates its training points (fixed and marginal-likelihood length scales)', () => {
    for (const gp of [GaussianProcess.fit(xs, ys, { lengthScales: [0.3, 0.3] }), GaussianProcess.fit(xs, ys)]) {
      xs.forEach((x, i) => {
        const p = gp.predict(x);
        expect(Math.abs(p.mean - ys[i]!)).toBeLessThan(0.05);
        expect(p.sd).toBeLessThan(0.05);
      });
      // Far from the data the posterior is uncertain.
      expect(gp.predict([0.6, 0.05]).sd).toBeGreaterThan(0.5);
    }
  });

  it('chooses the length scale with the highest marginal likelihood', () => {
    const grid = [0.05, 0.3, 3];
    const chosen = GaussianProcess.fit(xs, ys, { lengthScaleGrid: grid });
    for (const a of grid) for (const b of grid) expect(GaussianProcess.fit(xs, ys, { lengthScales: [a, b] }).logMarginalLikelihood).toBeLessThanOrEqual(chosen.logMarginalLikelihood + 1e-9);
  });

  it('expected improvement is ~0 at a sampled point and positive where the model is uncertain', () => {
    const gp = GaussianProcess.fit(xs, ys, { lengthScales: [0.3, 0.3] });
    const best = Math.min(...ys);
    const std = Math.sqrt(ys.reduce((a, y) => a + (y - ys.reduce((s, v) => s + v, 0) / ys.length) ** 2, 0) / ys.length);
    for (const x of xs) {
      const p = gp.predict(x);
      expect(expectedImprovement(p.mean, p.sd, best)).toBeLessThan(1e-3 * std);
    }
    const far = gp.predict([0.6, 0.05]);
    expect(expectedImprovement(far.mean, far.sd, best)).toBeGreaterThan(0.01);
    expect(expectedImprovement(90, 0, 100)).toBe(10);
    expect(normalCdf(0)).toBeCloseTo(0.5, 7);
    expect(normalCdf(1.959964)).toBeCloseTo(0.975, 6);
  });
});

describe('sweep', () => {
  it('maps knobs to the unit cube and back (prefill_load_scale on a log scale)', () => {
    for (const k of gridPoints(SEED001_GRID)) {
      const back = unitToKnobs(knobsToUnit(k));
      expect(back.overlapScoreCredit).toBeCloseTo(k.overlapScoreCredit, 12);
      expect(back.prefillLoadScale).toBeCloseTo(k.prefillLoadScale, 9);
      expect(back.temperature).toBeCloseTo(k.temperature, 12);
    }
    expect(knobsToUnit({ overlapScoreCredit: 1, prefillLoadScale: 32, temperature: 0 })[1]).toBeCloseTo(1, 12);
    expect(knobsToUnit({ overlapScoreCredit: 1, prefillLoadScale: 0, temperature: 0 })[1]).toBe(0);
  });

  it('grid search evaluates every grid point once', () => {
    const seen: string[] = [];
    const trials = gridSearch(gridPoints(SEED001_GRID), (k) => {
      seen.push(knobsKey(k));
      return fakeMetrics(1000 + k.prefillLoadScale);
    });
    expect(trials).toHaveLength(3 * 9 * 4);
    expect(new Set(seen).size).toBe(108);
    for (const c of SEED001_GRID.overlapScoreCredit)
      for (const s of SEED001_GRID.prefillLoadScale)
        for (const t of SEED001_GRID.temperature) expect(seen).toContain(knobsKey({ overlapScoreCredit: c, prefillLoadScale: s, temperature: t }));
    expect(trials.every((t) => t.objective === 1000 + t.knobs.prefillLoadScale)).toBe(true);
  });

  it('smart search is deterministic and improves on its initial design', () => {
    // A bowl with its minimum at credit 0.9, scale 16, temperature 0.
    const target = knobsToUnit({ overlapScoreCredit: 0.9, prefillLoadScale: 16, temperature: 0 });
    const objective = (k: RouterKnobs): number => {
      const u = knobsToUnit(k);
      return 1000 + 400 * u.reduce((a, v, i) => a + (v - target[i]!) ** 2, 0);
    };
    const run = () => smartSearch((k) => fakeMetrics(objective(k)), { budget: 22, initial: 6, seed: 5 });
    const a = run();
    const b = run();
    expect(b.trials.map((t) => t.knobs)).toEqual(a.trials.map((t) => t.knobs));
    expect(a.trials).toHaveLength(22);
    expect(a.trials[0]!.knobs).toEqual({ overlapScoreCredit: 1, prefillLoadScale: 1, temperature: 0 });
    const initialBest = Math.min(...a.trials.slice(0, 6).map((t) => t.objective));
    const best = Math.min(...a.trials.map((t) => t.objective));
    expect(best).toBeLessThan(initialBest);
    expect(best).toBeLessThan(1000 + 400 * 0.01);
    expect(a.trials.slice(6).every((t) => t.method === 'ei' && t.predicted !== undefined)).toBe(true);
  });

  it('renders a self-contained HTML report with inline SVG', () => {
    const trials = gridSearch(gridPoints({ overlapScoreCredit: [1], prefillLoadScale: [1, 4], temperature: [0] }), (k) => fakeMetrics(1000 - k.prefillLoadScale));
    const m = fakeMetrics(1000);
    const html = renderSweepReportHtml({
      objective: 'mean_e2e_ms',
      settings: { tuneTrace: 't<1>', validateTrace: null, workers: 2, concurrency: 4, engine: { timing: 'mocker polynomial' }, seed: 1, method: 'grid', budget: 2 },
      trials,
      best: trials[1]!,
      gp: null,
      responseCurve: [{ prefillLoadScale: 1, metrics: m }, { prefillLoadScale: 4, metrics: m }],
      comparisons: [{ trace: 't', requests: 1, concurrency: 4, rows: [{ label: 'round_robin', router: 'round_robin', metrics: m }] }],
      deltas: [],
      wallS: 1,
      replays: 2,
    });
    expect(html).toContain('<svg');
    expect(html).toContain('t&lt;1&gt;');
    expect(html).not.toMatch(/<script|src="http/);
  });
});
