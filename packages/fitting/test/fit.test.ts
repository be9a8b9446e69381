// End to end: rows generated from known coefficients plus noise are fitted,
// the coefficients come back, and the parameter set is one @vantage/rules
// loads and decides with. Also: standardisation sees the fitting split only.
import { describe, expect, it } from 'vitest';
import { decide, loadParameterSet, observed, serializeParameterSet, type CandidateReport } from '@vantage/rules';
import type { WorkerId } from '@vantage/types';
import { fitAll, renderFitReportHtml, type CalibrationRow, type FitResult } from '../src/index';
import { fitStandardization } from '../src/ridge';
import { synthesize, TRUTH } from './synthetic';

const createdAt = '2026-03-01T12:00:00Z';
const rows = synthesize();

function ok(r: FitResult): Extract<FitResult, { ok: true }> {
  if (!r.ok) throw new Error(`${r.errors.join('; ')} ${JSON.stringify(r.problems.slice(0, 3))}`);
  return r;
}

const fit = ok(fitAll(rows, { seed: 3, createdAt }));

describe('fitAll on synthetic calibration data', () => {
  it('recovers the true load correction of the cache-aware estimator for both models', () => {
    for (const role of ['efficient', 'capable'] as const) {
      const m = fit.report.models[role];
      const s = m.standardization;
      const [c0, cN, cR, cP] = m.estimators.cache.coefficients;
      const t = TRUTH[role];
      // z-space coefficients back to the generating log-space slopes.
      expect(Math.abs(cR / s.logR.sd - t.betaR) / t.betaR).toBeLessThan(0.03);
      expect(Math.abs(cP / s.logP.sd - t.betaP) / t.betaP).toBeLessThan(0.03);
      expect(Math.abs(cN / s.logN.sd)).toBeLessThan(5);
      expect(Math.abs(c0 - (t.betaR * s.logR.mean + t.betaP * s.logP.mean))).toBeLessThan(10);
      // Held-out errors at the noise level (sd 8 ms).
      expect(m.estimators.cache.errors.uncertainty.rmseMs).toBeLessThan(12);
      expect(m.estimators.cache.errors.selection.rmseMs).toBeLessThan(12);
      // The blind estimator cannot see the cache, and its errors show it.
      expect(m.estimators.blind.errors.uncertainty.rmseMs).toBeGreaterThan(5 * m.estimators.cache.errors.uncertainty.rmseMs);
    }
  });

  it('writes a parameter set rules loads, with the fitted values, that decide uses', () => {
    const text = serializeParameterSet(fit.parameterSet);
    const loaded = loadParameterSet(text);
    if (!loaded.ok) throw new Error(loaded.errors.join('; '));
    const set = loaded.value;
    expect(set.variant).toBe('cache');
    expect(set.version).toMatch(/^20260301T120000Z-[0-9a-f]{12}$/);
    expect(set.margins.deltaCacheMs).toBe(fit.report.margins.cache.marginMs);
    expect(set.margins.deltaBlindMs).toBe(fit.report.margins.blind.marginMs);
    expect(set.models.efficient.name).toBe(TRUTH.efficient.name);
    expect(set.models.capable.cache.cR).toBe(fit.report.models.capable.estimators.cache.coefficients[2]);

    const obs = (model: string, n: number, k: number, r: number, p: number): CandidateReport => ({
      kind: 'observed',
      observation: {
        model,
        placement: { workerId: 3n as WorkerId, dpRank: 0 },
        schedulable: observed.ok(true, 1),
        promptTokens: observed.ok(n, 1),
        reusablePrefixTokens: observed.ok(k, 1),
        bookedRequests: observed.ok(r, 1),
        prefillPressure: observed.ok(p, 1),
        suspicions: [],
      },
    });
    const d = decide({ proposal: 'efficient', efficient: obs(TRUTH.efficient.name, 20000, 0, 7, 3), capable: obs(TRUTH.capable.name, 20000, 0, 0, 0), localCapableInFlight: 0 }, set);
    expect(d.reason).toBe('overrode');
    const pe = d.predictions.efficient?.cache;
    expect(pe?.ok).toBe(true);
    // Against the generating truth, within a few noise sds.
    if (pe?.ok) expect(Math.abs(pe.ms - (30 + 0.022 * 20000 + 250 * Math.log1p(7) + 300 * Math.log1p(3)))).toBeLessThan(25);
  });

  it('reports splits without shared conditions, thresholds, margins and residuals', () => {
    const { splits } = fit.report;
    const all = [...splits.fitting.conditionIds, ...splits.uncertainty.conditionIds, ...splits.selection.conditionIds];
    expect(new Set(all).size).toBe(all.length);
    expect(all.length).toBe(fit.report.input.conditions);
    expect(fit.report.thresholds.count.table.length).toBeGreaterThan(1);
    expect(fit.report.thresholds.count.best.meanSelectedTtftMs).toBeLessThan(fit.report.thresholds.count.stageMeanTtftMs);
    expect(fit.report.margins.cache.perCondition.length).toBe(splits.uncertainty.conditionIds.length);
    // Residuals of the split rows only: the Q set is in no split.
    expect(fit.report.models.efficient.estimators.cache.residuals.length).toBe(rows.filter((r) => r.role === 'efficient' && r.qSet !== true).length);
    expect(fit.report.input.qSetConditions).toBe(new Set(rows.filter((r) => r.qSet === true).map((r) => r.conditionId)).size);
    for (const id of all) expect(id.startsWith('idle-')).toBe(false);
    expect(fit.report.models.efficient.qMeasurements).toBe(rows.filter((r) => r.role === 'efficient' && r.qSet === true).length);
    expect(fit.report.models.efficient.estimators.cache.cvCurve.map((c) => c.lambda)).toEqual([0, 0.01, 0.1, 1, 10, 100, 1000]);
  });

  it('is deterministic for a seed and changes with it', () => {
    const again = ok(fitAll([...rows].reverse(), { seed: 3, createdAt }));
    expect(again.parameterSet.version).toBe(fit.parameterSet.version);
    expect(again.report.splits).toEqual(fit.report.splits);
    const other = ok(fitAll(rows, { seed: 4, createdAt }));
    expect(other.report.splits.fitting.conditionIds).not.toEqual(fit.report.splits.fitting.conditionIds);
  });

  it('standardises from the fitting split only: changing other splits moves margins, not scales or coefficients', () => {
    const notFitting = new Set([...fit.report.splits.uncertainty.conditionIds, ...fit.report.splits.selection.conditionIds]);
    const changed: CalibrationRow[] = rows.map((r) =>
      notFitting.has(r.conditionId) && !r.noBackgroundLoad ? { ...r, n: r.n + 1, r: r.r * 3 + 1, p: (r.p ?? 0) * 2 + 1, ttftMs: r.ttftMs + 40 } : r,
    );
    const refit = ok(fitAll(changed, { seed: 3, createdAt }));
    expect(refit.report.splits).toEqual(fit.report.splits);
    for (const role of ['efficient', 'capable'] as const) {
      expect(refit.report.models[role].standardization).toEqual(fit.report.models[role].standardization);
      expect(refit.report.models[role].estimators.cache.coefficients).toEqual(fit.report.models[role].estimators.cache.coefficients);
      expect(refit.report.models[role].estimators.blind.coefficients).toEqual(fit.report.models[role].estimators.blind.coefficients);
    }
    expect(refit.report.margins.cache.marginMs).not.toBe(fit.report.margins.cache.marginMs);
  });

  it('and a change inside the fitting split does move them (the check above can fail)', () => {
    const fitting = new Set(fit.report.splits.fitting.conditionIds);
    const changed = rows.map((r) => (fitting.has(r.conditionId) && !r.noBackgroundLoad ? { ...r, r: r.r + 1 } : r));
    const refit = ok(fitAll(changed, { seed: 3, createdAt }));
    expect(refit.report.models.efficient.standardization.logR).not.toEqual(fit.report.models.efficient.standardization.logR);
  });

  it('fits the count variants from the threshold search', () => {
    const count = ok(fitAll(rows, { seed: 3, createdAt, variant: 'count' }));
    expect(count.parameterSet.variant).toBe('count');
    expect(count.parameterSet.thresholds).toEqual({ r: count.report.thresholds.count.best.r, p: null });
    expect(count.parameterSet.thresholds.r).not.toBeNull();
    const cp = ok(fitAll(rows, { seed: 3, createdAt, variant: 'count_prefill' }));
    expect(cp.parameterSet.thresholds).toEqual({ r: cp.report.thresholds.countPrefill.best.r, p: cp.report.thresholds.countPrefill.best.p });
  });

  it('searches thresholds off the selection split: selection TTFTs move the rule choice, never r or p', () => {
    expect(fit.report.thresholds.count.pairs).toBe(fit.report.splits.fitting.pairs);
    expect(fit.report.thresholds.countPrefill.pairs).toBe(fit.report.splits.fitting.pairs);
    const selection = new Set(fit.report.splits.selection.conditionIds);
    // Capable made much slower on the selection split only.
    const changed = rows.map((r) => (selection.has(r.conditionId) && r.role === 'capable' ? { ...r, ttftMs: r.ttftMs + 3000 } : r));
    const refit = ok(fitAll(changed, { seed: 3, createdAt }));
    expect(refit.report.splits).toEqual(fit.report.splits);
    expect(refit.report.thresholds.count.best).toEqual(fit.report.thresholds.count.best);
    expect(refit.report.thresholds.countPrefill.best).toEqual(fit.report.thresholds.countPrefill.best);
    expect(refit.report.selection).not.toEqual(fit.report.selection);
  });

  it('chooses one threshold rule and one estimator on the selection split, and the report names them', () => {
    const { chosen } = fit.report;
    expect(['count', 'count_prefill']).toContain(chosen.thresholdRule.variant);
    expect(['blind', 'cache']).toContain(chosen.estimator.variant);
    const sel = fit.report.selection;
    const byRule = (prefix: string) => sel.find((c) => c.rule.startsWith(prefix));
    const rule = byRule(chosen.thresholdRule.rule);
    const other = byRule(chosen.thresholdRule.variant === 'count' ? 'count_prefill' : 'count ');
    expect(rule && other && rule.meanSelectedTtftMs <= other.meanSelectedTtftMs).toBe(true);
    expect(chosen.thresholdRule.pairs).toBe(fit.report.splits.selection.pairs);
    const html = renderFitReportHtml(fit.report);
    expect(html).toContain(`chosen threshold rule: ${chosen.thresholdRule.rule}`);
    expect(html).toContain(`chosen estimator: ${chosen.estimator.rule}`);
  });

  it('renders a self-contained HTML report', () => {
    const html = renderFitReportHtml(fit.report);
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/<script|<link|\bsrc=|@import|url\(/i);
    // The only URL is the SVG namespace.
    expect([...html.matchAll(/https?:\/\/[^"\s]+/g)].every((m) => m[0] === 'http://www.w3.org/2000/svg')).toBe(true);
    expect(html.match(/<svg /g)?.length).toBe(2 * 2 * 3 + 2);
    expect(html).toContain(fit.parameterSet.version);
    expect(html).toContain('Threshold search: count + prefill');
  });
});

describe('fitAll refusals', () => {
  it('refuses bad rows and names their lines', () => {
    const bad = [...rows.slice(0, 10), { ...(rows[10] as CalibrationRow), line: 77, ttftMs: -1 }];
    const r = fitAll(bad);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems).toEqual([{ line: 77, message: 'TTFT = -1 ms must be a positive finite time' }]);
  });

  it('refuses data with one candidate only', () => {
    const r = fitAll(rows.filter((x) => x.role === 'efficient'));
    expect(!r.ok && r.errors[0]).toMatch(/no capable measurements/);
  });

  it('refuses a count variant when Stage beats every threshold', () => {
    // Capable always slower: no override helps.
    const slowCap = rows.map((x) => (x.role === 'capable' ? { ...x, ttftMs: x.ttftMs + 5000 } : x));
    const r = fitAll(slowCap, { seed: 3, variant: 'count' });
    expect(!r.ok && r.errors.join()).toMatch(/disabled term is best/);
  });

  it('builds Q from the Q set alone, so one measurement per grid cell suffices', () => {
    const sparse = synthesize({ idleVariants: 1 });
    const r = ok(fitAll(sparse, { seed: 3 }));
    for (const role of ['efficient', 'capable'] as const) expect(r.report.models[role].qCells.every((c) => c.source === 'measured')).toBe(true);
  });

  it('refuses data without a Q set by default, and a Q table the fitting split cannot cover with qSource fitting', () => {
    // No Q set, one idle condition per cell: the fitting split misses whole grid rows or corners.
    const sparse = synthesize({ idleVariants: 1, qSet: false });
    const byDefault = fitAll(sparse, { seed: 3 });
    expect(!byDefault.ok && byDefault.errors.join()).toMatch(/no Q-set measurements/);
    const strict = fitAll(sparse, { seed: 3, qSource: 'fitting' });
    expect(strict.ok).toBe(false);
    if (!strict.ok) expect(strict.errors.join()).toMatch(/Q from fitting no-contention rows/);
    expect(fitAll(sparse, { seed: 3, qSource: 'all' }).ok).toBe(true);
  });

  it('refuses a condition that is Q set in one row and contention in another', () => {
    const mixed = rows.map((r, i) => (i === 0 ? { ...r, qSet: r.qSet !== true } : r));
    const r = fitAll(mixed, { seed: 3 });
    expect(!r.ok && r.problems.some((p) => /Q set or contention, never both/.test(p.message))).toBe(true);
  });

  it('refuses bad options', () => {
    const r = fitAll(rows, { fractions: { fitting: 0.5, uncertainty: 0.5, selection: 0.5 }, seed: -1 });
    expect(!r.ok && r.errors.length).toBe(2);
  });
});

describe('standardisation', () => {
  it('means and population sds of log(1 + x), by hand', () => {
    const e = Math.E;
    const s = fitStandardization([
      { n: e - 1, r: 0, p: null },
      { n: e ** 3 - 1, r: e ** 2 - 1, p: 3 },
    ]);
    expect(s.standardization.logN.mean).toBeCloseTo(2, 12);
    expect(s.standardization.logN.sd).toBeCloseTo(1, 12);
    expect(s.standardization.logR.mean).toBeCloseTo(1, 12);
    expect(s.standardization.logR.sd).toBeCloseTo(1, 12);
    // P known on one row only: its own value, no spread -> sd 1, constant.
    expect(s.standardization.logP).toEqual({ mean: Math.log1p(3), sd: 1 });
    expect(s.constant).toEqual(['logP']);
  });

  it('a feature without spread gets sd 1, a warning and a zero coefficient', () => {
    const noP = rows.map((r) => ({ ...r, p: 0 }));
    const r = ok(fitAll(noP, { seed: 3, createdAt }));
    const m = r.report.models.efficient;
    expect(m.standardization.logP).toEqual({ mean: 0, sd: 1 });
    expect(m.constantFeatures).toEqual(['logP']);
    expect(m.estimators.cache.coefficients[3]).toBe(0);
    expect(m.estimators.blind.coefficients[3]).toBe(0);
    expect(r.report.warnings.join()).toMatch(/efficient standardisation logP: sd 0/);
  });
});
