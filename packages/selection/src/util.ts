import type { CandidateInput, SelectionRequest } from './types';

export function validateRequest(req: SelectionRequest): void {
  if (!Number.isInteger(req.isl) || req.isl <= 0) throw new RangeError(`isl must be a positive integer, got ${req.isl}`);
  if (!Number.isInteger(req.blockSize) || req.blockSize <= 0) {
    throw new RangeError(`blockSize must be a positive integer, got ${req.blockSize}`);
  }
}

/**
 * Indices of `candidates` sorted by (workerId, dpRank). Seeded random picks
 * walk candidates in this order so a result depends on the seed and the
 * candidate set, never on the caller's listing order.
 */
export function candidateOrder(candidates: readonly CandidateInput[], inOrder = false): number[] {
  const n = candidates.length;
  const idx = new Array<number>(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  // Callers usually list candidates already in this order (the indexer's pool does): one O(n)
  // scan then replaces the O(n log n) sort with its bigint comparisons. `inOrder`: the caller
  // vouches for it (see SelectionScratch.candidatesInOrder), and not even the scan is made.
  if (inOrder || isCanonicalOrder(candidates)) return idx;
  idx.sort((a, b) => compareCandidates(candidates[a]!, candidates[b]!));
  return idx;
}

function compareCandidates(x: CandidateInput, y: CandidateInput): number {
  if (x.workerId !== y.workerId) return x.workerId < y.workerId ? -1 : 1;
  return x.dpRank - y.dpRank;
}

/**
 * True when `candidates` are listed in non-decreasing (workerId, dpRank) order, so that the
 * identity permutation is exactly what the (stable) sort would return.
 */
function isCanonicalOrder(candidates: readonly CandidateInput[]): boolean {
  for (let i = 1; i < candidates.length; i++) if (compareCandidates(candidates[i - 1]!, candidates[i]!) > 0) return false;
  return true;
}
