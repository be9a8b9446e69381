/**
 * Percentile-bootstrap confidence intervals for a difference of a statistic
 * between two arms (a variant and the Stage baseline), resampling whole
 * units (sessions), never single requests: requests of one session share a
 * conversation, a cache history and a worker, so they are not independent.
 * Paired when both arms hold the same match keys, so the between-session
 * variation common to both cancels (README, "Differences from the baseline").
 *
 * Interval: the empirical (α/2, 1 − α/2) type-7 quantiles of the replicate
 * differences.
 */
import { compareStrings, quantileSorted } from '@vantage/fitting';

interface BootstrapOptions {
  readonly iterations: number;
  /** e.g. 0.95 */
  readonly confidence: number;
  readonly rand: () => number;
}

export interface BootstrapResult {
  /** statistic(variant) − statistic(baseline) on the data as observed. */
  readonly estimate: number;
  /** Percentile-bootstrap interval; null when it cannot be formed (no units, too few defined replicates). */
  readonly lo: number | null;
  readonly hi: number | null;
  readonly method: 'paired' | 'independent';
  readonly iterations: number;
  /** Replicates with a defined difference. */
  readonly validIterations: number;
  readonly units: { readonly variant: number; readonly baseline: number };
}

export interface Unit {
  /** Same key in both arms = the same matched session. */
  readonly matchKey: string | null;
}

function resample<T>(xs: readonly T[], rand: () => number, out: T[]): T[] {
  out.length = 0;
  const n = xs.length;
  for (let i = 0; i < n; i++) out.push(xs[Math.floor(rand() * n)] as T);
  return out;
}

/** True when both arms hold the same non-null match keys, each once. */
export function isPaired(a: readonly Unit[], b: readonly Unit[]): boolean {
  if (a.length !== b.length || a.length === 0) return false;
  const ka = a.map((u) => u.matchKey);
  const kb = new Set(b.map((u) => u.matchKey));
  if (ka.some((k) => k === null) || kb.has(null)) return false;
  return new Set(ka).size === ka.length && kb.size === b.length && ka.every((k) => kb.has(k));
}

/**
 * Bootstrap CI of stat(variant) − stat(baseline). `stat` must accept any
 * multiset of units (it gets resamples with repeats).
 */
export function bootstrapDifference<U extends Unit>(variant: readonly U[], baseline: readonly U[], stat: (units: readonly U[]) => number, o: BootstrapOptions): BootstrapResult {
  if (!Number.isInteger(o.iterations) || o.iterations < 1) throw new RangeError(`iterations must be a positive integer, got ${o.iterations}`);
  if (!(o.confidence > 0 && o.confidence < 1)) throw new RangeError(`confidence must lie in (0, 1), got ${o.confidence}`);
  const estimate = stat(variant) - stat(baseline);
  const paired = isPaired(variant, baseline);
  const units = { variant: variant.length, baseline: baseline.length };
  const method = paired ? 'paired' : 'independent';
  if (variant.length === 0 || baseline.length === 0) return { estimate, lo: null, hi: null, method, iterations: o.iterations, validIterations: 0, units };

  const reps: number[] = [];
  const bufA: U[] = [];
  const bufB: U[] = [];
  if (paired) {
    // Align by key, in key order, so the result does not depend on input order.
    const byKey = new Map(baseline.map((u) => [u.matchKey, u]));
    const a = [...variant].sort((x, y) => compareStrings(x.matchKey as string, y.matchKey as string));
    const b = a.map((u) => byKey.get(u.matchKey) as U);
    for (let it = 0; it < o.iterations; it++) {
      bufA.length = 0;
      bufB.length = 0;
      for (let i = 0; i < a.length; i++) {
        const j = Math.floor(o.rand() * a.length);
        bufA.push(a[j] as U);
        bufB.push(b[j] as U);
      }
      const d = stat(bufA) - stat(bufB);
      if (Number.isFinite(d)) reps.push(d);
    }
  } else {
    for (let it = 0; it < o.iterations; it++) {
      const d = stat(resample(variant, o.rand, bufA)) - stat(resample(baseline, o.rand, bufB));
      if (Number.isFinite(d)) reps.push(d);
    }
  }
  reps.sort((x, y) => x - y);
  const alpha = 1 - o.confidence;
  // Too few defined replicates for the tail quantiles to mean anything: no interval.
  const enough = reps.length >= Math.max(20, Math.ceil(0.9 * o.iterations));
  return {
    estimate,
    lo: enough ? quantileSorted(reps, alpha / 2) : null,
    hi: enough ? quantileSorted(reps, 1 - alpha / 2) : null,
    method,
    iterations: o.iterations,
    validIterations: reps.length,
    units,
  };
}
