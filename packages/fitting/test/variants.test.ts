// One frozen fit, five variants: the same fitted numbers under each rule, the
// count rules with their own searches' thresholds, versions traceable to the fit.
import { describe, expect, it } from 'vitest';
import { VARIANTS, serializeParameterSet, loadParameterSet } from '@vantage/rules';
import { fitAll, variantParameterSet, type FitReport, type FitResult } from '../src/index';
import { DISABLED_R } from '../src/variants';
import { synthesize } from './synthetic';

function ok(r: FitResult): Extract<FitResult, { ok: true }> {
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r;
}

const fit = ok(fitAll(synthesize(), { seed: 3, createdAt: '2026-03-01T12:00:00Z' }));

/** The report with other search results, as a fit on different data could have produced. */
function withBest(report: FitReport, count: { r: number | null }, countPrefill: { r: number | null; p: number | null }): FitReport {
  return {
    ...report,
    thresholds: {
      count: { ...report.thresholds.count, best: { ...report.thresholds.count.best, ...count, p: null } },
      countPrefill: { ...report.thresholds.countPrefill, best: { ...report.thresholds.countPrefill.best, ...countPrefill } },
    },
  };
}

describe('variantParameterSet', () => {
  it('switches only the rule: models, margins and gate are the fitted ones, the version names fit and variant', () => {
    for (const v of VARIANTS) {
      const r = variantParameterSet(fit.parameterSet, fit.report, v);
      if (!r.ok) throw new Error(r.errors.join('; '));
      const s = r.value;
      expect(s.variant).toBe(v);
      expect(s.version).toBe(`${fit.parameterSet.version}+${v}`);
      expect(s.models).toEqual(fit.parameterSet.models);
      expect(s.margins).toEqual(fit.parameterSet.margins);
      expect(s.gate).toEqual(fit.parameterSet.gate);
      expect(s.provenance?.['fittedVersion']).toBe(fit.parameterSet.version);
      // What the decision service loads from the file.
      expect(loadParameterSet(serializeParameterSet(s)).ok).toBe(true);
    }
  });

  it('gives each count rule the thresholds its own search selected', () => {
    const report = withBest(fit.report, { r: 3 }, { r: 5, p: 1.5 });
    const count = variantParameterSet(fit.parameterSet, report, 'count');
    const cp = variantParameterSet(fit.parameterSet, report, 'count_prefill');
    const cache = variantParameterSet(fit.parameterSet, report, 'cache');
    expect(count.ok && count.value.thresholds).toEqual({ r: 3, p: null });
    expect(cp.ok && cp.value.thresholds).toEqual({ r: 5, p: 1.5 });
    expect(cache.ok && cache.value.thresholds).toEqual(fit.parameterSet.thresholds);
  });

  it('runs a count rule whose search chose the disabled term as one that never triggers, and says so', () => {
    const report = withBest(fit.report, { r: null }, { r: null, p: null });
    for (const v of ['count', 'count_prefill'] as const) {
      const r = variantParameterSet(fit.parameterSet, report, v);
      if (!r.ok) throw new Error(r.errors.join('; '));
      expect(r.value.thresholds).toEqual({ r: DISABLED_R, p: null });
      expect(JSON.stringify(r.value.provenance?.['notes'])).toContain('disabled term');
    }
    // count_prefill with only the prefill term enabled keeps it as selected.
    const p = variantParameterSet(fit.parameterSet, withBest(fit.report, { r: null }, { r: null, p: 0.75 }), 'count_prefill');
    expect(p.ok && p.value.thresholds).toEqual({ r: null, p: 0.75 });
  });

  it('refuses a report of another fit', () => {
    const r = variantParameterSet(fit.parameterSet, { ...fit.report, parameterSetVersion: 'other' }, 'count');
    expect(r.ok).toBe(false);
  });
});
