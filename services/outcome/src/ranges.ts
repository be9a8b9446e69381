/**
 * Sets of JetStream stream sequences as sorted, merged, inclusive ranges.
 * A transaction's sources are mostly contiguous runs (one fetch batch), so a
 * batch of thousands of sequences is a handful of pairs on the progress log.
 */
export type Range = readonly [lo: number, hi: number];

/** Sorted inclusive ranges covering exactly `seqs` (duplicates allowed). */
export function toRanges(seqs: readonly number[]): Range[] {
  if (seqs.length === 0) return [];
  const sorted = Float64Array.from(seqs).sort();
  const out: [number, number][] = [];
  let lo = sorted[0] as number;
  let hi = lo;
  for (let i = 1; i < sorted.length; i++) {
    const s = sorted[i] as number;
    if (s <= hi + 1) {
      if (s > hi) hi = s;
    } else {
      out.push([lo, hi]);
      lo = hi = s;
    }
  }
  out.push([lo, hi]);
  return out;
}

/** Binary search over sorted disjoint ranges. */
export function inRanges(ranges: readonly Range[], seq: number): boolean {
  let a = 0;
  let b = ranges.length - 1;
  while (a <= b) {
    const m = (a + b) >> 1;
    const r = ranges[m] as Range;
    if (seq < r[0]) b = m - 1;
    else if (seq > r[1]) a = m + 1;
    else return true;
  }
  return false;
}

/** Union of possibly overlapping ranges, sorted and merged. */
export function mergeRanges(ranges: readonly Range[]): Range[] {
  if (ranges.length <= 1) return [...ranges];
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && lo <= last[1] + 1) {
      if (hi > last[1]) last[1] = hi;
    } else out.push([lo, hi]);
  }
  return out;
}
