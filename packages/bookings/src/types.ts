import type { WorkerId } from '@vantage/types';

export type { WorkerCapacity } from '@vantage/types';

/** Why a booking ended. `expired` is also what `expire()` records for leaks. */
export const RELEASE_REASONS = ['completed', 'cancelled', 'failed', 'expired'] as const;
export type ReleaseReason = (typeof RELEASE_REASONS)[number];

/**
 * Who made the booking. Only `local` and `decision_service` are bookings this
 * system made itself; `dynamo_router` is competing traffic learned from
 * Dynamo's `active_sequences_events`, `simulator` is the offline replay.
 */
export type BookingSource = 'local' | 'decision_service' | 'dynamo_router' | 'simulator';

export interface BookInput {
  readonly requestId: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Prompt length in tokens (Dynamo's `isl`). */
  readonly promptTokens: number;
  /** Blocks of the prompt already reusable on the worker's device cache at booking time. */
  readonly overlapBlocks: number;
  /**
   * The request's block sequence hashes. Copied by the ledger: callers may
   * reuse their buffer, and the release must decrement exactly what was added.
   */
  readonly sequenceHashes: BigUint64Array;
  readonly expectedOutputTokens?: number | null;
  /**
   * Uncached prefill tokens to track, when the caller already knows them
   * (Dynamo's `prefill_load_hint.initial_effective_prefill_tokens`, or 0 when
   * its router does not track prefill for this request). When absent the
   * ledger computes `max(0, promptTokens - overlapBlocks * blockSize)`.
   */
  readonly prefillTokens?: number;
  readonly source: BookingSource;
  readonly nowMs: number;
}

/** Read-only view of a live booking. */
export interface BookingView
  extends Pick<BookInput, 'requestId' | 'workerId' | 'dpRank' | 'promptTokens' | 'overlapBlocks' | 'source'> {
  /** Prefill tokens this booking added to its worker's tracked total (fixed at booking time). */
  readonly prefillTokens: number;
  readonly prefillComplete: boolean;
  readonly expectedOutputTokens: number | null;
  readonly blocks: number;
  readonly bookedAtMs: number;
  readonly prefillCompletedAtMs: number | null;
}

/** Booked work on one (worker, dp rank): the R, P and decode-block facts of an observation. */
export interface WorkerLoad {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** True when the worker's capacity has been registered. */
  readonly registered: boolean;
  /** null when the worker is not registered. */
  readonly schedulable: boolean | null;
  /** R: live bookings on this rank, executing ones included. */
  readonly requests: number;
  /** Live bookings whose prefill is not yet complete. */
  readonly prefillRequests: number;
  /** Sum over prefill-pending bookings of their uncached prefill tokens. */
  readonly trackedPrefillTokens: number;
  /** P = trackedPrefillTokens / maxNumBatchedTokens; null when the budget is unknown. */
  readonly prefillPressure: number | null;
  /** Unique sequence-hash blocks across the rank's live bookings (shared prefixes count once). */
  readonly activeBlocks: number;
  readonly totalKvBlocks: number | null;
  /** Sum of expectedOutputTokens over live bookings that declared one. */
  readonly expectedOutputTokens: number;
  /** Ledger time of the last booking change on this rank; null if never. */
  readonly lastChangeMs: number | null;
}

/** A `WorkerLoad` record a caller owns and lets `BookingLedger.loadOfRef` overwrite (hot paths reuse one per rank). */
export type WorkerLoadRecord = { -readonly [K in keyof WorkerLoad]: WorkerLoad[K] };

export type BookOutcome =
  | { readonly kind: 'booked'; readonly booking: BookingView }
  /** Same id already live: ignored, the existing booking is returned. `conflicting` when worker or rank differ. */
  | { readonly kind: 'duplicate'; readonly booking: BookingView; readonly conflicting: boolean }
  /** The id was released recently (its release overtook the booking): ignored. */
  | { readonly kind: 'already_released' }
  | { readonly kind: 'invalid'; readonly reason: string };

export type PrefillOutcome =
  | 'marked'
  /** Prefill was already complete: no-op. */
  | 'already_complete'
  /** The booking was already released: no-op. */
  | 'released'
  /** No booking yet: remembered, so a late booking starts prefill-complete. */
  | 'early';

export type ReleaseOutcome =
  | 'released'
  /** Already released (tombstoned): counted no-op. */
  | 'already_released'
  /** Never seen: counted no-op, tombstoned so a late booking is ignored. */
  | 'unknown';

export interface SetWorkerOutcome {
  readonly kind: 'added' | 'updated' | 'invalid';
  readonly reason?: string;
}

/** Monotonic counters; every one of them is a metric. */
export interface BookingCounters {
  booked: number;
  duplicateBook: number;
  conflictingDuplicateBook: number;
  lateBookIgnored: number;
  invalidBook: number;
  /** Bookings for a rank outside the registered worker's dp range (accepted). */
  rankOutOfRange: number;
  prefillMarked: number;
  prefillAlreadyComplete: number;
  prefillAfterRelease: number;
  prefillBeforeBook: number;
  released: Record<ReleaseReason, number>;
  releaseAlreadyReleased: number;
  releaseUnknown: number;
  /** Bookings dropped by `expire()`: the request's end was never seen. */
  expiredLeaks: number;
  droppedByWorkerRemoval: number;
  workersAdded: number;
  workersRemoved: number;
  invalidWorker: number;
  /** Tombstones evicted for capacity before their TTL: late bookings for those ids are no longer caught. */
  tombstonesEvicted: number;
  /** A per-rank total would have gone negative. Always 0 unless the ledger has a bug. */
  invariantViolations: number;
}
