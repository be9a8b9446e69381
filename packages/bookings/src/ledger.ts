import { isU64, type WorkerId } from '@vantage/types';
import { BlockRefs, HOLDER_MASK_RANKS, HolderTable, halves } from './block-refs';
import { RecentIds } from './recent-ids';
import {
  RELEASE_REASONS,
  type BookInput,
  type BookOutcome,
  type BookingCounters,
  type BookingView,
  type PrefillOutcome,
  type ReleaseOutcome,
  type ReleaseReason,
  type SetWorkerOutcome,
  type WorkerCapacity,
  type WorkerLoad,
  type WorkerLoadRecord,
} from './types';

interface BookingLedgerOptions {
  /**
   * The pool's KV block size, used for workers whose capacity is not (yet)
   * registered; Dynamo requires one block size per model pool.
   */
  readonly blockSize: number;
  /** Bookings older than this are force-expired as leaks. Dynamo uses 300 s. */
  readonly ttlMs?: number;
  /** How long a released id is remembered so a late booking for it is ignored. Default: ttlMs. */
  readonly tombstoneTtlMs?: number;
  /** Upper bound on remembered ids (tombstones and early prefill marks, each). */
  readonly tombstoneCapacity?: number;
}

const DEFAULT_BOOKING_TTL_MS = 300_000;
const DEFAULT_TOMBSTONE_CAPACITY = 200_000;

const U32_MAX = 0xffff_ffff;
const MAX_REQUEST_ID_LENGTH = 1024;

/** A live booking: its view's facts, the hashes it added (the view counts them) and where it was added. */
interface BookingRecord extends Omit<BookingView, 'blocks' | 'prefillComplete' | 'prefillCompletedAtMs'> {
  prefillComplete: boolean;
  prefillCompletedAtMs: number | null;
  readonly sequenceHashes: BigUint64Array;
  /** The rank state this booking was added to, so release is O(blocks) with no lookups. */
  readonly rank: RankState;
}

/**
 * Running totals for one (worker, dp rank); every field is kept exact incrementally. The rank is its
 * own active-block map (sequence hash → number of live bookings on this rank that contain it, seed
 * 002's map; `size` is the active block count): one object fewer to reach per rank on a query.
 */
class RankState extends BlockRefs {
  requests = 0;
  prefillRequests = 0;
  trackedPrefillTokens = 0;
  expectedOutputTokens = 0;
  readonly bookings = new Set<BookingRecord>();
  lastChangeMs: number | null = null;
  /** `prepareChain` result for this rank: the active prefix length of the prepared chain, valid when `queryId` is the ledger's. */
  queryId = -1;
  queryPrefix = 0;
  /** This rank's bit in the holder masks (0..63), or -1 when all bits were taken when it was created. */
  bit = -1;
}

/**
 * A (worker, dp rank) resolved in the ledger once, for a caller that reads the same ranks query
 * after query (observe reads every rank of the pool on every query): `loadOfRef` and
 * `newBlocksOfRef` then skip the two map lookups per rank. Made by `rankRef`; valid for the
 * ledger's life: it resolves itself again whenever a worker or rank has been added, removed or
 * re-registered since (the ledger's structure version), never on bookings of ranks it knows.
 */
export interface RankRef {
  readonly workerId: WorkerId;
  readonly dpRank: number;
}

class Ref implements RankRef {
  /** The ledger's structure version this was resolved at (-1: never). */
  version = -1;
  rank: RankState | undefined = undefined;
  /** What a load reads of the worker's capacity (frozen, replaced only by `setWorker`, which bumps the version). */
  registered = false;
  schedulable: boolean | null = null;
  budget: number | null = null;
  totalKvBlocks: number | null = null;
  constructor(
    readonly ledger: BookingLedger,
    readonly workerId: WorkerId,
    readonly dpRank: number,
  ) {}
}

interface WorkerEntry {
  capacity: WorkerCapacity | null;
  readonly ranks: Map<number, RankState>;
}

function isNonNegInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function isPosInt(v: unknown): v is number {
  return isNonNegInt(v) && v > 0;
}

