/** Small, exact-order statistics used by every fitting step and by the evaluation's analysis. */

export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  let s = 0;
  for (const x of xs) s += x;
  return s / xs.length;
}

/**
 * Population standard deviation (divide by n). Standardisation only needs a
 * scale that makes the features comparable for the ridge penalty; the
 * population form is what the standardised features of the fitting data
 * then have exactly (sd 1), and it is defined for n = 1.
 */
export function populationSd(xs: readonly number[], m: number = mean(xs)): number {
  if (xs.length === 0) return NaN;
  let s = 0;
  for (const x of xs) s += (x - m) * (x - m);
  return Math.sqrt(s / xs.length);
}

/**
 * Quantile with linear interpolation between order statistics (Hyndman-Fan
 * type 7) of sorted values; NaN for none.
 */
export function quantileSorted(sorted: readonly number[], q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile q = ${q} must lie in [0, 1]`);
  const h = (n - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.min(n - 1, lo + 1);
  const a = sorted[lo] as number;
  return a + (h - lo) * ((sorted[hi] as number) - a);
}

/** Median; the mean of the two middle values for an even count. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/**
 * Nearest-rank percentile: the smallest value with at least q of the data at
 * or below it, i.e. sorted[ceil(q n) - 1] (why the margins use it: README, "Margins").
 */
export function percentileNearestRank(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  if (!(q > 0 && q <= 1)) throw new RangeError(`percentile q = ${q} must lie in (0, 1]`);
  const s = [...xs].sort((a, b) => a - b);
  // The epsilon keeps q n = 9 from becoming ceil(9.000000000000002) = 10.
  const rank = Math.max(1, Math.ceil(q * s.length - 1e-9));
  return s[rank - 1] as number;
}

export interface ErrorSummary {
  readonly n: number;
  readonly maeMs: number;
  readonly rmseMs: number;
  /** Mean of measured - predicted. */
  readonly biasMs: number;
}

export function summarizeErrors(residuals: readonly number[]): ErrorSummary {
  if (residuals.length === 0) return { n: 0, maeMs: NaN, rmseMs: NaN, biasMs: NaN };
  let a = 0;
  let s = 0;
  let b = 0;
  for (const e of residuals) {
    a += Math.abs(e);
    s += e * e;
    b += e;
  }
  return { n: residuals.length, maeMs: a / residuals.length, rmseMs: Math.sqrt(s / residuals.length), biasMs: b / residuals.length };
}
