/**
 * Threshold search for the count rules (seed 000): "Search observed
 * calibration boundaries, including a disabled term. Minimize mean selected
 * TTFT; break ties by fewer overrides, then fewer terms." Each candidate
 * (r, p) is simulated on the pairs given exactly as `decide` would act (a
 * test checks this against `decide`). Between two observed values a
 * threshold partitions the data exactly as the next observed value does, so
 * the observed values are every distinct outcome the data can show. The
 * simulation, candidates and ranking: README, "Thresholds".
 */
import type { CalibrationPair, Role } from './rows';

export type ThresholdMode = 'count' | 'count_prefill';

export interface ThresholdCandidate extends RuleOutcome {
  readonly r: number | null;
  readonly p: number | null;
  readonly terms: number;
}

export interface ThresholdSearch {
  readonly mode: ThresholdMode;
  /** Every candidate, best first. */
  readonly table: readonly ThresholdCandidate[];
  readonly best: ThresholdCandidate;
  /** Mean TTFT of Stage's own choices (the all-disabled candidate). */
  readonly stageMeanTtftMs: number;
  readonly pairs: number;
}

export interface RuleOutcome {
  readonly meanSelectedTtftMs: number;
  readonly overrides: number;
}

/** The selection the count rule makes for one pair. */
export function countRuleChoice(pair: CalibrationPair, r: number | null, p: number | null, destinationLimit: number): Role {
  if (pair.proposal === 'capable') return 'capable';
  const e = pair.efficient;
  if (p !== null && e.p === null) return 'efficient';
  if (!(pair.capable.r < destinationLimit)) return 'efficient';
  const triggered = (r !== null && e.r >= r) || (p !== null && e.p !== null && e.p > p);
  return triggered ? 'capable' : 'efficient';
}

/** Mean selected TTFT and override count of one choice function over the pairs, summed in pair order. */
export function simulate(pairs: readonly CalibrationPair[], choose: (pair: CalibrationPair) => Role): RuleOutcome {
  let sum = 0;
  let overrides = 0;
  for (const pair of pairs) {
    const c = choose(pair);
    if (c !== pair.proposal) overrides++;
    sum += c === 'capable' ? pair.capable.ttftMs : pair.efficient.ttftMs;
  }
  return { meanSelectedTtftMs: pairs.length === 0 ? NaN : sum / pairs.length, overrides };
}

const TIE = 1e-9;

function sameMean(a: number, b: number): boolean {
  return Math.abs(a - b) <= TIE * Math.max(1, Math.abs(a), Math.abs(b));
}

/** Larger threshold first; disabled counts as larger than any value (it never triggers). */
function thresholdOrder(a: number | null, b: number | null): number {
  if (a === b) return 0;
  if (a === null) return -1;
  if (b === null) return 1;
  return b - a;
}

function tieBreak(a: ThresholdCandidate, b: ThresholdCandidate): number {
  return a.overrides - b.overrides || a.terms - b.terms || thresholdOrder(a.r, b.r) || thresholdOrder(a.p, b.p);
}

/**
 * Rank candidates, best first. Every candidate whose mean ties the minimum
 * (within the tolerance) forms the leading group, ordered by the tie-breaks;
 * the rest follow by exact mean, then the same tie-breaks. Measuring ties
 * against the minimum, not pairwise, keeps the order transitive.
 */
export function rankCandidates(list: readonly ThresholdCandidate[]): ThresholdCandidate[] {
  if (list.length === 0) return [];
  const min = Math.min(...list.map((c) => c.meanSelectedTtftMs));
  const tied = (c: ThresholdCandidate): boolean => sameMean(c.meanSelectedTtftMs, min);
  return [...list].sort((a, b) => {
    const ta = tied(a);
    const tb = tied(b);
    if (ta !== tb) return ta ? -1 : 1;
    if (!ta && a.meanSelectedTtftMs !== b.meanSelectedTtftMs) return a.meanSelectedTtftMs - b.meanSelectedTtftMs;
    return tieBreak(a, b);
  });
}

/** Distinct observed boundaries of the efficient candidates the rule may reconsider. */
function observedBoundaries(pairs: readonly CalibrationPair[]): { r: number[]; p: number[] } {
  const reconsidered = pairs.filter((x) => x.proposal === 'efficient');
  const r = [...new Set(reconsidered.map((x) => x.efficient.r).filter((v) => v >= 1))].sort((a, b) => a - b);
  const p = [...new Set(reconsidered.map((x) => x.efficient.p).filter((v): v is number => v !== null))].sort((a, b) => a - b);
  return { r, p };
}

/**
 * Search every (r, p) candidate on the pairs (`fitAll`: the fitting split).
 * `count` searches r alone (p disabled); `count_prefill` both terms.
 * `destinationLimit` is the gate's, fixed across variants. Throws on no pairs.
 */
export function searchThresholds(pairs: readonly CalibrationPair[], mode: ThresholdMode, destinationLimit: number): ThresholdSearch {
  if (pairs.length === 0) throw new RangeError('threshold search needs at least one pair');
  const bounds = observedBoundaries(pairs);
  const rs: (number | null)[] = [null, ...bounds.r];
  const ps: (number | null)[] = mode === 'count' ? [null] : [null, ...bounds.p];
  const table: ThresholdCandidate[] = [];
  for (const r of rs) {
    for (const p of ps) {
      const o = simulate(pairs, (pair) => countRuleChoice(pair, r, p, destinationLimit));
      table.push({ r, p, meanSelectedTtftMs: o.meanSelectedTtftMs, overrides: o.overrides, terms: (r === null ? 0 : 1) + (p === null ? 0 : 1) });
    }
  }
  const stage = table[0] as ThresholdCandidate;
  const ranked = rankCandidates(table);
  return { mode, table: ranked, best: ranked[0] as ThresholdCandidate, stageMeanTtftMs: stage.meanSelectedTtftMs, pairs: pairs.length };
}