function newCounters(): BookingCounters {
  return {
    booked: 0,
    duplicateBook: 0,
    conflictingDuplicateBook: 0,
    lateBookIgnored: 0,
    invalidBook: 0,
    rankOutOfRange: 0,
    prefillMarked: 0,
    prefillAlreadyComplete: 0,
    prefillAfterRelease: 0,
    prefillBeforeBook: 0,
    released: { completed: 0, cancelled: 0, failed: 0, expired: 0 },
    releaseAlreadyReleased: 0,
    releaseUnknown: 0,
    expiredLeaks: 0,
    droppedByWorkerRemoval: 0,
    workersAdded: 0,
    workersRemoved: 0,
    invalidWorker: 0,
    tombstonesEvicted: 0,
    invariantViolations: 0,
  };
}

/** Why a capacity is unusable, or undefined when it is valid. */
function validateWorkerCapacity(c: WorkerCapacity): string | undefined {
  if (!isPosInt(c.blockSize)) return 'blockSize must be a positive integer';
  if (c.totalKvBlocks !== null && !isNonNegInt(c.totalKvBlocks)) return 'totalKvBlocks must be a non-negative integer or null';
  if (c.maxNumBatchedTokens !== null && !isNonNegInt(c.maxNumBatchedTokens)) {
    return 'maxNumBatchedTokens must be a non-negative integer or null';
  }
  if (c.maxNumSeqs !== null && !isNonNegInt(c.maxNumSeqs)) return 'maxNumSeqs must be a non-negative integer or null';
  if (!isNonNegInt(c.dpStartRank) || c.dpStartRank > U32_MAX) return 'dpStartRank must be a u32';
  if (!isPosInt(c.dpSize) || c.dpStartRank + c.dpSize - 1 > U32_MAX) return 'dpSize must be a positive integer within the u32 rank range';
  if (typeof c.schedulable !== 'boolean') return 'schedulable must be a boolean';
  return undefined;
}

/**
 * Booked work per (worker, dp rank), kept incrementally (README.md, "What it keeps", "Rules").
 * Synchronous and single-writer: no method yields mid-update, so a reader never sees a half-applied
 * booking. Time is clamped monotonic: a clock that steps backwards cannot make a booking younger
 * than one booked before it, which keeps expiry an in-order scan of the oldest bookings.
 */
export class BookingLedger {
  readonly #blockSize: number;
  readonly #ttlMs: number;
  readonly #bookings = new Map<string, BookingRecord>();
  readonly #workers = new Map<bigint, WorkerEntry>();
  readonly #tombstones: RecentIds;
  readonly #earlyPrefill: RecentIds;
  readonly #counters = newCounters();
  #clock = Number.NEGATIVE_INFINITY;
  /**
   * Ledger-wide sequence hash → number of ranks holding it (a rank counts once however many of its
   * bookings hold the block). With `#roots`, lets `prepareChain` find every rank's active prefix of
   * a chain without probing every rank's own table at every bisection step.
   */
  readonly #holders = new HolderTable();
  /** Holder-mask bits not in use, and how many live ranks have none. */
  readonly #freeBits: number[] = Array.from({ length: HOLDER_MASK_RANKS }, (_, i) => HOLDER_MASK_RANKS - 1 - i);
  #unnamed = 0;
  /**
   * `prepareChain` results by mask bit when every live rank has one (then no rank state is touched
   * to prepare a chain): the query id each bit's prefix is for, and the prefix.
   */
  readonly #bitQuery = new Float64Array(HOLDER_MASK_RANKS).fill(-1);
  readonly #bitPrefix = new Int32Array(HOLDER_MASK_RANKS);
  #preparedByBit = false;
  /** Scratch beside `#drops`: the holders-table slot of the block just before each drop. */
  #dropSlots: number[] = [];
  /** First sequence hash of booked chains → the ranks holding a chain from it, with how many bookings each. */
  readonly #roots = new Map<bigint, Map<RankState, number>>();
  /** The chain `prepareChain` last ran on (null once any change invalidated it) and its query id. */
  #prepared: BigUint64Array | null = null;
  #queryId = 0;
  /** Scratch for the prefix lengths at which the number of ranks holding the prepared chain drops. */
  #drops: number[] = [];
  /**
   * Bumped whenever a worker entry or rank state is created or dropped, or a capacity replaced: what
   * a `RankRef` resolved may then be stale. Bookings on known ranks leave it alone.
   */
  #structure = 0;

