/**
 * Dynamo's kv_router worker cost, in both documented generations
 * (reference §4, checked against lib/kv-router's selector):
 *
 *   April 2026 ("overlap_weight"):
 *     prefill_tokens = active_prefill_tokens + max(0, isl - overlap*bs)
 *     decode_blocks  = active_decode_blocks + new_request_blocks
 *     cost           = overlap_score_weight * prefill_tokens/bs + decode_blocks
 *
 *   Later 2026 ("prefill_load_scale"):
 *     raw_prefill_blocks    = (active_prefill_tokens + isl) / bs
 *     overlap_credit_blocks = overlap_score_credit*device + host_weight*host + disk_weight*disk
 *     cost = prefill_load_scale * max(0, raw_prefill_blocks - overlap_credit_blocks)
 *            + decode_blocks + decode_active_request_weight * active_requests
 *   The max(0, ·) clamp is in Dynamo's source (not in the summary formula):
 *   it keeps a worker whose credit exceeds its load from gaining a negative cost.
 *
 * Pick: temperature 0 takes the lowest cost; exact ties go to the smaller
 * tree (when tree sizes are supplied) and then to a uniform seeded pick.
 * Temperature T > 0 samples p ∝ exp(-(cost/(max-min))/T), uniform when all
 * costs are equal.
 */
import type { Rng } from './rng';
import { randomInt } from './rng';
import type {
  CandidateInput,
  CandidateScore,
  ChosenWorker,
  SelectionReason,
  SelectionRequest,
  SelectionResult,
} from './types';
import { candidateOrder, requestBlocksOf, validateRequest } from './util';

export interface KvRouterOverlapWeightPolicy {
  readonly kind: 'kv_router';
  readonly formula: 'overlap_weight';
  /** Default 1.0. */
  readonly overlapScoreWeight?: number;
  /** Default 0 (deterministic). */
  readonly temperature?: number;
  /** Break exact ties by smaller tree first (Dynamo's documented behaviour). Default true. */
  readonly tieBreakByTreeSize?: boolean;
}

export interface KvRouterPrefillScalePolicy {
  readonly kind: 'kv_router';
  readonly formula: 'prefill_load_scale';
  /** Default 1.0; Dynamo caps it at 1.0. */
  readonly overlapScoreCredit?: number;
  /** Default 1.0. */
  readonly prefillLoadScale?: number;
  /** Default 0. */
  readonly decodeActiveRequestWeight?: number;
  /** Default 0.75. */
  readonly hostCacheHitWeight?: number;
  /** Default 0.25. */
  readonly diskCacheHitWeight?: number;
  readonly temperature?: number;
  readonly tieBreakByTreeSize?: boolean;
}

export type KvRouterPolicy = KvRouterOverlapWeightPolicy | KvRouterPrefillScalePolicy;

export const KV_ROUTER_DEFAULTS = Object.freeze({
  overlapScoreWeight: 1.0,
  overlapScoreCredit: 1.0,
  prefillLoadScale: 1.0,
  decodeActiveRequestWeight: 0,
  hostCacheHitWeight: 0.75,
  diskCacheHitWeight: 0.25,
  temperature: 0,
});

function nonNegative(name: string, v: number): number {
  if (!Number.isFinite(v) || v < 0) throw new RangeError(`${name} must be a finite non-negative number, got ${v}`);
  return v;
}

/** Decode blocks after admission: current active blocks plus this request's blocks not yet active there. */
function decodeBlocksOf(req: SelectionRequest, c: CandidateInput): number {
  const fresh = c.newRequestBlocks ?? requestBlocksOf(req);
  return c.activeDecodeBlocks + Math.max(0, fresh);
}

/** Cost and its terms for one candidate under the April 2026 formula. */
export function overlapWeightCost(
  req: SelectionRequest,
  c: CandidateInput,
  overlapScoreWeight: number = KV_ROUTER_DEFAULTS.overlapScoreWeight,
): { cost: number; terms: Record<string, number> } {
  const bs = req.blockSize;
  const uncached = Math.max(0, req.isl - c.overlapBlocks * bs);
  const prefillTokens = c.activePrefillTokens + uncached;
  const decodeBlocks = decodeBlocksOf(req, c);
  const cost = (overlapScoreWeight * prefillTokens) / bs + decodeBlocks;
  return {
    cost,
    terms: { overlapBlocks: c.overlapBlocks, uncachedTokens: uncached, prefillTokens, prefillBlocks: prefillTokens / bs, decodeBlocks },
  };
}

