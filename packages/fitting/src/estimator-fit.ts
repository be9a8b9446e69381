/**
 * One estimator of one model: build the ridge design from the fitting
 * split's measurements, choose lambda by grouped CV, refit on the whole
 * fitting split, and measure held-out errors with the very prediction
 * functions the decision uses (@vantage/rules `predictBlind`/`predictCache`).
 */
import { lookupQ, standardize, type ModelParameters, type QTable, type Standardization } from '@vantage/rules';
import { predictRow, type Estimator } from './margins';
import { cachedFraction } from './qtable';
import { crossValidateRidge, DEFAULT_CV_FOLDS, DEFAULT_LAMBDAS, ridgeSolve, type CvPoint, type FeatureName } from './ridge';
import type { CalibrationRow } from './rows';
import type { SplitName } from './splits';
import { summarizeErrors, type ErrorSummary } from './stats';

/** Coefficients in the order [intercept, N, R, P]: (b0, bN, bR, bP) or (c0, cN, cR, cP). */
export type Coefficients = readonly [number, number, number, number];

export interface ResidualPoint {
  readonly split: SplitName;
  readonly conditionId: string;
  readonly predictedMs: number;
  readonly measuredMs: number;
}

export interface EstimatorFit {
  readonly estimator: Estimator;
  readonly coefficients: Coefficients;
  readonly lambda: number;
  readonly cvCurve: readonly CvPoint[];
  readonly cvFolds: number;
  /** Fitting-split rows in the regression. */
  readonly trainingRows: number;
  /** Fitting-split rows left out, by reason. */
  readonly excluded: Readonly<Record<string, number>>;
  /** Errors of measured - predicted TTFT per split (fitting = in-sample). */
  readonly errors: Readonly<Record<SplitName, ErrorSummary>>;
  readonly residuals: readonly ResidualPoint[];
}

interface Design {
  readonly x: number[][];
  readonly y: number[];
  readonly groups: string[];
  readonly excluded: Record<string, number>;
}

const FEATURE_INDEX: Record<FeatureName, number> = { logN: 1, logR: 2, logP: 3 };

/**
 * Regression rows: y = TTFT - Q(N, f), x = [1, zN, zR, zP] restricted to the
 * active columns (constant features dropped). f = 0 for the blind estimator
 * (K = 0 in fitting, as in prediction), K / N for the cache-aware one.
 */
function buildDesign(rows: readonly CalibrationRow[], table: QTable, s: Standardization, estimator: Estimator, active: readonly number[]): Design {
  const x: number[][] = [];
  const y: number[] = [];
  const groups: string[] = [];
  const excluded: Record<string, number> = {};
  for (const r of rows) {
    if (r.p === null) {
      excluded['p_unknown'] = (excluded['p_unknown'] ?? 0) + 1;
      continue;
    }
    const q = lookupQ(table, r.n, estimator === 'blind' ? 0 : cachedFraction(r.n, r.k));
    if (!q.ok) {
      excluded[`q_${q.problem}`] = (excluded[`q_${q.problem}`] ?? 0) + 1;
      continue;
    }
    const full = [1, standardize(r.n, s.logN), standardize(r.r, s.logR), standardize(r.p, s.logP)];
    x.push(active.map((j) => full[j] as number));
    y.push(r.ttftMs - q.valueMs);
    groups.push(r.conditionId);
  }
  return { x, y, groups, excluded };
}

/**
 * A model with both estimators' coefficients. Keys in the parameter-set
 * schema's order, so the written file reads name, qTable, standardization,
 * blind, cache.
 */
export function withCoefficients(m: Omit<ModelParameters, 'blind' | 'cache'>, b: Coefficients, c: Coefficients) {
  const blind = { b0: b[0], bN: b[1], bR: b[2], bP: b[3] };
  const cache = { c0: c[0], cN: c[1], cR: c[2], cP: c[3] };
  return { name: m.name, qTable: m.qTable, standardization: m.standardization, blind, cache } satisfies ModelParameters;
}

interface EstimatorFitInput {
  readonly estimator: Estimator;
  readonly name: string;
  readonly qTable: QTable;
  readonly standardization: Standardization;
  readonly constant: readonly FeatureName[];
  /** This model's measurements per split. */
  readonly rows: Readonly<Record<SplitName, readonly CalibrationRow[]>>;
  readonly seed: number;
}

export function fitEstimator(input: EstimatorFitInput): { ok: true; value: EstimatorFit } | { ok: false; reason: string } {
  const active = [0, 1, 2, 3].filter((j) => !input.constant.some((f) => FEATURE_INDEX[f] === j));
  const penalize = active.map((j) => j !== 0);
  const design = buildDesign(input.rows.fitting, input.qTable, input.standardization, input.estimator, active);
  const label = `${input.name} ${input.estimator}`;
  if (design.y.length === 0) return { ok: false, reason: `${label}: no usable fitting rows (${JSON.stringify(design.excluded)})` };
  const cv = crossValidateRidge(design.x, design.y, design.groups, DEFAULT_LAMBDAS, penalize, { folds: DEFAULT_CV_FOLDS, seed: input.seed });
  if (!cv.ok) return { ok: false, reason: `${label}: ${cv.reason}` };
  const fit = ridgeSolve(design.x, design.y, cv.value.lambda, penalize);
  if (!fit.ok) return { ok: false, reason: `${label}: final fit at lambda ${cv.value.lambda}: ${fit.reason}` };
  const full = [0, 0, 0, 0];
  active.forEach((j, i) => (full[j] = fit.beta[i] as number));
  const coefficients = full as unknown as Coefficients;

  // Both estimators get these coefficients: predictRow reads only input.estimator's.
  const model = withCoefficients(input, coefficients, coefficients);
  const residuals: ResidualPoint[] = [];
  const errors = {} as Record<SplitName, ErrorSummary>;
  for (const split of ['fitting', 'uncertainty', 'selection'] as const) {
    const es: number[] = [];
    for (const r of input.rows[split]) {
      const p = predictRow(model, input.estimator, r);
      if (!p.ok) continue;
      es.push(r.ttftMs - p.ms);
      residuals.push({ split, conditionId: r.conditionId, predictedMs: p.ms, measuredMs: r.ttftMs });
    }
    errors[split] = summarizeErrors(es);
  }
  return {
    ok: true,
    value: {
      estimator: input.estimator,
      coefficients,
      lambda: cv.value.lambda,
      cvCurve: cv.value.curve,
      cvFolds: cv.value.folds,
      trainingRows: design.y.length,
      excluded: design.excluded,
      errors,
      residuals,
    },
  };
}
