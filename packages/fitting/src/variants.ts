/**
 * One frozen fit, five variants. Seed 000: "Tables, coefficients, thresholds,
 * margins and destination limits stay fixed during each evaluation run." The
 * fit writes one parameter set (one `variant`); an evaluation runs every
 * variant with the same fitted numbers, so each variant's set is the fitted
 * one with only the rule switched and, for the count rules, the thresholds
 * that rule's own search selected (count: r alone; count + prefill: r and p).
 *
 * Versions stay traceable to the fit: `<fitted version>+<variant>`.
 *
 * When a count search found that no threshold beats Stage (its disabled term
 * won), the schema still needs a term for the variant to exist; the variant is
 * then run with r larger than any count the gate lets through
 * (`DISABLED_R`), i.e. it never triggers: it probes like every experimental
 * variant and keeps Stage's choice, which is what the fit selected. The
 * provenance says so.
 */
import { validateParameterSet, type ParameterSet, type Thresholds, type Variant } from '@vantage/rules';
import type { FitReport } from './fit';

/** A request count no worker reaches: the count term is effectively disabled. */
export const DISABLED_R = 1_000_000;

type VariantSetResult = { readonly ok: true; readonly value: ParameterSet } | { readonly ok: false; readonly errors: readonly string[] };

export function variantParameterSet(fitted: ParameterSet, report: Pick<FitReport, 'thresholds' | 'parameterSetVersion'>, variant: Variant): VariantSetResult {
  if (report.parameterSetVersion !== fitted.version) {
    return { ok: false, errors: [`the report is of parameter set ${report.parameterSetVersion}, not ${fitted.version}`] };
  }
  // The thresholds the variant's own search selected (null terms: disabled).
  const { count, countPrefill } = report.thresholds;
  let thresholds: Thresholds = fitted.thresholds;
  if (variant === 'count') thresholds = { r: count.best.r, p: null };
  if (variant === 'count_prefill') thresholds = { r: countPrefill.best.r, p: countPrefill.best.p };
  const notes: string[] = [];
  if ((variant === 'count' && thresholds.r === null) || (variant === 'count_prefill' && thresholds.r === null && thresholds.p === null)) {
    notes.push(`the ${variant} search selected the disabled term (no threshold beat Stage on the fitting split): r = ${DISABLED_R} never triggers`);
    thresholds = { r: DISABLED_R, p: null };
  }
  const doc = {
    ...fitted,
    version: `${fitted.version}+${variant}`,
    variant,
    thresholds,
    provenance: { ...(fitted.provenance ?? {}), fittedVersion: fitted.version, evaluationVariant: variant, ...(notes.length > 0 ? { notes } : {}) },
  };
  return validateParameterSet(doc);
}
