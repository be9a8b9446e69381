import type { WorkerId } from '@vantage/types';

/** The request being placed: only what the cost functions read. */
export interface SelectionRequest {
  /** Prompt tokens (`isl_tokens`). Must be a positive integer. */
  readonly isl: number;
  /** KV block size of the pool, in tokens. */
  readonly blockSize: number;
}

/**
 * One (worker, dp rank) the request could go to, with the facts a policy
 * needs. Plain numbers: the index and bookings produce them, selection never
 * reaches back into either.
 */
export interface CandidateInput {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Leading request blocks resident in this worker's GPU (device) cache. */
  readonly overlapBlocks: number;
  /**
   * Further leading blocks found in host memory / on disk, as Dynamo's cost
   * consumes them (`tier_overlap_blocks.host_pinned` / `.disk`): blocks
   * beyond the device prefix, not cumulative counts that include it.
   * Default 0. Only the later-2026 formula reads them.
   */
  readonly hostOverlapBlocks?: number;
  readonly diskOverlapBlocks?: number;
  /** Uncached prefill tokens booked on this worker and not yet prefilled. */
  readonly activePrefillTokens: number;
  /** KV blocks held by requests booked on this worker (`active_decode_blocks`). */
  readonly activeDecodeBlocks: number;
  /** Requests booked on this worker, including those executing. */
  readonly activeRequests: number;
  /**
   * Blocks of this request not already active on this worker (Dynamo's
   * predictive active blocks count only those as new decode load). When
   * unknown, every request block is counted as new: the conservative choice.
   */
  readonly newRequestBlocks?: number;
  /** Blocks this worker holds in the index, for Dynamo's "smaller tree" tie-break. */
  readonly treeSize?: number;
}

/** Which direction of `score` is better for the policy that produced it. */
export type ScoreSense = 'lower-is-better' | 'higher-is-better';

/** What a policy computed for one candidate. */
export interface CandidateScore {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Cost (kv_router) or score (llm-d); NaN for round robin / random. */
  readonly score: number;
  /** The intermediate terms of the formula, named as the reference names them. */
  readonly terms: Readonly<Record<string, number>>;
  /** False when a filter (llm-d affinity) removed the candidate before scoring decided. */
  readonly eligible: boolean;
  /** Selection probability when the pick was sampled (temperature > 0). */
  readonly probability?: number;
  /** The inputs the score was computed from. */
  readonly input: CandidateInput;
}

export interface ChosenWorker {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Index into the caller's candidate array. */
  readonly index: number;
}

export type SelectionReason =
  | 'lowest_cost'
  | 'lowest_cost_tie_tree'
  | 'lowest_cost_tie_random'
  | 'sampled'
  | 'sticky'
  | 'sticky_released'
  | 'no_sticky'
  | 'round_robin'
  | 'random'
  | 'no_candidates';

export interface SelectionResult {
  /** null only when there were no candidates. */
  readonly chosen: ChosenWorker | null;
  readonly sense: ScoreSense;
  /** One entry per candidate, in the caller's order. */
  readonly scores: readonly CandidateScore[];
  readonly reason: SelectionReason;
}
