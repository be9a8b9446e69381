/**
 * The load correction of seed 000: "Fit a linear load correction with ridge
 * regression against measured TTFT minus Q. Choose regularization using
 * calibration data only."
 *
 *   y = TTFT - Q_m(N, f)        f = 0 (blind, K = 0) or K / N (cache-aware)
 *   x = [1, zN, zR, zP]          zX = (log(1 + X) - mean_X) / sd_X
 *   beta = (X'X + lambda I')^-1 X'y,   I' = diag(0, 1, 1, 1)
 *
 * The intercept is not penalised (README, "Standardisation and ridge").
 */
import type { FeatureScale, Standardization } from '@vantage/rules';
import { solveLinear } from './linalg';
import { mulberry32, shuffled } from '@vantage/random';
import { compareStrings, type CalibrationRow } from './rows';
import { mean, populationSd } from './stats';

export type FeatureName = 'logN' | 'logR' | 'logP';

interface StandardizationFit {
  readonly standardization: Standardization;
  /** Features with no spread in the fitting data: sd 1, coefficient exactly 0 (README, "sd = 0"). */
  readonly constant: readonly FeatureName[];
  readonly warnings: readonly string[];
}

/** Below this (relative to the mean's size) a spread is rounding noise, not signal. */
const SD_EPS = 1e-12;

function scaleOf(xs: readonly number[], name: FeatureName, warnings: string[], constant: FeatureName[]): FeatureScale {
  if (xs.length === 0) {
    warnings.push(`${name}: no values in the fitting data; mean 0, sd 1, coefficient fixed at 0`);
    constant.push(name);
    return { mean: 0, sd: 1 };
  }
  const m = mean(xs);
  const sd = populationSd(xs, m);
  if (!(sd > SD_EPS * Math.max(1, Math.abs(m)))) {
    warnings.push(`${name}: sd 0 in the fitting data (every value ${m}); sd set to 1 and coefficient fixed at 0`);
    constant.push(name);
    return { mean: m, sd: 1 };
  }
  return { mean: m, sd };
}

/**
 * Means and population sds of log(1 + N), log(1 + R), log(1 + P) over the
 * rows given, which must be the FITTING split only ("Standardization uses
 * means and standard deviations from fitting data only"). Rows without P
 * count for N and R only.
 */
export function fitStandardization(rows: readonly Pick<CalibrationRow, 'n' | 'r' | 'p'>[]): StandardizationFit {
  const warnings: string[] = [];
  const constant: FeatureName[] = [];
  const logN = scaleOf(rows.map((r) => Math.log1p(r.n)), 'logN', warnings, constant);
  const logR = scaleOf(rows.map((r) => Math.log1p(r.r)), 'logR', warnings, constant);
  const logP = scaleOf(rows.filter((r) => r.p !== null).map((r) => Math.log1p(r.p as number)), 'logP', warnings, constant);
  return { standardization: { logN, logR, logP }, constant, warnings };
}

type RidgeResult = { readonly ok: true; readonly beta: number[] } | { readonly ok: false; readonly reason: string };

/**
 * beta = (X'X + lambda diag(penalize))^-1 X'y. `penalize[j]` false leaves
 * column j unpenalised (the intercept).
 */
export function ridgeSolve(x: readonly (readonly number[])[], y: readonly number[], lambda: number, penalize: readonly boolean[]): RidgeResult {
  const p = penalize.length;
  if (x.length !== y.length) return { ok: false, reason: 'X and y have different numbers of rows' };
  if (x.length === 0) return { ok: false, reason: 'no rows' };
  if (!(Number.isFinite(lambda) && lambda >= 0)) return { ok: false, reason: `lambda = ${lambda} must be finite and >= 0` };
  const a = Array.from({ length: p }, () => new Array<number>(p).fill(0));
  const b = new Array<number>(p).fill(0);
  x.forEach((row, i) => {
    if (row.length !== p) throw new RangeError(`row ${i} has ${row.length} features, expected ${p}`);
    const yi = y[i] as number;
    for (let j = 0; j < p; j++) {
      const xj = row[j] as number;
      b[j] = (b[j] as number) + xj * yi;
      const aj = a[j] as number[];
      for (let k = 0; k < p; k++) aj[k] = (aj[k] as number) + xj * (row[k] as number);
    }
  });
  for (let j = 0; j < p; j++) if (penalize[j]) (a[j] as number[])[j] = ((a[j] as number[])[j] as number) + lambda;
  const s = solveLinear(a, b);
  return s.ok ? { ok: true, beta: s.x } : { ok: false, reason: s.reason };
}

