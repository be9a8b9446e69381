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
 * The pick: README.md, "Picking under kv_router".
 */
import type { Rng } from '@vantage/random';
import { randomInt } from '@vantage/random';
import type {
  CandidateInput,
  CandidateScore,
  ChosenWorker,
  SelectionReason,
  SelectionRequest,
  SelectionResult,
} from './types';
import { candidateOrder, validateRequest } from './util';

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
  readonly temperature?: number;
  readonly tieBreakByTreeSize?: boolean;
}

export type KvRouterPolicy = KvRouterOverlapWeightPolicy | KvRouterPrefillScalePolicy;

const KV_ROUTER_DEFAULTS = Object.freeze({
  overlapScoreWeight: 1.0,
  overlapScoreCredit: 1.0,
  prefillLoadScale: 1.0,
  decodeActiveRequestWeight: 0,
  temperature: 0,
});

/** Credit per overlapping block found in host memory and on disk (Dynamo's fixed weights). */
const HOST_CACHE_HIT_WEIGHT = 0.75;
const DISK_CACHE_HIT_WEIGHT = 0.25;

function nonNegative(name: string, v: number): number {
  if (!Number.isFinite(v) || v < 0) throw new RangeError(`${name} must be a finite non-negative number, got ${v}`);
  return v;
}

/**
 * Decode blocks after admission: current active blocks plus this request's blocks not yet active
 * there (unknown: all of them, a partial block rounded up as Dynamo does).
 */
function decodeBlocksOf(req: SelectionRequest, c: CandidateInput): number {
  return c.activeDecodeBlocks + Math.max(0, c.newRequestBlocks ?? Math.ceil(req.isl / req.blockSize));
}

type Terms = Record<string, number>;

/** A terms record of the April 2026 formula (keys in the order the reply reports them). */
const overlapWeightTerms = (): Terms => ({ overlapBlocks: 0, uncachedTokens: 0, prefillTokens: 0, prefillBlocks: 0, decodeBlocks: 0 });

/** A terms record of the later-2026 formula (keys in the order the reply reports them). */
const prefillScaleTerms = (): Terms => ({
  overlapBlocks: 0,
  rawPrefillBlocks: 0,
  overlapCreditBlocks: 0,
  adjustedPrefillBlocks: 0,
  prefillCostBlocks: 0,
  decodeBlocks: 0,
  activeRequestCost: 0,
});

/** Cost of one candidate under the April 2026 formula, its terms written into `t` (made by `overlapWeightTerms`). */
function overlapWeightCost(req: SelectionRequest, c: CandidateInput, overlapScoreWeight: number, t: Terms): number {
  const bs = req.blockSize;
  const overlapBlocks = c.overlapBlocks;
  const decodeBlocks = decodeBlocksOf(req, c);
  const uncached = Math.max(0, req.isl - overlapBlocks * bs);
  const prefillTokens = c.activePrefillTokens + uncached;
  t.overlapBlocks = overlapBlocks;
  t.uncachedTokens = uncached;
  t.prefillTokens = prefillTokens;
  t.prefillBlocks = prefillTokens / bs;
  t.decodeBlocks = decodeBlocks;
  return (overlapScoreWeight * prefillTokens) / bs + decodeBlocks;
}

/** A later-2026 policy's weights, its defaults filled in. */
interface PrefillScaleWeights {
  readonly credit: number;
  readonly scale: number;
  readonly reqWeight: number;
}

/** Cost of one candidate under the later-2026 formula, its terms written into `t` (made by `prefillScaleTerms`). */
function prefillScaleCost(req: SelectionRequest, c: CandidateInput, w: PrefillScaleWeights, t: Terms): number {
  const overlapBlocks = c.overlapBlocks;
  const decodeBlocks = decodeBlocksOf(req, c);
  const rawPrefillBlocks = (c.activePrefillTokens + req.isl) / req.blockSize;
  const overlapCreditBlocks = w.credit * overlapBlocks + HOST_CACHE_HIT_WEIGHT * (c.hostOverlapBlocks ?? 0) + DISK_CACHE_HIT_WEIGHT * (c.diskOverlapBlocks ?? 0);
  const adjustedPrefillBlocks = Math.max(0, rawPrefillBlocks - overlapCreditBlocks);
  const activeRequestCost = w.reqWeight * c.activeRequests;
  t.overlapBlocks = overlapBlocks;
  t.rawPrefillBlocks = rawPrefillBlocks;
  t.overlapCreditBlocks = overlapCreditBlocks;
  t.adjustedPrefillBlocks = adjustedPrefillBlocks;
  t.prefillCostBlocks = w.scale * adjustedPrefillBlocks;
  t.decodeBlocks = decodeBlocks;
  t.activeRequestCost = activeRequestCost;
  return w.scale * adjustedPrefillBlocks + decodeBlocks + activeRequestCost;
}

