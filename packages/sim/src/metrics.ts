/**
 * Replay metrics as Dynamo's trace replay reports them, and how ITL is counted from per-pass tokens:
 * README.md, "Metrics".
 */

import type { Finished } from './engine';

export interface Distribution {
  readonly mean: number;
  readonly p50: number;
  readonly p90: number;
  readonly p95: number;
  readonly p99: number;
  readonly min: number;
  readonly max: number;
  readonly count: number;
}

/** One finished request, as the replay records it: the engine's report with its end time and worker. */
export type RequestRecord = Omit<Finished, 'atMs'> & { readonly workerIndex: number; readonly endMs: number };

export interface ReplayMetrics {
  readonly requests: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly reusedTokens: number;
  readonly durationMs: number;
  readonly ttftMs: Distribution;
  readonly tpotMs: Distribution;
  readonly itlMs: Distribution;
  readonly e2eMs: Distribution;
  readonly requestThroughputPerS: number;
  readonly outputTokenThroughputPerS: number;
  readonly totalTokenThroughputPerS: number;
  readonly prefixCacheReusedRatio: number;
  readonly preemptions: number;
  /** Finished requests per worker index. */
  readonly requestsPerWorker: number[];
}

/**
 * The distribution of `values` with each counted `weights[i]` times (positive integers), percentiles
 * linear between ranks as if expanded; `mean` is the caller's exact figure when given, else the values
 * summed in sorted order over their count.
 */
function weightedDistribution(values: readonly number[], weights: readonly number[], mean?: number): Distribution {
  const idx = Array.from({ length: values.length }, (_, i) => i).sort((a, b) => values[a]! - values[b]!);
  const upTo: number[] = [];
  let total = 0;
  for (const i of idx) upTo.push((total += weights[i]!));
  /** The value at rank r of the expanded, sorted values. */
  const at = (r: number): number => values[idx[upTo.findIndex((acc) => r < acc)]!]!;
  const q = (p: number): number => {
    if (total === 0) return NaN;
    const pos = ((total - 1) * p) / 100;
    const lo = Math.floor(pos);
    const a = at(lo);
    return a + (at(Math.min(total - 1, lo + 1)) - a) * (pos - lo);
  };
  const n = idx.length;
  let sum = 0;
  if (mean === undefined) for (const i of idx) sum += values[i]!;
  return { mean: mean ?? (n > 0 ? sum / n : NaN), p50: q(50), p90: q(90), p95: q(95), p99: q(99), min: n > 0 ? values[idx[0]!]! : NaN, max: n > 0 ? values[idx[n - 1]!]! : NaN, count: total };
}

/** The distribution of `values`, each counted once. */
function distribution(values: readonly number[]): Distribution {
  return weightedDistribution(values, values.map(() => 1));
}

export function computeMetrics(records: readonly RequestRecord[], workers: number): ReplayMetrics {
  const ttft: number[] = [];
  const e2e: number[] = [];
  const tpot: number[] = [];
  const gapW: number[] = [];
  let isl = 0;
  let osl = 0;
  let reused = 0;
  let preemptions = 0;
  let first = Infinity;
  let last = -Infinity;
  let decodeMs = 0;
  let gaps = 0;
  const perWorker = new Array<number>(workers).fill(0);
  for (const r of records) {
    ttft.push(r.firstTokenMs - r.arrivalMs);
    e2e.push(r.endMs - r.arrivalMs);
    if (r.outputTokens >= 2) {
      const d = r.endMs - r.firstTokenMs;
      tpot.push(d / (r.outputTokens - 1));
      gapW.push(r.outputTokens - 1);
      decodeMs += d;
      gaps += r.outputTokens - 1;
    }
    isl += r.isl;
    osl += r.outputTokens;
    reused += r.reusedTokens;
    preemptions += r.preemptions;
    first = Math.min(first, r.arrivalMs);
    last = Math.max(last, r.endMs);
    if (r.workerIndex >= 0 && r.workerIndex < workers) perWorker[r.workerIndex]!++;
  }
  const durationMs = records.length > 0 ? last - first : 0;
  const perS = (x: number): number => (durationMs > 0 ? (x * 1000) / durationMs : NaN);
  const itl = weightedDistribution(tpot, gapW, gaps > 0 ? decodeMs / gaps : NaN);
  return {
    requests: records.length,
    inputTokens: isl,
    outputTokens: osl,
    reusedTokens: reused,
    durationMs,
    ttftMs: distribution(ttft),
    tpotMs: distribution(tpot),
    itlMs: itl,
    e2eMs: distribution(e2e),
    requestThroughputPerS: perS(records.length),
    outputTokenThroughputPerS: perS(osl),
    totalTokenThroughputPerS: perS(isl + osl),
    prefixCacheReusedRatio: isl > 0 ? reused / isl : NaN,
    preemptions,
    requestsPerWorker: perWorker,
  };
}
