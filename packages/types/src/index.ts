/**
 * Exact unsigned 64-bit values. Dynamo's block hashes, sequence hashes and
 * worker ids use the full u64 range; a JS number keeps only 53 bits, so every
 * such value is a `bigint` in [0, 2^64) and sequences of them are
 * `BigUint64Array` (exact, compact, and readable as u32 halves without
 * allocating). Distinct brands keep the three kinds of hash from being mixed up.
 */

/** A decoder's outcome: the value, or a stable code (safe as a metric label) and a reason naming the field. */
export type CodedResult<T, Code extends string> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly code: Code; readonly reason: string };

declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

/** XXH3 of one block's tokens (Dynamo's `tokens_hash`, `LocalBlockHash`). */
export type LocalHash = Brand<bigint, 'LocalHash'>;
/** Rolling hash of a block and all blocks before it (Dynamo's `SequenceHash`). */
export type SequenceHash = Brand<bigint, 'SequenceHash'>;
/** The engine's opaque block id (`block_hash`, `ExternalSequenceBlockHash`). */
export type ExternalHash = Brand<bigint, 'ExternalHash'>;
/** Dynamo's worker instance id (`worker_id`). */
export type WorkerId = Brand<bigint, 'WorkerId'>;

export const U64_MAX = 0xffff_ffff_ffff_ffffn;

/** True when `v` is a bigint in the unsigned 64-bit range. */
export function isU64(v: unknown): v is bigint {
  return typeof v === 'bigint' && v >= 0n && v <= U64_MAX;
}

/**
 * Normalise an integer that arrived as a JS number or bigint to u64.
 * Negative values in the signed 64-bit range are reinterpreted as the same
 * bits unsigned (engines may send hashes as i64). Returns undefined for
 * anything that is not an exact integer in [-2^63, 2^64): a number above
 * 2^53 is refused because its low bits are already lost.
 */
export function toU64(v: unknown): bigint | undefined {
  if (typeof v === 'bigint') {
    if (v >= 0n) return v <= U64_MAX ? v : undefined;
    return v >= -(1n << 63n) ? BigInt.asUintN(64, v) : undefined;
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) return undefined;
    return v >= 0 ? BigInt(v) : BigInt.asUintN(64, BigInt(v));
  }
  return undefined;
}

/** 16-digit lower-case hex, for logs and operator tools. */
export function u64ToHex(v: bigint): string {
  return v.toString(16).padStart(16, '0');
}

/**
 * What a worker advertises about itself (Dynamo's `kv_cache_block_size` and
 * `runtime_config`), as a registration carries it (@vantage/protocol) and the
 * booking ledger keeps it (@vantage/bookings). Capacities apply to each dp
 * rank: every rank is its own engine with its own KV cache and batch budget,
 * which is how Dynamo's router treats (worker_id, dp_rank) pairs. `null` means
 * "not advertised": the ledger then reports pressure and occupancy as unknown
 * rather than guessing.
 */
export interface WorkerCapacity {
  /** Tokens per KV block. */
  readonly blockSize: number;
  readonly totalKvBlocks: number | null;
  /** The engine's prefill batch-token budget; the denominator of P. */
  readonly maxNumBatchedTokens: number | null;
  readonly maxNumSeqs: number | null;
  /** First dp rank served by this instance (`data_parallel_start_rank`). */
  readonly dpStartRank: number;
  /** Number of dp ranks (`data_parallel_size`), at least 1. */
  readonly dpSize: number;
  /** False while the worker is draining or otherwise must not receive new work. */
  readonly schedulable: boolean;
}

/** The capacity fields of a message or record that carries them beside others (a copy of just those). */
export function capacityOf(blockSize: number, w: Omit<WorkerCapacity, 'blockSize'>): WorkerCapacity {
  return {
    blockSize,
    totalKvBlocks: w.totalKvBlocks,
    maxNumBatchedTokens: w.maxNumBatchedTokens,
    maxNumSeqs: w.maxNumSeqs,
    dpStartRank: w.dpStartRank,
    dpSize: w.dpSize,
    schedulable: w.schedulable,
  };
}

// ---------------------------------------------------------------------------
// Domain form of Dynamo's KV cache events (what decoders produce and the
// prefix index applies). Wire shape, for reference (lib/kv-router protocols):
//   RouterEvent  { worker_id: u64, storage_tier, event: KvCacheEvent }
//   KvCacheEvent { event_id: u64, data: KvCacheEventData, dp_rank: u32 }
//   KvCacheEventData = {"stored": {parent_hash, start_position, blocks:[{block_hash, tokens_hash, mm_extra_info}]}}
//                    | {"removed": {block_hashes}} | "cleared"
// Hash lists are parallel BigUint64Arrays: exact, compact, allocation-free to scan.
// ---------------------------------------------------------------------------

export const STORAGE_TIERS = ['device', 'host_pinned', 'disk', 'external'] as const;
export type StorageTier = (typeof STORAGE_TIERS)[number];

export interface KvStoredData {
  readonly kind: 'stored';
  /** Engine block id of the parent of blocks[0]; null means the blocks start at the root. */
  readonly parentHash: ExternalHash | null;
  /** Position (in blocks) of blocks[0] in its sequence, when the engine reports it. */
  readonly startPosition: number | null;
  /** Engine block ids (`block_hash`), one per stored block. */
  readonly blockHashes: BigUint64Array;
  /** Local hashes (`tokens_hash`), parallel to blockHashes. */
  readonly tokensHashes: BigUint64Array;
  /** `mm_extra_info` per block when any block carried one (opaque, kept for diagnostics). */
  readonly mmExtraInfo?: readonly unknown[];
}

export type KvEventData = KvStoredData | { readonly kind: 'removed'; readonly blockHashes: BigUint64Array } | { readonly kind: 'cleared' };

/** One decoded `RouterEvent`. */
export interface KvEvent {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly storageTier: StorageTier;
  /** Per (worker, dp_rank) counter; a jump means loss, a repeat or decrease a duplicate. */
  readonly eventId: bigint;
  readonly data: KvEventData;
}