type ScoreRecord = { -readonly [K in keyof CandidateScore]: CandidateScore[K] } & { terms: Terms };

/**
 * Records `selectKvRouter` may write its answer into instead of allocating one per candidate, for
 * a caller that consumes each answer before the next selection (the indexer's observe). Opaque.
 */
export class SelectionScratch {
  /**
   * The caller always lists candidates in (workerId, dpRank) order, so the selection does not check
   * it (README.md). Listing them otherwise with this set changes which of several exactly tied
   * workers is drawn (and a sampled pick's draws).
   */
  readonly candidatesInOrder: boolean;
  constructor(options: { readonly candidatesInOrder?: boolean } = {}) {
    this.candidatesInOrder = options.candidatesInOrder === true;
  }
  /** @internal Score records by formula (their terms differ in shape), reused call after call. */
  readonly records: { overlap_weight: ScoreRecord[]; prefill_load_scale: ScoreRecord[] } = { overlap_weight: [], prefill_load_scale: [] };
  /** @internal */
  readonly scores: ScoreRecord[] = [];
  /** @internal */
  cost = new Float64Array(0);
}

/**
 * Dynamo's pick at temperature 0 among costs[0..n): the lowest; exact ties go to the smaller tree
 * (when every tied candidate has a size and the policy breaks ties so), then to a seeded uniform
 * draw over the tied in `order` (candidate indices in canonical (workerId, dpRank) order).
 */
function lowestCost(
  costs: Float64Array,
  n: number,
  order: readonly number[],
  candidates: readonly CandidateInput[],
  tieBreakByTreeSize: boolean,
  rng: Rng,
): { index: number; reason: SelectionReason } {
  let best = Infinity;
  for (let i = 0; i < n; i++) best = Math.min(best, costs[i]!);
  let tied: number[] = [];
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    if (costs[i] === best) tied.push(i);
  }
  let reason: SelectionReason = 'lowest_cost';
  if (tied.length > 1 && tieBreakByTreeSize && tied.every((i) => candidates[i]!.treeSize !== undefined)) {
    let smallest = Infinity;
    for (const i of tied) smallest = Math.min(smallest, candidates[i]!.treeSize!);
    const narrowed = tied.filter((i) => candidates[i]!.treeSize === smallest);
    if (narrowed.length < tied.length) reason = 'lowest_cost_tie_tree';
    tied = narrowed;
  }
  if (tied.length > 1) reason = 'lowest_cost_tie_random';
  return { index: tied.length === 1 ? tied[0]! : tied[randomInt(rng, tied.length)]!, reason };
}

/** A candidate record whose every kv_router input is present and writable (a caller's reused record). */
export type CandidateRecord = { -readonly [K in keyof CandidateInput]: CandidateInput[K] } & {
  hostOverlapBlocks: number;
  diskOverlapBlocks: number;
  newRequestBlocks: number;
  treeSize: number;
};

/** A zeroed candidate record for (workerId, dpRank), for a caller that fills it query after query. */
export function candidateRecord(workerId: CandidateInput['workerId'], dpRank: number): CandidateRecord {
  return {
    workerId,
    dpRank,
    overlapBlocks: 0,
    hostOverlapBlocks: 0,
    diskOverlapBlocks: 0,
    activePrefillTokens: 0,
    activeDecodeBlocks: 0,
    activeRequests: 0,
    newRequestBlocks: 0,
    treeSize: 0,
  };
}

/**
 * A kv_router policy validated, its defaults filled in: `weight` is the April 2026 formula's overlap
 * score weight (0 for the later formula), `prefill` the later formula's weights (null for April's).
 */
