import type { StorageTier, WorkerId } from '@vantage/types';

/**
 * Why a (worker, dp rank)'s part of the index can no longer be trusted.
 * - `unknown_parent`: a stored event named a parent block this publisher never stored (or already removed),
 *   so at least one earlier event was lost.
 * - `event_gap`: an event id jumped forward by more than one; the events in between were lost.
 * - `missed_start`: the first event seen from a publisher had an id above 1 (Dynamo counts from 1, its
 *   mocker from 0), so its earlier history, including blocks it still holds, was never seen.
 */
export type SuspectReason = 'unknown_parent' | 'event_gap' | 'missed_start';

export interface SuspectInfo {
  /** The first reason since the publisher was last trusted. */
  readonly reason: SuspectReason;
  /** Caller's clock (ms) when it first became suspect. */
  readonly sinceMs: number;
  /** How many suspect-making incidents have happened since then. */
  readonly incidents: number;
}

export interface ApplyResult {
  /**
   * `applied`; `duplicate` (an event id at or below the publisher's last: ignored); `rejected` (the
   * event's id is taken, but its content is refused whole and the index is unchanged: `rejection`
   * says why).
   */
  readonly status: 'applied' | 'duplicate' | 'rejected';
  /**
   * Set exactly when `status` is `rejected`. `self_referencing`: a stored event names one block id
   * twice, its parent counted among them (Dynamo 1.6.1 drops such an event: "Self-referencing block
   * detected: duplicate hash in store event").
   */
  readonly rejection: 'self_referencing' | null;
  /** Blocks stored or removed by this event (each counts as one block operation). */
  readonly blockOps: number;
  /** Events lost before this one (0 when ids were contiguous). */
  readonly missedEvents: bigint;
  /** True when a stored event's parent was unknown (its blocks were kept as a detached chain). */
  readonly unknownParent: boolean;
  /** Removed block ids this publisher did not hold on the event's tier (reported, otherwise ignored). */
  readonly unknownRemovals: BigUint64Array;
  /** The publisher's suspect state after the event, or null when trusted. */
  readonly suspect: SuspectInfo | null;
}

/** What `recover` did to one publisher. */
export interface RecoverResult {
  /** Blocks the publisher held before (dropped). */
  readonly blocksDropped: number;
  /** Blocks it holds after the recovered events. */
  readonly blocks: number;
  /** Recovered stored events whose parent was unknown (the publisher then stays suspect). */
  readonly unknownParents: number;
  /** Recovered stored events refused whole as self-referencing (skipped, as `apply` refuses them). */
  readonly rejected: number;
  readonly suspect: SuspectInfo | null;
}

/** One (worker, dp rank)'s reuse for a request. All counts are leading blocks from block 0. */
export interface WorkerMatch {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Leading blocks held on the device (GPU) tier. */
  readonly deviceBlocks: number;
  /** Leading blocks held on device or host_pinned (cumulative: each block on either; never a sum). */
  readonly hostBlocks: number;
  /** Leading blocks held on device, host_pinned or disk. */
  readonly diskBlocks: number;
  /** Leading blocks held on any tier, external included. */
  readonly anyBlocks: number;
  readonly deviceTokens: number;
  readonly hostTokens: number;
  readonly diskTokens: number;
  readonly anyTokens: number;
  /** Blocks this publisher holds in total (entries in its block-id map, any tier): Dynamo's tree size. */
  readonly treeSize: number;
  /** Null when trusted; otherwise its answers may under- or over-state reuse. */
  readonly suspect: SuspectInfo | null;
  /** Last event id applied, or null before the first event (or after a resync without an id). */
  readonly lastEventId: bigint | null;
  /** Caller's clock (ms) at the last applied event, or null. */
  readonly lastEventMs: number | null;
}

export interface MatchResult {
  readonly blockSize: number;
  /** Blocks in the request (length of the local hash array). */
  readonly requestBlocks: number;
  /** Every (worker, dp rank) the index knows, including those with no reuse. Order is unspecified. */
  readonly workers: WorkerMatch[];
}

export interface PublisherStats {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Entries in the block-id map (blocks held on at least one tier). */
  readonly blocks: number;
  readonly blocksByTier: Readonly<Record<StorageTier, number>>;
  readonly suspect: SuspectInfo | null;
  readonly lastEventId: bigint | null;
}

export interface IndexCounters {
  /** Events applied (duplicates excluded). */
  eventsApplied: number;
  duplicates: number;
  /** Gap incidents (each jump in ids counts once) and the events they skipped. */
  gaps: number;
  missedEvents: bigint;
  unknownParents: number;
  /** Removed block ids that were not held (per id). */
  unknownRemovals: number;
  blocksStored: number;
  blocksRemoved: number;
  clears: number;
  /** First events whose id showed earlier history was never seen. */
  missedStarts: number;
}

export interface IndexStats {
  readonly blockSize: number;
  readonly publishers: PublisherStats[];
  /** Sum of publisher block counts: (publisher, block) pairs resident in the index. */
  readonly totalBlocks: number;
  /** Live tree nodes (distinct block positions, shared by publishers), detached ones included. */
  readonly nodes: number;
  /** Bytes held by the index's typed arrays (node table, edge table, block-id maps); excludes small objects. */
  readonly arrayBytes: number;
  readonly counters: Readonly<IndexCounters>;
}
