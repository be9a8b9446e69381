/**
 * Grouped splits (seed 000, "Fit and select candidates"): "Use separate
 * measurements for fitting, estimating uncertainty and selecting candidates.
 * Keep all repeats of a workload condition in the same split." The unit is
 * the contention condition, stratified into no-contention and loaded ones;
 * the Q set enters no split (README, "Splits").
 */
import { mulberry32, shuffled } from '@vantage/random';
import { compareStrings, type CalibrationRow } from './rows';

export const SPLIT_NAMES = ['fitting', 'uncertainty', 'selection'] as const;
export type SplitName = (typeof SPLIT_NAMES)[number];

export type SplitFractions = Readonly<Record<SplitName, number>>;

export const DEFAULT_FRACTIONS: SplitFractions = Object.freeze({ fitting: 0.6, uncertainty: 0.2, selection: 0.2 });

/** Condition ids per split, each list sorted. */
type ConditionSplit = Readonly<Record<SplitName, readonly string[]>>;

/** Problems with fractions, empty when they are usable. */
export function fractionProblems(f: SplitFractions): string[] {
  const out: string[] = [];
  for (const name of SPLIT_NAMES) {
    const v = f[name];
    if (!(Number.isFinite(v) && v > 0 && v < 1)) out.push(`fraction ${name} = ${v} must lie strictly between 0 and 1`);
  }
  const sum = f.fitting + f.uncertainty + f.selection;
  if (Math.abs(sum - 1) > 1e-9) out.push(`fractions sum to ${sum}, not 1`);
  return out;
}

/**
 * Largest-remainder allocation of n items to the splits: counts add up to n
 * and differ from n * fraction by less than one. Remainder ties go to the
 * earlier split (fitting first).
 */
export function allocate(n: number, f: SplitFractions): Record<SplitName, number> {
  const raw = SPLIT_NAMES.map((s) => n * f[s]);
  const counts = raw.map(Math.floor);
  let left = n - counts.reduce((a, b) => a + b, 0);
  const order = [0, 1, 2].sort((a, b) => (raw[b] as number) - (counts[b] as number) - ((raw[a] as number) - (counts[a] as number)) || a - b);
  for (const i of order) {
    if (left <= 0) break;
    counts[i] = (counts[i] as number) + 1;
    left--;
  }
  return { fitting: counts[0] as number, uncertainty: counts[1] as number, selection: counts[2] as number };
}

/**
 * A condition is a no-contention condition when every one of its rows is.
 * Q-set rows are left out: they belong to no split.
 */
function conditionStrata(rows: readonly CalibrationRow[]): Map<string, 'no_contention' | 'loaded'> {
  const out = new Map<string, 'no_contention' | 'loaded'>();
  for (const r of rows) {
    if (r.qSet === true) continue;
    const prev = out.get(r.conditionId);
    out.set(r.conditionId, prev === 'loaded' || !r.noContention ? 'loaded' : 'no_contention');
  }
  return out;
}

/**
 * Assign the contention conditions to splits (Q-set conditions are never
 * assigned, so `applySplit` drops their rows): per stratum, sort the ids (so input
 * order does not matter), shuffle with the seed, and cut by the
 * largest-remainder counts. Same rows and seed, same split.
 */
export function splitConditions(rows: readonly CalibrationRow[], fractions: SplitFractions = DEFAULT_FRACTIONS, seed = 1): ConditionSplit {
  const bad = fractionProblems(fractions);
  if (bad.length > 0) throw new RangeError(bad.join('; '));
  const strata = conditionStrata(rows);
  const out: Record<SplitName, string[]> = { fitting: [], uncertainty: [], selection: [] };
  const rand = mulberry32(seed);
  for (const stratum of ['no_contention', 'loaded'] as const) {
    const ids = [...strata].filter(([, s]) => s === stratum).map(([id]) => id).sort(compareStrings);
    const order = shuffled(ids, rand);
    const counts = allocate(order.length, fractions);
    let at = 0;
    for (const s of SPLIT_NAMES) {
      out[s].push(...order.slice(at, at + counts[s]));
      at += counts[s];
    }
  }
  for (const s of SPLIT_NAMES) out[s].sort(compareStrings);
  return out;
}

/** The rows of each split. */
export function applySplit<T extends { readonly conditionId: string }>(items: readonly T[], split: ConditionSplit): Record<SplitName, T[]> {
  const where = new Map<string, SplitName>();
  for (const s of SPLIT_NAMES) for (const id of split[s]) where.set(id, s);
  const out: Record<SplitName, T[]> = { fitting: [], uncertainty: [], selection: [] };
  for (const it of items) {
    const s = where.get(it.conditionId);
    if (s !== undefined) out[s].push(it);
  }
  return out;
}