function resolvePolicy(policy: KvRouterPolicy) {
  const temperature = nonNegative('temperature', policy.temperature ?? KV_ROUTER_DEFAULTS.temperature);
  if (policy.formula === 'overlap_weight') {
    return { temperature, weight: nonNegative('overlapScoreWeight', policy.overlapScoreWeight ?? KV_ROUTER_DEFAULTS.overlapScoreWeight), prefill: null };
  }
  const prefill: PrefillScaleWeights = {
    credit: policy.overlapScoreCredit ?? KV_ROUTER_DEFAULTS.overlapScoreCredit,
    scale: policy.prefillLoadScale ?? KV_ROUTER_DEFAULTS.prefillLoadScale,
    reqWeight: policy.decodeActiveRequestWeight ?? KV_ROUTER_DEFAULTS.decodeActiveRequestWeight,
  };
  return { temperature, weight: 0, prefill };
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

/**
 * Dynamo's pick among `candidates`, with every candidate's cost and terms. With `scratch` (and
 * temperature 0), the answer's score records and its scores array are the scratch's, overwritten
 * by the next call given the same scratch: the same values as without it, no allocation per
 * candidate. A sampled pick (temperature > 0) always answers in new records.
 */
export function selectKvRouter(
  policy: KvRouterPolicy,
  req: SelectionRequest,
  candidates: readonly CandidateInput[],
  rng: Rng,
  scratch?: SelectionScratch,
): SelectionResult {
  validateRequest(req);
  const { temperature, weight, prefill: ws } = resolvePolicy(policy);
  if (candidates.length === 0) {
    return { chosen: null, sense: 'lower-is-better', scores: [], reason: 'no_candidates' };
  }
  const n = candidates.length;
  const reuse = scratch !== undefined && temperature === 0 ? scratch : null;
  const overlapWeight = ws === null;
  // Terms records: the scratch's (made once per candidate slot and formula) or new ones.
  let recs: ScoreRecord[] | null = null;
  if (reuse !== null) {
    recs = overlapWeight ? reuse.records.overlap_weight : reuse.records.prefill_load_scale;
    for (let i = recs.length; i < n; i++) {
      const c = candidates[i]!;
      recs.push({ workerId: c.workerId, dpRank: c.dpRank, score: 0, terms: overlapWeight ? overlapWeightTerms() : prefillScaleTerms(), eligible: true, input: c });
    }
    if (reuse.cost.length < n) reuse.cost = new Float64Array(Math.max(n, 2 * reuse.cost.length));
  }
  const costs = reuse !== null ? reuse.cost : new Float64Array(n);
  const terms = new Array<Terms>(recs === null ? n : 0);
  for (let i = 0; i < n; i++) {
    const t = recs !== null ? recs[i]!.terms : (terms[i] = overlapWeight ? overlapWeightTerms() : prefillScaleTerms());
    costs[i] = overlapWeight ? overlapWeightCost(req, candidates[i]!, weight, t) : prefillScaleCost(req, candidates[i]!, ws!, t);
  }
  // Work in a canonical (worker, rank) order so the seeded pick does not
  // depend on the order the caller happened to list candidates in.
  const order = candidateOrder(candidates, scratch?.candidatesInOrder === true);
  let chosenIdx: number;
  let reason: SelectionReason;
  let probs: number[] | undefined;

  if (temperature === 0) {
    const pick = lowestCost(costs, n, order, candidates, policy.tieBreakByTreeSize ?? true, rng);
    chosenIdx = pick.index;
    reason = pick.reason;
  } else {
    const orderedProbs = softmaxProbabilities(
      order.map((i) => costs[i]!),
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

  let scores: CandidateScore[];
  if (recs !== null) {
    const out = reuse!.scores;
    out.length = n;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      const r = recs[i]!;
      r.workerId = c.workerId;
      r.dpRank = c.dpRank;
      r.score = costs[i]!;
      r.input = c;
      out[i] = r;
    }
    scores = out;
  } else {
    scores = new Array<CandidateScore>(n);
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      scores[i] = probs
        ? { workerId: c.workerId, dpRank: c.dpRank, score: costs[i]!, terms: terms[i]!, eligible: true, probability: probs[i]!, input: c }
        : { workerId: c.workerId, dpRank: c.dpRank, score: costs[i]!, terms: terms[i]!, eligible: true, input: c };
    }
  }
  const ch = candidates[chosenIdx]!;
  const chosen: ChosenWorker = { workerId: ch.workerId, dpRank: ch.dpRank, index: chosenIdx };
  return { chosen, sense: 'lower-is-better', scores, reason };
}