function dot(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}

export const DEFAULT_LAMBDAS: readonly number[] = Object.freeze([0, 0.01, 0.1, 1, 10, 100, 1000]);
export const DEFAULT_CV_FOLDS = 5;

/**
 * Fold of each group: sorted distinct groups, shuffled with the seed, dealt
 * round-robin into min(folds, groups) folds. All rows of a condition share a
 * fold, so held-out error is error on unseen conditions, not on unseen
 * repeats of seen ones (which would favour too little regularisation).
 */
export function groupFolds(groups: readonly string[], folds: number, seed: number): Map<string, number> {
  const ids = [...new Set(groups)].sort(compareStrings);
  const k = Math.max(1, Math.min(folds, ids.length));
  const out = new Map<string, number>();
  shuffled(ids, mulberry32(seed)).forEach((id, i) => out.set(id, i % k));
  return out;
}

export interface CvPoint {
  readonly lambda: number;
  /** Mean squared error over all held-out rows; null when some fold's system was singular. */
  readonly mse: number | null;
  readonly note?: string;
}

interface CvResult {
  readonly curve: readonly CvPoint[];
  readonly folds: number;
  readonly lambda: number;
}

/** Relative tolerance under which two CV errors count as a tie (then the larger lambda wins). */
const TIE = 1e-9;

/**
 * Grouped K-fold CV of ridge over `lambdas`; pick the minimum mean squared
 * error, ties going to the larger lambda (more regularisation for the same
 * evidence). Needs at least two groups.
 */
export function crossValidateRidge(
  x: readonly (readonly number[])[],
  y: readonly number[],
  groups: readonly string[],
  lambdas: readonly number[],
  penalize: readonly boolean[],
  opts: { readonly folds: number; readonly seed: number },
): { ok: true; value: CvResult } | { ok: false; reason: string } {
  const foldOf = groupFolds(groups, opts.folds, opts.seed);
  const k = new Set(foldOf.values()).size;
  if (k < 2) return { ok: false, reason: `cross-validation needs at least 2 workload conditions, has ${foldOf.size}` };
  const rowFold = groups.map((g) => foldOf.get(g) as number);
  const curve: CvPoint[] = [];
  for (const lambda of lambdas) {
    let sse = 0;
    let count = 0;
    let note: string | undefined;
    for (let f = 0; f < k; f++) {
      const trX: (readonly number[])[] = [];
      const trY: number[] = [];
      for (let i = 0; i < x.length; i++) {
        if (rowFold[i] !== f) {
          trX.push(x[i] as readonly number[]);
          trY.push(y[i] as number);
        }
      }
      const fit = ridgeSolve(trX, trY, lambda, penalize);
      if (!fit.ok) {
        note = `fold ${f}: ${fit.reason}`;
        break;
      }
      for (let i = 0; i < x.length; i++) {
        if (rowFold[i] !== f) continue;
        const e = (y[i] as number) - dot(fit.beta, x[i] as readonly number[]);
        sse += e * e;
        count++;
      }
    }
    curve.push(note === undefined ? { lambda, mse: sse / count } : { lambda, mse: null, note });
  }
  let best: CvPoint | undefined;
  for (const pt of curve) {
    if (pt.mse === null) continue;
    if (best === undefined || best.mse === null) best = pt;
    else if (pt.mse < best.mse * (1 - TIE)) best = pt;
    else if (pt.mse <= best.mse * (1 + TIE) && pt.lambda > best.lambda) best = pt;
  }
  if (best === undefined) return { ok: false, reason: `every lambda gave a singular system (${curve.map((c) => c.note).join('; ')})` };
  return { ok: true, value: { curve, folds: k, lambda: best.lambda } };
}
