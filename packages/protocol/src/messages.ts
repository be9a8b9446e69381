import type { WorkerCapacity, WorkerId } from '@vantage/types';

/**
 * Domain form of our messages: what decoders return and encoders take (package README; JSON shapes
 * in schemas/protocol/). Optional wire fields are explicit `null`s, so a consumer never has to tell
 * "absent" from "unknown".
 */

export type ModelRole = 'efficient' | 'capable';

/** A prompt as Dynamo's index sees it: block hashes, or token ids for the receiver to hash. */
export type PromptSpec =
  | { readonly kind: 'local_hashes'; readonly localHashes: BigUint64Array; readonly loraName: string | null }
  | { readonly kind: 'token_ids'; readonly tokenIds: Uint32Array; readonly loraName: string | null };

// --- vantage.v1.observe.{pool} -------------------------------------------------

export interface ObserveRequest {
  readonly requestId: string | null;
  readonly prompt: PromptSpec;
  /** N: input tokens after chat template and tokenizer. */
  readonly promptTokens: number;
  /** Which workers the reply lists: all of the pool (default) or only Dynamo's choice. */
  readonly workers?: 'all' | 'choice';
  /** The reply's encoding: JSON (default) or the compact binary form (`observeReplyCodec.decode` reads both). */
  readonly replyEncoding?: 'json' | 'binary';
}

/** How old each fact about a worker is, in ms, relative to the reply's `atMs`. */
export interface FactAges {
  readonly indexMs: number | null;
  readonly loadMs: number | null;
  readonly bookingMs: number | null;
}

export interface Suspect {
  readonly reason: string;
  readonly sinceMs: number;
}

/** The worker's own last `ActiveLoad` report. */
export interface ReportedLoad {
  readonly activeDecodeBlocks: number | null;
  readonly activePrefillTokens: number | null;
  readonly kvUsedBlocks: number | null;
}

export interface WorkerObservation {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly schedulable: boolean;
  readonly deviceOverlapBlocks: number;
  /** Reusable device-prefix tokens. */
  readonly K: number;
  readonly hostOverlapBlocks: number | null;
  readonly diskOverlapBlocks: number | null;
  readonly anyTierOverlapBlocks: number | null;
  /** Booked requests. */
  readonly R: number;
  readonly trackedPrefillTokens: number;
  /** Prefill pressure; null when the batch-token capacity is unknown. */
  readonly P: number | null;
  readonly maxNumBatchedTokens: number | null;
  readonly effectivePrefillTokens: number;
  readonly newBlocks: number;
  readonly activeBlocks: number;
  readonly totalKvBlocks: number | null;
  readonly treeBlocks: number;
  readonly reported: ReportedLoad | null;
  readonly suspect: Suspect | null;
  readonly ages: FactAges;
  readonly dynamoCost: number | null;
  /** The worker's own last forward-pass-metrics report (Dynamo 1.6.1); absent when none arrived. JSON replies only. */
  readonly forwardPass?: ForwardPassObservation | null;
  /** When the indexer last recovered this worker's blocks from the worker's own local index (ms since epoch); absent when never. JSON replies only. */
  readonly recoveredAtMs?: number | null;
}

/** What a worker's `forward-pass-metrics` said last, and how old that is. */
export interface ForwardPassObservation {
  /** Requests in the last forward pass, prefill and decode. */
  readonly scheduledRequests: number;
  readonly scheduledPrefillTokens: number;
  readonly scheduledDecodeKvTokens: number;
  /** Requests waiting in the worker's own queue, and their prompt tokens. */
  readonly queuedRequests: number;
  readonly queuedPrefillTokens: number;
  readonly wallTimeS: number;
  readonly ageMs: number;
}

export interface PendingWork {
  readonly requests: number;
  readonly tokens: number;
}

export interface SelectionPolicy {
  readonly name: string;
  readonly params: Readonly<Record<string, number>>;
}

export interface DynamoChoice {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly cost: number;
  readonly policy: SelectionPolicy;
}

export interface ObserveReply {
  readonly pool: string;
  readonly blockSize: number;
  readonly queryDurationUs: number;
  readonly atMs: number;
  readonly workers: readonly WorkerObservation[];
  readonly pending: PendingWork | null;
  readonly dynamoChoice: DynamoChoice | null;
  readonly snapshotRestoredAtMs: number | null;
}

// --- vantage.v1.route ------------------------------------------------------------

export interface RouteCandidate {
  readonly model: string;
  /** null: the decision service maps the model to its pool. */
  readonly pool: string | null;
  readonly prompt: PromptSpec;
  readonly promptTokens: number;
}