/** Cost and its terms for one candidate under the later-2026 formula. */
export function prefillScaleCost(
  req: SelectionRequest,
  c: CandidateInput,
  p: Omit<KvRouterPrefillScalePolicy, 'kind' | 'formula'> = {},
): { cost: number; terms: Record<string, number> } {
  const bs = req.blockSize;
  const credit = p.overlapScoreCredit ?? KV_ROUTER_DEFAULTS.overlapScoreCredit;
  const scale = p.prefillLoadScale ?? KV_ROUTER_DEFAULTS.prefillLoadScale;
  const reqWeight = p.decodeActiveRequestWeight ?? KV_ROUTER_DEFAULTS.decodeActiveRequestWeight;
  const hostW = p.hostCacheHitWeight ?? KV_ROUTER_DEFAULTS.hostCacheHitWeight;
  const diskW = p.diskCacheHitWeight ?? KV_ROUTER_DEFAULTS.diskCacheHitWeight;
  const rawPrefillBlocks = (c.activePrefillTokens + req.isl) / bs;
  const overlapCreditBlocks =
    credit * c.overlapBlocks + hostW * (c.hostOverlapBlocks ?? 0) + diskW * (c.diskOverlapBlocks ?? 0);
  const adjustedPrefillBlocks = Math.max(0, rawPrefillBlocks - overlapCreditBlocks);
  const decodeBlocks = decodeBlocksOf(req, c);
  const activeRequestCost = reqWeight * c.activeRequests;
  const cost = scale * adjustedPrefillBlocks + decodeBlocks + activeRequestCost;
  return {
    cost,
    terms: {
      overlapBlocks: c.overlapBlocks,
      rawPrefillBlocks,
      overlapCreditBlocks,
      adjustedPrefillBlocks,
      prefillCostBlocks: scale * adjustedPrefillBlocks,
      decodeBlocks,
      activeRequestCost,
    },
  };
}

/**
 * Softmax probabilities over costs, exactly as Dynamo normalises them:
 * logits divided by their range so T is scale-free.
 */
export function softmaxProbabilities(costs: readonly number[], temperature: number): number[] {
  if (costs.length === 0) return [];
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of costs) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo === hi) return costs.map(() => 1 / costs.length);
  const scale = -1 / ((hi - lo) * temperature);
  // Subtracting the scaled minimum keeps every exponent <= 0 (no overflow).
  const ws = costs.map((v) => Math.exp(v * scale - lo * scale));
  const sum = ws.reduce((a, b) => a + b, 0);
  return ws.map((w) => w / sum);
}

export function selectKvRouter(
  policy: KvRouterPolicy,
  req: SelectionRequest,
  candidates: readonly CandidateInput[],
  rng: Rng,
): SelectionResult {
  validateRequest(req);
  const temperature = nonNegative('temperature', policy.temperature ?? KV_ROUTER_DEFAULTS.temperature);
  if (candidates.length === 0) {
    return { chosen: null, sense: 'lower-is-better', scores: [], reason: 'no_candidates' };
  }
  const n = candidates.length;
  const computed = new Array<{ cost: number; terms: Record<string, number> }>(n);
  if (policy.formula === 'overlap_weight') {
    const weight = nonNegative('overlapScoreWeight', policy.overlapScoreWeight ?? KV_ROUTER_DEFAULTS.overlapScoreWeight);
    for (let i = 0; i < n; i++) computed[i] = overlapWeightCost(req, candidates[i]!, weight);
  } else for (let i = 0; i < n; i++) computed[i] = prefillScaleCost(req, candidates[i]!, policy);
  // Work in a canonical (worker, rank) order so the seeded pick does not
  // depend on the order the caller happened to list candidates in.
  const order = candidateOrder(candidates);
  let chosenIdx: number;
  let reason: SelectionReason;
  let probs: number[] | undefined;

  if (temperature === 0) {
    let best = Infinity;
    for (let i = 0; i < n; i++) best = Math.min(best, computed[i]!.cost);
    let tied: number[] = [];
    for (const i of order) if (computed[i]!.cost === best) tied.push(i);
    reason = 'lowest_cost';
    if (tied.length > 1 && (policy.tieBreakByTreeSize ?? true) && tied.every((i) => candidates[i]!.treeSize !== undefined)) {
      let smallest = Infinity;
      for (const i of tied) smallest = Math.min(smallest, candidates[i]!.treeSize!);
      const narrowed = tied.filter((i) => candidates[i]!.treeSize === smallest);
      if (narrowed.length < tied.length) reason = 'lowest_cost_tie_tree';
      tied = narrowed;
    }
    if (tied.length > 1) reason = 'lowest_cost_tie_random';
    chosenIdx = tied.length === 1 ? tied[0]! : tied[randomInt(rng, tied.length)]!;
  } else {
    const orderedProbs = softmaxProbabilities(
      order.map((i) => computed[i]!.cost),
      temperature,
    );
    probs = new Array<number>(candidates.length);
    order.forEach((i, k) => (probs![i] = orderedProbs[k]!));
    const u = rng.next();
    let acc = 0;
    chosenIdx = order[order.length - 1]!;
    for (let k = 0; k < order.length; k++) {
      acc += orderedProbs[k]!;
      if (u < acc) {
        chosenIdx = order[k]!;
        break;
      }
    }
    reason = 'sampled';
  }

  const scores = new Array<CandidateScore>(n);
  for (let i = 0; i < n; i++) {
    const c = candidates[i]!;
    const k = computed[i]!;
    scores[i] = probs
      ? { workerId: c.workerId, dpRank: c.dpRank, score: k.cost, terms: k.terms, eligible: true, probability: probs[i]!, input: c }
      : { workerId: c.workerId, dpRank: c.dpRank, score: k.cost, terms: k.terms, eligible: true, input: c };
  }
  const ch = candidates[chosenIdx]!;
  const chosen: ChosenWorker = { workerId: ch.workerId, dpRank: ch.dpRank, index: chosenIdx };
  return { chosen, sense: 'lower-is-better', scores, reason };
}
