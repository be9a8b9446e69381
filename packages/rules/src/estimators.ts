/**
 * TTFT estimators of seed 000 ("Exact estimator formulas and calibration"):
 *
 *   zX_m      = (log(1 + X_m) - mean_X,m) / sd_X,m         X in {N, R, P}
 *   T_blind_m = Q_m(N_m, 0)         + b0 + bN zN + bR zR + bP zP
 *   T_cache_m = Q_m(N_m, K_m / N_m) + c0 + cN zN + cR zR + cP zP
 *
 * Q_m is measured TTFT with no competing requests on a grid of prompt lengths
 * x cached fractions, bilinearly interpolated. Everything is milliseconds.
 *
 * Nothing here throws: a prediction that cannot be trusted comes back as a
 * typed failure, because the decision must turn it into Stage's choice plus
 * a stated reason rather than a confident wrong answer.
 */

/**
 * Q_m table. `valuesMs[i][j]` is the TTFT measured at prompt length
 * `nGrid[i]` and cached fraction `fGrid[j]`. Both grids strictly increase;
 * `fGrid` lies in [0, 1] and starts at 0 (the cache-blind estimator always
 * reads the f = 0 column).
 *
 * Out of range: a point outside the measured grid is refused (`out_of_range`)
 * rather than extrapolated, because a linear extrapolation of TTFT beyond the
 * longest measured prompt is exactly where prefill's quadratic term makes it
 * wrong. A table may opt in to clamping an axis to its nearest edge (`clampN`,
 * `clampF`) when the fitting report shows the edge is a safe bound, e.g. a
 * grid that stops at f = 0.95 while agent turns often reuse 99 %.
 */
export interface QTable {
  readonly nGrid: readonly number[];
  readonly fGrid: readonly number[];
  readonly valuesMs: readonly (readonly number[])[];
  readonly clampN: boolean;
  readonly clampF: boolean;
}

/** Mean and standard deviation of log(1 + X) over the fitting data. */
export interface FeatureScale {
  readonly mean: number;
  readonly sd: number;
}

export interface Standardization {
  readonly logN: FeatureScale;
  readonly logR: FeatureScale;
  readonly logP: FeatureScale;
}

interface BlindCoefficients {
  readonly b0: number;
  readonly bN: number;
  readonly bR: number;
  readonly bP: number;
}

interface CacheCoefficients {
  readonly c0: number;
  readonly cN: number;
  readonly cR: number;
  readonly cP: number;
}

/** Everything the estimators need for one model. */
export interface ModelParameters {
  readonly name: string;
  readonly qTable: QTable;
  readonly standardization: Standardization;
  readonly blind: BlindCoefficients;
  readonly cache: CacheCoefficients;
}

/** Why a lookup or prediction cannot be trusted. */
type Failure = { readonly ok: false; readonly problem: 'out_of_range' | 'invalid'; readonly message: string };

type LookupResult = { readonly ok: true; readonly valueMs: number } | Failure;

export type Prediction =
  | {
      readonly ok: true;
      /** Predicted TTFT. */
      readonly ms: number;
      /** Q_m(N, f): the no-contention part. */
      readonly baseMs: number;
      /** The fitted load correction added to it. */
      readonly correctionMs: number;
      /** Cached fraction used for the lookup (0 for the blind estimator). */
      readonly f: number;
    }
  | Failure;

/** The load features both estimators read. */
interface EstimatorInputs {
  /** N, prompt tokens; must be > 0. */
  readonly n: number;
  /** K, reusable prefix tokens; clipped to [0, N]. Ignored by the blind estimator. */
  readonly k: number;
  /** R, booked requests; >= 0. */
  readonly r: number;
  /** P, prefill pressure; >= 0. */
  readonly p: number;
}

/** zX = (log(1 + x) - mean) / sd. log1p keeps precision for small counts such as R = 1. */
export function standardize(x: number, scale: FeatureScale): number {
  return (Math.log1p(x) - scale.mean) / scale.sd;
}

/**
 * Index i of the grid segment [grid[i], grid[i+1]] holding x, for x within
 * [grid[0], grid[last]]; the last segment holds the last point so that the
 * interpolation weight there is exactly 1.
 */