  constructor(options: BookingLedgerOptions) {
    if (!isPosInt(options.blockSize)) throw new RangeError('blockSize must be a positive integer');
    const ttlMs = options.ttlMs ?? DEFAULT_BOOKING_TTL_MS;
    if (!(ttlMs > 0)) throw new RangeError('ttlMs must be positive');
    const tombstoneTtlMs = options.tombstoneTtlMs ?? ttlMs;
    if (!(tombstoneTtlMs > 0)) throw new RangeError('tombstoneTtlMs must be positive');
    const capacity = options.tombstoneCapacity ?? DEFAULT_TOMBSTONE_CAPACITY;
    if (!isPosInt(capacity)) throw new RangeError('tombstoneCapacity must be a positive integer');
    this.#blockSize = options.blockSize;
    this.#ttlMs = ttlMs;
    this.#tombstones = new RecentIds(tombstoneTtlMs, capacity);
    this.#earlyPrefill = new RecentIds(tombstoneTtlMs, capacity);
  }

  /** Number of live bookings. */
  get size(): number {
    return this.#bookings.size;
  }

  /** A snapshot of the counters (a copy: safe to keep). */
  counters(): BookingCounters {
    const c = this.#counters;
    return { ...c, released: { ...c.released } };
  }

  // -------------------------------------------------------------------------
  // Worker capacity registry
  // -------------------------------------------------------------------------

  /** Register or replace a worker's advertised capacity. */
  setWorker(workerId: WorkerId, capacity: WorkerCapacity, nowMs: number): SetWorkerOutcome {
    this.#tick(nowMs);
    const why = isU64(workerId) ? validateWorkerCapacity(capacity) : 'workerId must be a u64';
    if (why !== undefined) {
      this.#counters.invalidWorker++;
      return { kind: 'invalid', reason: why };
    }
    const entry = this.#entry(workerId);
    this.#structure++;
    const added = entry.capacity === null;
    entry.capacity = Object.freeze({ ...capacity });
    if (added) this.#counters.workersAdded++;
    return { kind: added ? 'added' : 'updated' };
  }

  /**
   * Forget a worker and drop its bookings (it left the pool: its requests will
   * never report completion here). Returns the number of bookings dropped.
   */
  removeWorker(workerId: WorkerId, nowMs: number): number {
    const now = this.#tick(nowMs);
    const entry = this.#workers.get(workerId);
    if (entry === undefined) return 0;
    let dropped = 0;
    for (const rank of entry.ranks.values()) {
      for (const b of [...rank.bookings]) {
        this.#remove(b, now);
        dropped++;
      }
    }
    for (const rank of entry.ranks.values()) this.#dropRank(rank);
    this.#workers.delete(workerId);
    this.#structure++;
    this.#counters.droppedByWorkerRemoval += dropped;
    if (entry.capacity !== null) this.#counters.workersRemoved++;
    return dropped;
  }

  // -------------------------------------------------------------------------
  // Booking lifecycle
  // -------------------------------------------------------------------------

