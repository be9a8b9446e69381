/**
 * Percentiles of the observe handler's step timings (`@vantage/indexer`'s OBSERVE_STEPS_CHANNEL)
 * over windows of requests, per reply encoding: what `step-times.ts` writes out.
 */
import type { ObserveSteps } from '@vantage/indexer';

export const STEP_NAMES = ['decodeUs', 'answerUs', 'respondUs', 'totalUs'] as const;

/** The value at fraction q of ascending `xs` (nearest rank). */
function pct(xs: Float64Array, q: number): number {
  return xs[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
}

/** Collects `size` requests of one encoding at a time; `add` returns the window's summary line when it fills, else null. */
export class StepWindow {
  private readonly values: Float64Array[];
  private n = 0;
  constructor(
    readonly encoding: ObserveSteps['encoding'],
    readonly size: number,
  ) {
    if (!Number.isInteger(size) || size <= 0) throw new RangeError(`window size must be a positive integer, got ${size}`);
    this.values = STEP_NAMES.map(() => new Float64Array(size));
  }

  add(s: ObserveSteps): string | null {
    if (s.encoding !== this.encoding) return null;
    for (let k = 0; k < STEP_NAMES.length; k++) this.values[k]![this.n] = s[STEP_NAMES[k]!];
    if (++this.n < this.size) return null;
    this.n = 0;
    const parts = STEP_NAMES.map((name, k) => {
      const sorted = this.values[k]!.slice().sort();
      return `${name.replace(/Us$/, '')} ${pct(sorted, 0.5).toFixed(1)}/${pct(sorted, 0.99).toFixed(1)}`;
    });
    return `${this.encoding} ${this.size} requests, p50/p99 µs: ${parts.join(' | ')}`;
  }
}
