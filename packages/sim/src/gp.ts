/**
 * A small Gaussian-process regressor for the router sweep's Bayesian optimisation: the model and
 * why its length scales come from a grid are the README's "The GP". `expectedImprovement` is for
 * minimisation.
 */

interface GpOptions {
  /** Fixed length scales (one per dimension), or 'ml' to choose them by marginal likelihood. Default 'ml'. */
  readonly lengthScales?: readonly number[] | 'ml';
  /** Candidate length scales per dimension for 'ml'. */
  readonly lengthScaleGrid?: readonly number[];
}

/** Noise variance on the standardised scale: only a jitter that keeps the factor well conditioned (the replay is deterministic). */
const NOISE = 1e-6;

const DEFAULT_LENGTH_SCALE_GRID: readonly number[] = Object.freeze([0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 2.0]);

function rbf(a: readonly number[], b: readonly number[], ls: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    const d = (a[i]! - b[i]!) / ls[i]!;
    s += d * d;
  }
  return Math.exp(-0.5 * s);
}

/** Lower Cholesky factor of a symmetric positive-definite matrix (row-major n×n), or null when not SPD. */
export function cholesky(a: Float64Array, n: number): Float64Array | null {
  const l = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = a[i * n + j]!;
      for (let k = 0; k < j; k++) s -= l[i * n + k]! * l[j * n + k]!;
      if (i === j) {
        if (!(s > 0)) return null;
        l[i * n + i] = Math.sqrt(s);
      } else l[i * n + j] = s / l[j * n + j]!;
    }
  }
  return l;
}

/** Solve L x = b (L lower triangular). */
function forward(l: Float64Array, n: number, b: ArrayLike<number>): Float64Array {
  const x = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let s = b[i]!;
    for (let k = 0; k < i; k++) s -= l[i * n + k]! * x[k]!;
    x[i] = s / l[i * n + i]!;
  }
  return x;
}

/** Solve Lᵀ x = b. */
function backward(l: Float64Array, n: number, b: ArrayLike<number>): Float64Array {
  const x = new Float64Array(n);
  for (let i = n - 1; i >= 0; i--) {
    let s = b[i]!;
    for (let k = i + 1; k < n; k++) s -= l[k * n + i]! * x[k]!;
    x[i] = s / l[i * n + i]!;
  }
  return x;
}

interface Factor {
  readonly l: Float64Array;
  readonly alpha: Float64Array;
  readonly logMl: number;
}

function factor(x: readonly (readonly number[])[], z: readonly number[], ls: readonly number[], noise: number): Factor | null {
  const n = x.length;
  const k = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      const v = rbf(x[i]!, x[j]!, ls) + (i === j ? noise : 0);
      k[i * n + j] = v;
      k[j * n + i] = v;
    }
  }
  const l = cholesky(k, n);
  if (l === null) return null;
  const alpha = backward(l, n, forward(l, n, z));
  let quad = 0;
  let logDet = 0;
  for (let i = 0; i < n; i++) {
    quad += z[i]! * alpha[i]!;
    logDet += Math.log(l[i * n + i]!);
  }
  return { l, alpha, logMl: -0.5 * quad - logDet - 0.5 * n * Math.log(2 * Math.PI) };
}

export class GaussianProcess {
  readonly logMarginalLikelihood: number;

  private constructor(
    private readonly x: readonly (readonly number[])[],
    private readonly yMean: number,
    private readonly yStd: number,
    readonly lengthScales: readonly number[],
    private readonly f: Factor,
  ) {
    this.logMarginalLikelihood = f.logMl;
  }

  static fit(x: readonly (readonly number[])[], y: readonly number[], opts: GpOptions = {}): GaussianProcess {
    const n = x.length;
    if (n === 0 || y.length !== n) throw new RangeError(`need as many targets as points (at least one), got ${n} points and ${y.length} targets`);
    const d = x[0]!.length;
    let mean = 0;
    for (const v of y) mean += v;
    mean /= n;
    let varSum = 0;
    for (const v of y) varSum += (v - mean) ** 2;
    const std = n > 1 && varSum > 0 ? Math.sqrt(varSum / n) : 1;
    const z = y.map((v) => (v - mean) / std);
    const spec = opts.lengthScales ?? 'ml';
    let candidates: number[][];
    if (spec === 'ml') {
      const grid = opts.lengthScaleGrid ?? DEFAULT_LENGTH_SCALE_GRID;
      candidates = [[]];
      for (let k = 0; k < d; k++) candidates = candidates.flatMap((c) => grid.map((g) => [...c, g]));
    } else {
      if (spec.length !== d) throw new RangeError(`${spec.length} length scales for ${d} dimensions`);
      candidates = [[...spec]];
    }
    let best: { ls: number[]; f: Factor } | null = null;
    for (const ls of candidates) {
      // Escalate the jitter if the kernel matrix is numerically singular (duplicate points).
      let f: Factor | null = null;
      for (let j = NOISE; f === null && j < 1; j *= 10) f = factor(x, z, ls, j);
      if (f !== null && (best === null || f.logMl > best.f.logMl)) best = { ls, f };
    }
    if (best === null) throw new Error('GP kernel matrix is not positive definite for any length scale');
    return new GaussianProcess(x, mean, std, best.ls, best.f);
  }

  /** Posterior mean and standard deviation at `p`, on the original scale. */
  predict(p: readonly number[]): { mean: number; sd: number } {
    const n = this.x.length;
    const ks = new Float64Array(n);
    for (let i = 0; i < n; i++) ks[i] = rbf(p, this.x[i]!, this.lengthScales);
    let m = 0;
    for (let i = 0; i < n; i++) m += ks[i]! * this.f.alpha[i]!;
    const v = forward(this.f.l, n, ks);
    let vv = 0;
    for (let i = 0; i < n; i++) vv += v[i]! * v[i]!;
    const variance = Math.max(0, 1 - vv);
    return { mean: this.yMean + this.yStd * m, sd: this.yStd * Math.sqrt(variance) };
  }
}

/** Standard normal CDF (erf by Abramowitz–Stegun 7.1.26, |error| < 1.5e-7). */
export function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return z >= 0 ? 0.5 * (1 + y) : 0.5 * (1 - y);
}

function normalPdf(z: number): number {
  return Math.exp(-0.5 * z * z) / Math.sqrt(2 * Math.PI);
}

/** Expected improvement below `best` (minimisation). */
export function expectedImprovement(mean: number, sd: number, best: number): number {
  const gain = best - mean;
  if (!(sd > 1e-12)) return Math.max(0, gain);
  const z = gain / sd;
  return gain * normalCdf(z) + sd * normalPdf(z);
}