  book(input: BookInput): BookOutcome {
    const now = this.#tick(input.nowMs);
    const invalid = validateBook(input);
    if (invalid !== undefined) {
      this.#counters.invalidBook++;
      return { kind: 'invalid', reason: invalid };
    }
    const existing = this.#bookings.get(input.requestId);
    if (existing !== undefined) {
      const conflicting = existing.workerId !== input.workerId || existing.dpRank !== input.dpRank;
      this.#counters.duplicateBook++;
      if (conflicting) this.#counters.conflictingDuplicateBook++;
      return { kind: 'duplicate', booking: view(existing), conflicting };
    }
    if (this.#tombstones.has(input.requestId, now)) {
      // The release (or the worker's removal) overtook this booking; applying
      // it now would leave a phantom until the TTL.
      this.#counters.lateBookIgnored++;
      return { kind: 'already_released' };
    }

    // Competing traffic can name a worker before its registration arrives; its
    // load is real, so it is tracked with unknown capacity.
    const entry = this.#entry(input.workerId);
    const cap = entry.capacity;
    if (cap !== null && (input.dpRank < cap.dpStartRank || input.dpRank >= cap.dpStartRank + cap.dpSize)) {
      this.#counters.rankOutOfRange++;
    }
    let rank = entry.ranks.get(input.dpRank);
    if (rank === undefined) {
      rank = new RankState();
      const bit = this.#freeBits.pop();
      if (bit === undefined) this.#unnamed++;
      else rank.bit = bit;
      entry.ranks.set(input.dpRank, rank);
      this.#structure++;
    }

    const blockSize = cap?.blockSize ?? this.#blockSize;
    const prefillTokens = input.prefillTokens ?? Math.max(0, input.promptTokens - input.overlapBlocks * blockSize);
    // A first token (or Dynamo's MarkPrefillCompleted) that beat the booking here.
    const prefillComplete = this.#earlyPrefill.has(input.requestId, now);
    if (prefillComplete) this.#earlyPrefill.delete(input.requestId);

    const record: BookingRecord = {
      requestId: input.requestId,
      workerId: input.workerId,
      dpRank: input.dpRank,
      promptTokens: input.promptTokens,
      overlapBlocks: input.overlapBlocks,
      prefillTokens,
      prefillComplete,
      expectedOutputTokens: input.expectedOutputTokens ?? null,
      sequenceHashes: input.sequenceHashes.slice(),
      source: input.source,
      bookedAtMs: now,
      prefillCompletedAtMs: prefillComplete ? now : null,
      rank,
    };
    this.#bookings.set(record.requestId, record);
    rank.bookings.add(record);
    rank.requests++;
    if (!prefillComplete) {
      rank.prefillRequests++;
      rank.trackedPrefillTokens += prefillTokens;
    }
    if (record.expectedOutputTokens !== null) rank.expectedOutputTokens += record.expectedOutputTokens;
    const refs: BlockRefs = rank;
    const holders = this.#holders;
    const hv = halves(record.sequenceHashes);
    // One resize for the whole booking rather than one per doubling as its blocks go in.
    refs.reserve(record.sequenceHashes.length);
    holders.reserve(record.sequenceHashes.length);
    for (let i = 0; i < hv.length; i += 2) if (refs.add(hv[i]!, hv[i + 1]!)) holders.add(hv[i]!, hv[i + 1]!, rank.bit);
    if (record.sequenceHashes.length > 0) {
      const root = record.sequenceHashes[0]!;
      let ranks = this.#roots.get(root);
      if (ranks === undefined) this.#roots.set(root, (ranks = new Map()));
      ranks.set(rank, (ranks.get(rank) ?? 0) + 1);
    }
    rank.lastChangeMs = now;
    this.#counters.booked++;
    return { kind: 'booked', booking: view(record) };
  }

  /** The first token arrived: the booking's prefill tokens stop counting towards P. */
  markPrefillComplete(requestId: string, nowMs: number): PrefillOutcome {
    const now = this.#tick(nowMs);
    const b = this.#bookings.get(requestId);
    if (b === undefined) {
      if (this.#tombstones.has(requestId, now)) {
        this.#counters.prefillAfterRelease++;
        return 'released';
      }
      this.#counters.prefillBeforeBook++;
      this.#counters.tombstonesEvicted += this.#earlyPrefill.add(requestId, now);
      return 'early';
    }
    if (b.prefillComplete) {
      this.#counters.prefillAlreadyComplete++;
      return 'already_complete';
    }
    b.prefillComplete = true;
    b.prefillCompletedAtMs = now;
    const rank = b.rank;
    rank.prefillRequests = this.#dec(rank.prefillRequests, 1);
    rank.trackedPrefillTokens = this.#dec(rank.trackedPrefillTokens, b.prefillTokens);
    rank.lastChangeMs = now;
    this.#counters.prefillMarked++;
    return 'marked';
  }

  release(requestId: string, reason: ReleaseReason, nowMs: number): ReleaseOutcome {
    const now = this.#tick(nowMs);
    const b = this.#bookings.get(requestId);
    if (b === undefined) {
      this.#earlyPrefill.delete(requestId);
      if (this.#tombstones.has(requestId, now)) {
        this.#counters.releaseAlreadyReleased++;
        return 'already_released';
      }
      this.#counters.releaseUnknown++;
      this.#counters.tombstonesEvicted += this.#tombstones.add(requestId, now);
      return 'unknown';
    }
    this.#remove(b, now);
    this.#counters.released[RELEASE_REASONS.includes(reason) ? reason : 'failed']++;
    return 'released';
  }

