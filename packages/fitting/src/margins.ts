/**
 * Estimator margins (seed 000): "On separate uncertainty data, take each
 * workload condition's largest absolute error in predicted time advantage,
 * then the 90th percentile across conditions. Calibrate each estimator
 * separately and compare with zero margin during development."
 *
 *   predicted advantage = T_eff - T_cap   (the fitted estimator, via @vantage/rules)
 *   measured advantage  = TTFT_eff - TTFT_cap   (the pair's two measurements)
 *   condition error     = max over its pairs of |predicted - measured|
 *   delta               = nearest-rank p90 of the condition errors
 *
 * A pair whose prediction fails is left out and counted: the rule falls back
 * to Stage there, so its error says nothing about the margin.
 */
import { predictBlind, predictCache, type ModelParameters, type Prediction } from '@vantage/rules';
import type { CalibrationPair, CalibrationRow, Role } from './rows';
import { compareStrings } from './rows';
import { percentileNearestRank } from './stats';
import { simulate, type RuleOutcome } from './thresholds';

export type Estimator = 'blind' | 'cache';
export const ESTIMATORS: readonly Estimator[] = ['blind', 'cache'];

/** The margin percentile the seed fixes. */
export const MARGIN_QUANTILE = 0.9;

type EstimatorModels = Readonly<Record<Role, ModelParameters>>;

/** The estimator's prediction for the measured candidate of a row (P unknown is invalid, as in `decide`). */
export function predictRow(model: ModelParameters, estimator: Estimator, row: CalibrationRow): Prediction {
  if (row.p === null) return { ok: false, problem: 'invalid', message: 'P unknown' };
  const x = { n: row.n, k: row.k, r: row.r, p: row.p };
  return estimator === 'blind' ? predictBlind(model, x) : predictCache(model, x);
}

export interface AdvantageError {
  readonly conditionId: string;
  readonly repeat: number;
  readonly predictedAdvantageMs: number;
  readonly measuredAdvantageMs: number;
  readonly absErrorMs: number;
}

export interface ConditionError {
  readonly conditionId: string;
  readonly maxAbsErrorMs: number;
  readonly pairs: number;
}

export interface MarginFit {
  readonly estimator: Estimator;
  readonly quantile: number;
  /** delta: nearest-rank percentile of the per-condition maximum errors. */
  readonly marginMs: number;
  readonly perCondition: readonly ConditionError[];
  readonly pairErrors: readonly AdvantageError[];
  /** Pairs left out because a prediction failed, by problem. */
  readonly excluded: Readonly<Record<string, number>>;
}

type PairAdvantage = { readonly ok: true; readonly predictedMs: number } | { readonly ok: false; readonly problem: string };

function predictedAdvantage(pair: CalibrationPair, models: EstimatorModels, estimator: Estimator): PairAdvantage {
  const e = predictRow(models.efficient, estimator, pair.efficient);
  if (!e.ok) return { ok: false, problem: `efficient_${e.problem}` };
  const c = predictRow(models.capable, estimator, pair.capable);
  if (!c.ok) return { ok: false, problem: `capable_${c.problem}` };
  return { ok: true, predictedMs: e.ms - c.ms };
}

/**
 * Calibrate one estimator's margin on the uncertainty split's pairs: per-condition max |error|, then the
 * nearest-rank percentile across conditions. Throws when no pair is usable.
 */
export function calibrateMargin(pairs: readonly CalibrationPair[], models: EstimatorModels, estimator: Estimator): MarginFit {
  const pairErrors: AdvantageError[] = [];
  const excluded: Record<string, number> = {};
  const by = new Map<string, { max: number; pairs: number }>();
  for (const pair of pairs) {
    const adv = predictedAdvantage(pair, models, estimator);
    if (!adv.ok) {
      excluded[adv.problem] = (excluded[adv.problem] ?? 0) + 1;
      continue;
    }
    const measuredAdvantageMs = pair.efficient.ttftMs - pair.capable.ttftMs;
    const absErrorMs = Math.abs(adv.predictedMs - measuredAdvantageMs);
    const { conditionId, repeat } = pair;
    pairErrors.push({ conditionId, repeat, predictedAdvantageMs: adv.predictedMs, measuredAdvantageMs, absErrorMs });
    const c = by.get(conditionId) ?? { max: 0, pairs: 0 };
    c.max = Math.max(c.max, absErrorMs);
    c.pairs++;
    by.set(conditionId, c);
  }
  if (by.size === 0) throw new RangeError('no workload condition with a usable pair to calibrate a margin on');
  const perCondition = [...by]
    .map(([conditionId, c]) => ({ conditionId, maxAbsErrorMs: c.max, pairs: c.pairs }))
    .sort((a, b) => compareStrings(a.conditionId, b.conditionId));
  const marginMs = percentileNearestRank(perCondition.map((c) => c.maxAbsErrorMs), MARGIN_QUANTILE);
  return { estimator, quantile: MARGIN_QUANTILE, marginMs, perCondition, pairErrors, excluded };
}

/**
 * The estimator rule on pairs, as `decide` applies it: capable proposals
 * kept; an efficient proposal changes to capable when G's destination limit
 * allows and T_eff - T_cap > margin; a failed prediction keeps Stage's choice.
 */
export function estimatorRuleChoice(pair: CalibrationPair, models: EstimatorModels, estimator: Estimator, marginMs: number, destinationLimit: number): Role {
  if (pair.proposal === 'capable') return 'capable';
  if (!(pair.capable.r < destinationLimit)) return 'efficient';
  const adv = predictedAdvantage(pair, models, estimator);
  return adv.ok && adv.predictedMs > marginMs ? 'capable' : 'efficient';
}

export function simulateEstimatorRule(pairs: readonly CalibrationPair[], models: EstimatorModels, estimator: Estimator, marginMs: number, destinationLimit: number): RuleOutcome {
  return simulate(pairs, (pair) => estimatorRuleChoice(pair, models, estimator, marginMs, destinationLimit));
}
