/**
 * llm-d token-aware routing, "sticky until saturated" (reference §7):
 *
 * 1. prefix-cache-affinity-filter: an endpoint is sticky when its cached
 *    fraction of the prompt is >= affinityThreshold (0.8). No sticky
 *    endpoint (or only sticky ones) → keep all. Otherwise estimate each
 *    endpoint's TTFT as tokens / peakPrefillThroughput (ms), and when
 *    best sticky TTFT − best non-sticky TTFT > maxTTFTPenaltyMs release
 *    stickiness (keep all); else keep only the sticky endpoints.
 *    The estimate's tokens are the endpoint's in-flight uncached tokens plus
 *    this request's own uncached tokens there (llm-d's "committed + projected" form).
 * 2. scorer over the kept endpoints, highest wins (ties: seeded uniform pick):
 *    token-load:     1 − min(1, (in_flight_tokens + uncached) / 4,194,304)
 *    active-request: 1 − active / max(active over kept), 1 when all are idle
 *    (fewest active requests wins; the normalisation only shapes reported scores).
 */
import type { Rng } from '@vantage/random';
import { randomInt } from '@vantage/random';
import type { CandidateInput, CandidateScore, SelectionReason, SelectionRequest, SelectionResult } from './types';
import { candidateOrder, validateRequest } from './util';

export interface LlmdPolicy {
  readonly kind: 'llmd';
  readonly scorer: 'token-load' | 'active-request';
  /** Default 0.8. 0 disables the filter. */
  readonly affinityThreshold?: number;
  /** Tokens per second one endpoint prefills at its peak. Default 15,928 (llm-d's built-in calibration). */
  readonly peakPrefillThroughput?: number;
  /** Default 18,000 ms. 0 disables the load gate (always stay sticky). */
  readonly maxTTFTPenaltyMs?: number;
}

const LLMD_DEFAULTS = Object.freeze({
  affinityThreshold: 0.8,
  peakPrefillThroughput: 15_928,
  maxTTFTPenaltyMs: 18_000,
});

/** The token-load scorer's saturation constant. */
const TOKEN_LOAD_CAPACITY = 4_194_304;

export function selectLlmd(
  policy: LlmdPolicy,
  req: SelectionRequest,
  candidates: readonly CandidateInput[],
  rng: Rng,
): SelectionResult {
  validateRequest(req);
  const threshold = policy.affinityThreshold ?? LLMD_DEFAULTS.affinityThreshold;
  const peak = policy.peakPrefillThroughput ?? LLMD_DEFAULTS.peakPrefillThroughput;
  const penalty = policy.maxTTFTPenaltyMs ?? LLMD_DEFAULTS.maxTTFTPenaltyMs;
  if (!(peak > 0)) throw new RangeError(`peakPrefillThroughput must be positive, got ${peak}`);
  if (candidates.length === 0) return { chosen: null, sense: 'higher-is-better', scores: [], reason: 'no_candidates' };

  const n = candidates.length;
  // Each endpoint's terms, reported with its score (sticky as 0 or 1).
  const terms = candidates.map((c) => {
    const cached = Math.min(req.isl, Math.max(0, c.overlapBlocks) * req.blockSize);
    const cachedFraction = cached / req.isl;
    const uncachedTokens = req.isl - cached;
    const inFlightTokens = c.activePrefillTokens;
    return {
      cachedFraction,
      uncachedTokens,
      inFlightTokens,
      ttftEstimateMs: ((inFlightTokens + uncachedTokens) / peak) * 1000,
      sticky: threshold > 0 && cachedFraction >= threshold ? 1 : 0,
      activeRequests: c.activeRequests,
    };
  });
  const sticky = terms.map((t) => t.sticky === 1);

  let eligible = new Array<boolean>(n).fill(true);
  let reason: SelectionReason = 'no_sticky';
  const nSticky = sticky.filter(Boolean).length;
  if (nSticky > 0 && nSticky < n) {
    let bestSticky = Infinity;
    let bestOther = Infinity;
    for (let i = 0; i < n; i++) {
      if (sticky[i]) bestSticky = Math.min(bestSticky, terms[i]!.ttftEstimateMs);
      else bestOther = Math.min(bestOther, terms[i]!.ttftEstimateMs);
    }
    if (penalty > 0 && bestSticky - bestOther > penalty) {
      reason = 'sticky_released';
    } else {
      eligible = sticky.slice();
      reason = 'sticky';
    }
  } else if (nSticky === n) {
    reason = 'sticky';
  }

  const score = new Array<number>(n).fill(NaN);
  let maxActive = 0;
  for (let i = 0; i < n; i++) if (eligible[i]) maxActive = Math.max(maxActive, candidates[i]!.activeRequests);
  for (let i = 0; i < n; i++) {
    if (policy.scorer === 'token-load') {
      score[i] = 1 - Math.min(1, (terms[i]!.inFlightTokens + terms[i]!.uncachedTokens) / TOKEN_LOAD_CAPACITY);
    } else {
      score[i] = maxActive === 0 ? 1 : 1 - candidates[i]!.activeRequests / maxActive;
    }
  }

  let best = -Infinity;
  const order = candidateOrder(candidates).filter((i) => eligible[i]);
  for (const i of order) best = Math.max(best, score[i]!);
  const tied = order.filter((i) => score[i] === best);
  const chosenIdx = tied.length === 1 ? tied[0]! : tied[randomInt(rng, tied.length)]!;

  const scores: CandidateScore[] = candidates.map((c, i) => ({
    workerId: c.workerId,
    dpRank: c.dpRank,
    score: score[i]!,
    terms: terms[i]!,
    eligible: eligible[i]!,
    input: c,
  }));
  const ch = candidates[chosenIdx]!;
  return { chosen: { workerId: ch.workerId, dpRank: ch.dpRank, index: chosenIdx }, sense: 'higher-is-better', scores, reason };
}