  /**
   * Drop bookings older than the TTL (their end was never seen: a leak) and
   * forget expired tombstones. Returns the number of bookings expired.
   * Cost is O(expired bookings + their blocks): bookings are kept in booking order.
   */
  expire(nowMs: number): number {
    const now = this.#tick(nowMs);
    let expired = 0;
    for (const b of this.#bookings.values()) {
      if (now - b.bookedAtMs <= this.#ttlMs) break;
      this.#remove(b, now);
      expired++;
    }
    this.#counters.expiredLeaks += expired;
    this.#counters.released.expired += expired;
    this.#tombstones.prune(now);
    this.#earlyPrefill.prune(now);
    return expired;
  }

  // -------------------------------------------------------------------------
  // Queries: O(1) per worker
  // -------------------------------------------------------------------------

  get(requestId: string): BookingView | undefined {
    const b = this.#bookings.get(requestId);
    return b === undefined ? undefined : view(b);
  }

  /** Booked work on one (worker, dp rank). Unknown workers read as empty and unregistered. */
  load(workerId: WorkerId, dpRank: number): WorkerLoad {
    const entry = this.#workers.get(workerId);
    return loadOf(workerId, dpRank, entry?.capacity ?? null, entry?.ranks.get(dpRank));
  }

  /**
   * Live rank states without a holder-mask bit (only the first 64 ranks alive at once get one):
   * while any exists, `prepareChain` probes each candidate rank's own table instead of reading the
   * masks. A diagnostic, for tests and metrics.
   */
  get ranksWithoutMaskBit(): number {
    return this.#unnamed;
  }

  /** A resolved handle on (worker, dp rank) for `loadOfRef` and `newBlocksOfRef` (see `RankRef`). */
  rankRef(workerId: WorkerId, dpRank: number): RankRef {
    return new Ref(this, workerId, dpRank);
  }

  #resolved(ref: RankRef): Ref {
    if (!(ref instanceof Ref) || ref.ledger !== this) throw new TypeError('not a RankRef of this ledger');
    if (ref.version !== this.#structure) {
      const entry = this.#workers.get(ref.workerId);
      const cap = entry?.capacity ?? null;
      ref.rank = entry?.ranks.get(ref.dpRank);
      ref.registered = cap !== null;
      ref.schedulable = cap?.schedulable ?? null;
      ref.budget = cap?.maxNumBatchedTokens ?? null;
      ref.totalKvBlocks = cap?.totalKvBlocks ?? null;
      ref.version = this.#structure;
    }
    return ref;
  }

  /**
   * `load` for a rank given by its `RankRef`, written into a record the caller owns instead of a new
   * object (the observe hot path keeps one per rank and hands the result on synchronously): the same
   * values, without looking the rank up. Returns `out`.
   */
  loadOfRef(ref: RankRef, out: WorkerLoadRecord): WorkerLoad {
    const r = this.#resolved(ref);
    const rank = r.rank;
    const tracked = rank?.trackedPrefillTokens ?? 0;
    const budget = r.budget;
    out.workerId = r.workerId;
    out.dpRank = r.dpRank;
    out.registered = r.registered;
    out.schedulable = r.schedulable;
    out.requests = rank?.requests ?? 0;
    out.prefillRequests = rank?.prefillRequests ?? 0;
    out.trackedPrefillTokens = tracked;
    out.prefillPressure = budget !== null && budget > 0 ? tracked / budget : null;
    out.activeBlocks = rank?.size ?? 0;
    out.totalKvBlocks = r.totalKvBlocks;
    out.expectedOutputTokens = rank?.expectedOutputTokens ?? 0;
    out.lastChangeMs = rank?.lastChangeMs ?? null;
    return out;
  }