function segment(grid: readonly number[], x: number): number {
  let lo = 0;
  let hi = grid.length - 2;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((grid[mid] as number) <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Interpolation weight of x in [a, b]. Written so that x === a gives exactly
 * 0 and x === b exactly 1, which with `(1 - t) * u + t * v` below makes grid
 * points reproduce their measured values bit for bit.
 */
function weight(a: number, b: number, x: number): number {
  if (x <= a) return 0;
  if (x >= b) return 1;
  return (x - a) / (b - a);
}

function axis(
  grid: readonly number[],
  x: number,
  clamp: boolean,
  name: string,
): { ok: true; i: number; t: number } | Failure {
  const first = grid[0];
  const last = grid[grid.length - 1];
  if (grid.length < 2 || first === undefined || last === undefined) {
    return { ok: false, problem: 'invalid', message: `Q table ${name} grid has fewer than 2 points` };
  }
  if (!Number.isFinite(x)) return { ok: false, problem: 'invalid', message: `${name} = ${x} is not finite` };
  let v = x;
  if (v < first || v > last) {
    if (!clamp) {
      return { ok: false, problem: 'out_of_range', message: `${name} = ${x} outside Q table grid [${first}, ${last}]` };
    }
    v = v < first ? first : last;
  }
  const i = segment(grid, v);
  return { ok: true, i, t: weight(grid[i] as number, grid[i + 1] as number, v) };
}

/**
 * Q_m(N, f) by bilinear interpolation (linear in N and in f, not in log N:
 * the grid is where the measurements were taken, and the documentation of
 * the table says so). Exact on grid points, linear along grid edges.
 */
export function lookupQ(table: QTable, n: number, f: number): LookupResult {
  const an = axis(table.nGrid, n, table.clampN, 'N');
  if (!an.ok) return an;
  const af = axis(table.fGrid, f, table.clampF, 'f');
  if (!af.ok) return af;
  const row0 = table.valuesMs[an.i];
  const row1 = table.valuesMs[an.i + 1];
  const v00 = row0?.[af.i];
  const v01 = row0?.[af.i + 1];
  const v10 = row1?.[af.i];
  const v11 = row1?.[af.i + 1];
  if (v00 === undefined || v01 === undefined || v10 === undefined || v11 === undefined) {
    return { ok: false, problem: 'invalid', message: 'Q table values do not match its grids' };
  }
  const { t: tn } = an;
  const { t: tf } = af;
  const low = (1 - tf) * v00 + tf * v01;
  const high = (1 - tf) * v10 + tf * v11;
  const valueMs = (1 - tn) * low + tn * high;
  if (!Number.isFinite(valueMs) || valueMs <= 0) {
    return { ok: false, problem: 'invalid', message: `Q(${n}, ${f}) = ${valueMs} is not a positive finite time` };
  }
  return { ok: true, valueMs };
}

function checkInputs(x: EstimatorInputs): string | null {
  if (!Number.isFinite(x.n) || x.n <= 0) return `N = ${x.n} must be a positive finite number`;
  if (!Number.isFinite(x.r) || x.r < 0) return `R = ${x.r} must be a non-negative finite number`;
  if (!Number.isFinite(x.p) || x.p < 0) return `P = ${x.p} must be a non-negative finite number`;
  return null;
}

/** Q_m(N, f) plus the load correction k0 + kN zN + kR zR + kP zP, for inputs already checked. */
function predict(model: ModelParameters, x: EstimatorInputs, f: number, k0: number, kN: number, kR: number, kP: number): Prediction {
  const q = lookupQ(model.qTable, x.n, f);
  if (!q.ok) return q;
  const s = model.standardization;
  const baseMs = q.valueMs;
  const correctionMs = k0 + kN * standardize(x.n, s.logN) + kR * standardize(x.r, s.logR) + kP * standardize(x.p, s.logP);
  const ms = baseMs + correctionMs;
  if (!Number.isFinite(ms) || ms <= 0) {
    return {
      ok: false,
      problem: 'invalid',
      message: `predicted TTFT ${ms} ms (Q ${baseMs} + correction ${correctionMs}) is not a positive finite time`,
    };
  }
  return { ok: true, ms, baseMs, correctionMs, f };
}

/** T_blind_m = Q_m(N, 0) + b0 + bN zN + bR zR + bP zP. K is ignored (assumed 0). */
export function predictBlind(model: ModelParameters, x: EstimatorInputs): Prediction {
  const bad = checkInputs(x);
  if (bad !== null) return { ok: false, problem: 'invalid', message: bad };
  const b = model.blind;
  return predict(model, x, 0, b.b0, b.bN, b.bR, b.bP);
}

/** T_cache_m = Q_m(N, K/N) + c0 + cN zN + cR zR + cP zP, with K clipped to [0, N]. */
export function predictCache(model: ModelParameters, x: EstimatorInputs): Prediction {
  const bad = checkInputs(x);
  if (bad !== null) return { ok: false, problem: 'invalid', message: bad };
  if (Number.isNaN(x.k)) return { ok: false, problem: 'invalid', message: 'K is NaN' };
  // K can exceed N when the index matched whole blocks past the end of the
  // tokenised prompt, or when N and K were read at slightly different
  // moments; the reusable part of a prompt can never exceed the prompt.
  const k = Math.min(Math.max(x.k, 0), x.n);
  const c = model.cache;
  return predict(model, x, k / x.n, c.c0, c.cN, c.cR, c.cP);
}
