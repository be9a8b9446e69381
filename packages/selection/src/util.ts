import type { CandidateInput, SelectionRequest } from './types';

export function validateRequest(req: SelectionRequest): void {
  if (!Number.isInteger(req.isl) || req.isl <= 0) throw new RangeError(`isl must be a positive integer, got ${req.isl}`);
  if (!Number.isInteger(req.blockSize) || req.blockSize <= 0) {
    throw new RangeError(`blockSize must be a positive integer, got ${req.blockSize}`);
  }
}

/** Blocks the request occupies once admitted (Dynamo rounds a partial block up). */
export function requestBlocksOf(req: SelectionRequest): number {
  return req.requestBlocks ?? Math.ceil(req.isl / req.blockSize);
}

/**
 * Indices of `candidates` sorted by (workerId, dpRank). Seeded random picks
 * walk candidates in this order so a result depends on the seed and the
 * candidate set, never on the caller's listing order.
 */
export function candidateOrder(candidates: readonly CandidateInput[]): number[] {
  const idx = candidates.map((_, i) => i);
  idx.sort((a, b) => {
    const x = candidates[a]!;
    const y = candidates[b]!;
    if (x.workerId !== y.workerId) return x.workerId < y.workerId ? -1 : 1;
    return x.dpRank - y.dpRank;
  });
  return idx;
}