  /**
   * `newBlocks` for a request given as a sequence-hash chain (seq[i] covers the whole prefix up to
   * block i), on a rank given by its `RankRef`. A chain not prepared (`prepareChain`) since the
   * ledger last changed is prepared first, so asking rank after rank costs one preparation.
   */
  newBlocksOfRef(ref: RankRef, chain: BigUint64Array): number {
    const rank = this.#resolved(ref).rank;
    if (chain !== this.#prepared) this.prepareChain(chain);
    return this.#preparedNew(rank, chain.length);
  }

  /** Every (worker, dp rank) the ledger knows: each registered rank and each rank holding bookings. */
  loads(): WorkerLoad[] {
    const out: WorkerLoad[] = [];
    for (const [id, entry] of this.#workers) {
      const workerId = id as WorkerId;
      const cap = entry.capacity;
      if (cap !== null) {
        for (let r = cap.dpStartRank; r < cap.dpStartRank + cap.dpSize; r++) {
          out.push(loadOf(workerId, r, cap, entry.ranks.get(r)));
        }
      }
      for (const [r, rank] of entry.ranks) {
        if (cap === null || r < cap.dpStartRank || r >= cap.dpStartRank + cap.dpSize) out.push(loadOf(workerId, r, cap, rank));
      }
    }
    return out;
  }

  /**
   * How many of a request's sequence hashes are not yet active on (worker,
   * rank): the term Dynamo adds to a candidate's active blocks when costing it
   * (`decode_blocks = active_blocks + new blocks`). O(blocks of the request).
   */
  newBlocks(workerId: WorkerId, dpRank: number, sequenceHashes: BigUint64Array): number {
    const refs: BlockRefs | undefined = this.#workers.get(workerId)?.ranks.get(dpRank);
    if (refs === undefined || refs.size === 0) return sequenceHashes.length;
    const hv = halves(sequenceHashes);
    let fresh = 0;
    for (let i = 0; i < hv.length; i += 2) if (!refs.has(hv[i]!, hv[i + 1]!)) fresh++;
    return fresh;
  }

  /**
   * Work out `newBlocksOfRef` for every rank at once, before asking it rank by rank (observe asks
   * for every rank of the pool). The answers for `chain` stay valid until the ledger next changes or
   * `prepareChain` runs again; the caller must not modify `chain` in between.
   *
   * Bookings hold whole chains from block 0, so the ranks holding seq[i] can only shrink as i grows,
   * and the number holding it (`#holders`) falls exactly where some rank's active prefix ends. Those
   * prefix lengths are found by bisection on the ledger-wide count (a stretch whose two ends have
   * the same count has no drop inside); the candidate ranks are those holding a chain from the same
   * first block (`#roots`), and each one's prefix is one of those lengths, found by bisection over
   * them in its own table. With a few distinct prefix lengths that is a few dozen lookups in all,
   * instead of a bisection over the whole chain in every rank's table.
   */
  prepareChain(chain: BigUint64Array): void {
    const id = ++this.#queryId;
    this.#prepared = chain;
    this.#preparedByBit = false;
    const n = chain.length;
    if (n === 0 || this.#holders.size === 0) return;
    const hv = halves(chain);
    const holders = this.#holders;
    const first = holders.find(hv[0]!, hv[1]!);
    const c0 = holders.countAt(first);
    if (c0 === 0) return;
    const drops = this.#drops;
    const slots = this.#dropSlots;
    drops.length = 0;
    slots.length = 0;
    // Prefix lengths p (1..n) at which the count falls: holders(seq[p-1]) > holders(seq[p]), holders(seq[n]) = 0.
    countDrops(holders, hv, drops, slots, 0, first, c0, n, 0);
    if (this.#unnamed === 0) {
      // Every rank has a mask bit: the ranks holding seq[p-1] are named in its slot, read by the
      // bisection already. Walking the drops in increasing order leaves each rank its longest.
      const q = this.#bitQuery;
      const pre = this.#bitPrefix;
      for (let k = 0; k < drops.length; k++) {
        const p = drops[k]!;
        const b = slots[k]!;
        for (let w = 0; w < 2; w++) {
          let m = w === 0 ? holders.mask0At(b) : holders.mask1At(b);
          while (m !== 0) {
            const low = m & -m;
            const bit = 31 - Math.clz32(low) + 32 * w;
            q[bit] = id;
            pre[bit] = p;
            m ^= low;
          }
        }
      }
      this.#preparedByBit = true;
      return;
    }
    const cands = this.#roots.get(chain[0]!);
    if (cands === undefined) return;
    for (const rank of cands.keys()) {
      // Largest drop length p whose last block seq[p-1] the rank holds (its prefix ends at a drop).
      // Every candidate holds seq[0] and so the whole stretch up to the first drop: that one needs no lookup.
      const refs: BlockRefs = rank;
      let lo = 1;
      let hi = drops.length - 1;
      let best = drops[0]!;
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1;
        const p = drops[mid]!;
        if (refs.has(hv[2 * p - 2]!, hv[2 * p - 1]!)) {
          best = p;
          lo = mid + 1;
        } else hi = mid - 1;
      }
      rank.queryId = id;
      rank.queryPrefix = best;
    }
  }

  // -------------------------------------------------------------------------

  /** The worker's entry, made with unknown capacity when it has none. */
  #entry(workerId: WorkerId): WorkerEntry {
    let entry = this.#workers.get(workerId);
    if (entry === undefined) {
      entry = { capacity: null, ranks: new Map() };
      this.#workers.set(workerId, entry);
      this.#structure++;
    }
    return entry;
  }