export interface RouteRequest {
  readonly requestId: string;
  readonly sessionId: string;
  readonly stageProposal: ModelRole;
  readonly candidates: { readonly efficient: RouteCandidate; readonly capable: RouteCandidate };
  readonly deadlineMs: number | null;
}

/** The chosen worker's facts, each null when no worker was observed. */
export type ChosenWorkerFacts = {
  readonly [K in 'workerId' | 'dpRank' | 'schedulable' | 'K' | 'R' | 'P' | 'effectivePrefillTokens' | 'hostOverlapBlocks' | 'diskOverlapBlocks' | 'activeBlocks' | 'totalKvBlocks']: WorkerObservation[K] | null;
};

export interface CandidateObservation extends ChosenWorkerFacts {
  readonly model: string;
  readonly pool: string;
  /** N */
  readonly promptTokens: number;
  readonly pending: PendingWork | null;
  readonly ages: FactAges & { readonly collectedMs: number };
  readonly queryDurationUs: number | null;
  /** Why the observation is unusable (timeout, no workers, ...); null when it is usable. */
  readonly error: { readonly code: string; readonly reason: string | null } | null;
}

export interface Predictions {
  readonly estimator: 'none' | 'blind' | 'cache';
  readonly efficientTtftMs: number | null;
  readonly capableTtftMs: number | null;
  readonly advantageMs: number | null;
  readonly marginMs: number | null;
}

export type RouteReason = 'kept' | 'overrode' | 'fallback';

export interface RouteReply {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly stageProposal: ModelRole;
  readonly model: string;
  readonly modelRole: ModelRole;
  readonly pool: string | null;
  readonly workerId: WorkerId | null;
  readonly dpRank: number | null;
  readonly endpoint: string | null;
  readonly reason: RouteReason;
  /** Which fallback, when reason is 'fallback'. */
  readonly fallback: string | null;
  readonly detail: string | null;
  readonly variant: string;
  readonly observations: { readonly efficient: CandidateObservation | null; readonly capable: CandidateObservation | null };
  readonly predictions: Predictions;
  readonly parameterVersion: string | null;
  readonly queryDurationUs: number;
  readonly decisionDurationUs: number;
}

// --- vantage.v1.bookings.{pool} ---------------------------------------------------

export interface BookingEvent {
  readonly requestId: string;
  readonly sessionId: string;
  readonly pool: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly promptTokens: number;
  readonly overlapBlocks: number;
  /** At most one of sequenceHashes / localHashes is non-null. */
  readonly sequenceHashes: BigUint64Array | null;
  readonly localHashes: BigUint64Array | null;
  readonly expectedOutputTokens: number | null;
  readonly prefillTokens: number | null;
  readonly atMs: number;
}

// --- vantage.v1.lifecycle.{pool} --------------------------------------------------

export const LIFECYCLE_KINDS = ['first_token', 'done', 'cancelled', 'failed', 'usage'] as const;
export type LifecycleKind = (typeof LIFECYCLE_KINDS)[number];

export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cachedTokens: number | null;
}

export interface LifecycleEvent {
  readonly requestId: string;
  readonly sessionId: string;
  readonly pool: string;
  readonly kind: LifecycleKind;
  readonly atMs: number;
  readonly workerId: WorkerId | null;
  readonly dpRank: number | null;
  /** Always present for kind 'usage'; may accompany 'done'. */
  readonly usage: Usage | null;
  readonly error: { readonly code: string; readonly message: string | null } | null;
  /**
   * Competing (background) traffic, not a request of the sessions under study: load generators
   * and calibration harnesses mark theirs so outcome records can tell them apart. Decoders
   * always fill it (absent on the wire = false); producers may omit it.
   */
  readonly background?: boolean;
  /**
   * Epoch ms of the request's arrival, for requests that have no decision record to time them
   * from (background traffic). Decoders always fill it (absent on the wire = null).
   */
  readonly arrivalMs?: number | null;
}

// --- vantage.v1.workers.{pool} ----------------------------------------------------

export type WorkerRegistration =
  | {
      readonly kind: 'register' | 'heartbeat';
      readonly pool: string;
      readonly workerId: WorkerId;
      readonly atMs: number;
      readonly capacity: WorkerCapacity;
      readonly ttlMs: number;
      readonly endpoint: string | null;
      readonly model: string | null;
    }
  | { readonly kind: 'deregister'; readonly pool: string; readonly workerId: WorkerId; readonly atMs: number };