  /** A rank state leaves the ledger (it holds no blocks by then): its mask bit is free again. */
  #dropRank(rank: RankState): void {
    if (rank.bit >= 0) {
      this.#freeBits.push(rank.bit);
      rank.bit = -1;
    } else this.#unnamed--;
  }

  /** New blocks of the prepared chain (`n` long) on `rank`. */
  #preparedNew(rank: RankState | undefined, n: number): number {
    if (rank === undefined) return n;
    if (this.#preparedByBit) return rank.bit >= 0 && this.#bitQuery[rank.bit] === this.#queryId ? n - this.#bitPrefix[rank.bit]! : n;
    return rank.queryId === this.#queryId ? n - rank.queryPrefix : n;
  }

  #tick(nowMs: number): number {
    this.#prepared = null;
    if (Number.isFinite(nowMs) && nowMs > this.#clock) this.#clock = nowMs;
    // Before the first finite time, a non-finite stamp would poison every comparison.
    return Number.isFinite(this.#clock) ? this.#clock : 0;
  }

  /** Subtract, never going below zero; a would-be negative total is a counted bug, not silent drift. */
  #dec(value: number, by: number): number {
    const next = value - by;
    if (next < 0) {
      this.#counters.invariantViolations++;
      return 0;
    }
    return next;
  }

  #remove(b: BookingRecord, now: number): void {
    const rank = b.rank;
    this.#bookings.delete(b.requestId);
    rank.bookings.delete(b);
    rank.requests = this.#dec(rank.requests, 1);
    if (!b.prefillComplete) {
      rank.prefillRequests = this.#dec(rank.prefillRequests, 1);
      rank.trackedPrefillTokens = this.#dec(rank.trackedPrefillTokens, b.prefillTokens);
    }
    if (b.expectedOutputTokens !== null) {
      rank.expectedOutputTokens = this.#dec(rank.expectedOutputTokens, b.expectedOutputTokens);
    }
    const refs: BlockRefs = rank;
    const holders = this.#holders;
    const hv = halves(b.sequenceHashes);
    for (let i = 0; i < hv.length; i += 2) {
      const left = refs.drop(hv[i]!, hv[i + 1]!);
      if (left < 0) this.#counters.invariantViolations++;
      else if (left === 0 && holders.drop(hv[i]!, hv[i + 1]!, rank.bit) < 0) this.#counters.invariantViolations++;
    }
    refs.settle();
    holders.settle();
    if (b.sequenceHashes.length > 0) {
      const root = b.sequenceHashes[0]!;
      const ranks = this.#roots.get(root);
      const c = ranks?.get(rank) ?? 0;
      if (c > 1) ranks!.set(rank, c - 1);
      else if (c === 1) {
        ranks!.delete(rank);
        if (ranks!.size === 0) this.#roots.delete(root);
      } else this.#counters.invariantViolations++;
    }
    const entry = this.#workers.get(b.workerId);
    rank.lastChangeMs = now;
    this.#counters.tombstonesEvicted += this.#tombstones.add(b.requestId, now);
    if (entry !== undefined && rank.requests === 0) {
      // Keep state only for what is registered: ids learned from competing
      // traffic alone must not accumulate once their work is gone.
      const cap = entry.capacity;
      const registeredRank = cap !== null && b.dpRank >= cap.dpStartRank && b.dpRank < cap.dpStartRank + cap.dpSize;
      if (!registeredRank && entry.ranks.delete(b.dpRank)) {
        this.#dropRank(rank);
        this.#structure++;
      }
      if (cap === null && entry.ranks.size === 0 && this.#workers.delete(b.workerId)) this.#structure++;
    }
  }
}

/**
 * Appends to `drops`, in increasing order, every p in (a, b] with holders(seq[p-1]) > holders(seq[p])
 * (holders(seq[n]) read as 0), given ca = holders(seq[a]) and cb = holders(seq[b]), and to `slots`
 * the holders-table slot of seq[p-1] (`sa` is seq[a]'s). The count never rises along a chain, so a
 * stretch whose ends have the same count has no drop inside and is skipped.
 * (A module function rather than a closure: the hot path then creates no function per query.)
 */
function countDrops(holders: HolderTable, hv: Int32Array, drops: number[], slots: number[], a: number, sa: number, ca: number, b: number, cb: number): void {
  if (ca === cb) return;
  if (b === a + 1) {
    drops.push(b);
    slots.push(sa);
    return;
  }
  const mid = (a + b) >>> 1;
  const sm = holders.find(hv[2 * mid]!, hv[2 * mid + 1]!);
  const cm = holders.countAt(sm);
  countDrops(holders, hv, drops, slots, a, sa, ca, mid, cm);
  countDrops(holders, hv, drops, slots, mid, sm, cm, b, cb);
}

function validateBook(input: BookInput): string | undefined {
  if (typeof input.requestId !== 'string' || input.requestId.length === 0 || input.requestId.length > MAX_REQUEST_ID_LENGTH) {
    return `requestId must be a non-empty string of at most ${MAX_REQUEST_ID_LENGTH} characters`;
  }
  if (!isU64(input.workerId)) return 'workerId must be a u64 bigint';
  if (!isNonNegInt(input.dpRank) || input.dpRank > U32_MAX) return 'dpRank must be a u32';
  if (!isNonNegInt(input.promptTokens)) return 'promptTokens must be a non-negative integer';
  if (!isNonNegInt(input.overlapBlocks)) return 'overlapBlocks must be a non-negative integer';
  if (!(input.sequenceHashes instanceof BigUint64Array)) return 'sequenceHashes must be a BigUint64Array';
  if (input.expectedOutputTokens != null && !isNonNegInt(input.expectedOutputTokens)) {
    return 'expectedOutputTokens must be a non-negative integer or null';
  }
  if (input.prefillTokens !== undefined && !isNonNegInt(input.prefillTokens)) return 'prefillTokens must be a non-negative integer';
  return undefined;
}

function view(b: BookingRecord): BookingView {
  return {
    requestId: b.requestId,
    workerId: b.workerId,
    dpRank: b.dpRank,
    promptTokens: b.promptTokens,
    overlapBlocks: b.overlapBlocks,
    prefillTokens: b.prefillTokens,
    prefillComplete: b.prefillComplete,
    expectedOutputTokens: b.expectedOutputTokens,
    blocks: b.sequenceHashes.length,
    source: b.source,
    bookedAtMs: b.bookedAtMs,
    prefillCompletedAtMs: b.prefillCompletedAtMs,
  };
}

function loadOf(workerId: WorkerId, dpRank: number, cap: WorkerCapacity | null, rank: RankState | undefined): WorkerLoad {
  const tracked = rank?.trackedPrefillTokens ?? 0;
  const budget = cap?.maxNumBatchedTokens ?? null;
  return {
    workerId,
    dpRank,
    registered: cap !== null,
    schedulable: cap?.schedulable ?? null,
    requests: rank?.requests ?? 0,
    prefillRequests: rank?.prefillRequests ?? 0,
    trackedPrefillTokens: tracked,
    // An advertised budget of 0 is as unknown as a missing one: never divide by it.
    prefillPressure: budget !== null && budget > 0 ? tracked / budget : null,
    activeBlocks: rank?.size ?? 0,
    totalKvBlocks: cap?.totalKvBlocks ?? null,
    expectedOutputTokens: rank?.expectedOutputTokens ?? 0,
    lastChangeMs: rank?.lastChangeMs ?? null,
  };
}
