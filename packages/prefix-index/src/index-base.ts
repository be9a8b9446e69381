/**
 * What every layout of the prefix index shares: publishers (one per worker and dp rank) with their
 * block-id tables, event ids and suspect state, the counters, and the match answer records. A
 * layout (`PrefixIndex`: a record per block; `RunIndex`: runs of blocks) supplies the tree: how
 * stored and removed blocks change it, how a publisher is cleared, and the match walk.
 */
import type { KvEvent, KvStoredData, StorageTier, WorkerId } from '@vantage/types';
import { ExtMap, slotsFor, startSlots } from './ext-map';
import type { ApplyResult, IndexCounters, MatchResult, PublisherStats, SuspectInfo, SuspectReason, WorkerMatch } from './types';

export const NTIERS = 4;
export const EMPTY_U64 = new BigUint64Array(0);
/** Largest `expectBlocks` hint honoured (blocks per publisher). */
const EXPECT_BLOCKS_MAX = 1 << 22;

export const TIER_INDEX: Readonly<Record<StorageTier, number>> = {
  device: 0,
  host_pinned: 1,
  disk: 2,
  external: 3,
};

export type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Mutable per-(worker, dp rank) state. */
export interface Publisher {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly slot: number;
  map: ExtMap;
  lastEventId: bigint | null;
  /** True until the first event: an id above 1 then means history was missed. */
  expectStart: boolean;
  suspect: SuspectInfo | null;
  lastEventMs: number | null;
  /** Entries holding each tier. */
  readonly tierBlocks: Uint32Array;
  /** This publisher's record in `matchTransient` answers (made on first use). */
  matchRecord: Mutable<WorkerMatch> | null;
}

/** A BigUint64Array read as int32 halves (lo at 2i, hi at 2i+1) without copying: same buffer. */
export function i32View(a: BigUint64Array): Int32Array {
  return new Int32Array(a.buffer, a.byteOffset, a.length * 2);
}

export function emptyCounters(): IndexCounters {
  return {
    eventsApplied: 0,
    duplicates: 0,
    gaps: 0,
    missedEvents: 0n,
    unknownParents: 0,
    unknownRemovals: 0,
    blocksStored: 0,
    blocksRemoved: 0,
    clears: 0,
    missedStarts: 0,
  };
}

/** A publisher's match record: d, h, k, a leading blocks on the cumulative tier sets, block size bs. */
function matchRecord(p: Publisher, d: number, h: number, k: number, a: number, bs: number): Mutable<WorkerMatch> {
  return {
    workerId: p.workerId,
    dpRank: p.dpRank,
    deviceBlocks: d,
    hostBlocks: h,
    diskBlocks: k,
    anyBlocks: a,
    deviceTokens: d * bs,
    hostTokens: h * bs,
    diskTokens: k * bs,
    anyTokens: a * bs,
    treeSize: p.map.size,
    suspect: p.suspect,
    lastEventId: p.lastEventId,
    lastEventMs: p.lastEventMs,
  };
}

export abstract class IndexBase {
  readonly blockSize: number;

  protected readonly byWorker = new Map<bigint, Map<number, Publisher>>();
  /** Blocks each publisher of a worker is expected to hold (`expectBlocks`), for sizing its block-id table. */
  protected readonly expected = new Map<bigint, number>();
  protected publishers: Publisher[] = [];
  protected slotHigh = 0;
  protected freeSlots: number[] = [];
  protected readonly counters: IndexCounters = emptyCounters();
  /**
   * Match counts written by the layout's walk: leading blocks of publisher slot s on cumulative tier
   * set t at `counts[t * stride + s]` (the stride is what `walk` returns).
   */
  protected counts: Int32Array = new Int32Array(NTIERS * 32);
  /** The `matchTransient` answer, overwritten by each one. */
  private readonly transient: { blockSize: number; requestBlocks: number; workers: WorkerMatch[] };

  constructor(blockSize: number) {
    if (!Number.isInteger(blockSize) || blockSize <= 0 || blockSize > 1 << 20) {
      throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
    }
    this.blockSize = blockSize;
    this.transient = { blockSize, requestBlocks: 0, workers: [] };
  }

  /** Store a stored event's blocks; true when its parent was unknown. */
  protected abstract applyStored(pub: Publisher, tier: number, data: KvStoredData): boolean;
  /** Remove blocks on one tier; returns the ids the publisher did not hold there. */
  protected abstract applyRemoved(pub: Publisher, tier: number, hashes: BigUint64Array): BigUint64Array;
  /** Drop every block of a publisher (its `cleared` event, resync, removal); returns how many. */
  protected abstract clearPublisher(pub: Publisher): number;
  /** Make room for publisher slot `slot` (a new highest slot). */
  protected abstract ensureSlot(slot: number): void;
  /** Fill `counts` for the request's local hashes (as int32 halves); returns the stride. */
  protected abstract walk(loc: Int32Array, n: number): number;

  // -------------------------------------------------------------------------
  // Events
  // -------------------------------------------------------------------------

  /**
   * Apply one decoded KV event. Duplicate or older event ids are ignored; a jump in ids, an
   * unknown parent or a first id above 1 marks the publisher suspect (see README).
   * Throws RangeError only on a structurally invalid event (a decoder bug), before changing state.
   */
  apply(event: KvEvent, nowMs: number): ApplyResult {
    const data = event.data;
    const tier = TIER_INDEX[event.storageTier];
    if (tier === undefined) throw new RangeError(`unknown storage tier ${String(event.storageTier)}`);
    if (!Number.isInteger(event.dpRank) || event.dpRank < 0 || event.dpRank > 0xffff_ffff) {
      throw new RangeError(`dp rank must be a u32, got ${event.dpRank}`);
    }
    if (data.kind === 'stored' && data.blockHashes.length !== data.tokensHashes.length) {
      throw new RangeError(
        `stored event has ${data.blockHashes.length} block hashes but ${data.tokensHashes.length} tokens hashes`,
      );
    }
    const pub = this.publisher(event.workerId, event.dpRank, true)!;
    const id = event.eventId;
    const c = this.counters;
    let missed = 0n;
    if (pub.lastEventId !== null) {
      if (id <= pub.lastEventId) {
        c.duplicates++;
        return {
          status: 'duplicate',
          blockOps: 0,
          missedEvents: 0n,
          unknownParent: false,
          unknownRemovals: EMPTY_U64,
          suspect: pub.suspect,
        };
      }
      if (id !== pub.lastEventId + 1n) {
        missed = id - pub.lastEventId - 1n;
        c.gaps++;
        c.missedEvents += missed;
        this.markSuspect(pub, 'event_gap', nowMs);
      }
    } else if (pub.expectStart && id > 1n) {
      c.missedStarts++;
      this.markSuspect(pub, 'missed_start', nowMs);
    }
    pub.lastEventId = id;
    pub.expectStart = false;
    pub.lastEventMs = nowMs;
    c.eventsApplied++;

    let blockOps = 0;
    let unknownParent = false;
    let unknownRemovals: BigUint64Array = EMPTY_U64;
    switch (data.kind) {
      case 'stored':
        unknownParent = this.applyStored(pub, tier, data);
        if (unknownParent) {
          c.unknownParents++;
          this.markSuspect(pub, 'unknown_parent', nowMs);
        }
        blockOps = data.blockHashes.length;
        c.blocksStored += blockOps;
        break;
      case 'removed':
        unknownRemovals = this.applyRemoved(pub, tier, data.blockHashes);
        blockOps = data.blockHashes.length;
        c.blocksRemoved += blockOps - unknownRemovals.length;
        c.unknownRemovals += unknownRemovals.length;
        break;
      case 'cleared':
        // Dynamo's newer semantics: only the emitting dp rank. The publisher's state is now known
        // exactly (empty), which repairs any earlier loss.
        this.clearPublisher(pub);
        pub.suspect = null;
        c.clears++;
        break;
    }
    return { status: 'applied', blockOps, missedEvents: missed, unknownParent, unknownRemovals, suspect: pub.suspect };
  }

  protected markSuspect(pub: Publisher, reason: SuspectReason, nowMs: number): void {
    // Suspect info objects are immutable so a match result can hand out the same reference.
    pub.suspect =
      pub.suspect === null
        ? { reason, sinceMs: nowMs, incidents: 1 }
        : { reason: pub.suspect.reason, sinceMs: pub.suspect.sinceMs, incidents: pub.suspect.incidents + 1 };
  }

  /**
   * Elements to reserve address space for once a growable table (growable.ts) needs `cap`: room to
   * grow in place to the blocks the registered workers advertise (`expectBlocks`, summed) plus
   * `extra`, and at least 16 times `cap`, within `max`.
   */
  protected reservation(cap: number, extra: number, max: number): number {
    let expected = extra;
    for (const e of this.expected.values()) expected += e;
    let res = cap * 16;
    while (res < expected) res *= 2;
    return Math.min(max, res);
  }

  // -------------------------------------------------------------------------
  // Publisher management
  // -------------------------------------------------------------------------

  protected publisher(workerId: WorkerId, dpRank: number, create: boolean): Publisher | undefined {
    let ranks = this.byWorker.get(workerId);
    const existing = ranks?.get(dpRank);
    if (existing !== undefined || !create) return existing;
    if (ranks === undefined) {
      ranks = new Map();
      this.byWorker.set(workerId, ranks);
    }
    const slot = this.freeSlots.length > 0 ? this.freeSlots.pop()! : this.slotHigh++;
    this.ensureSlot(slot);
    const pub: Publisher = {
      workerId,
      dpRank,
      slot,
      map: this.newTable(workerId),
      lastEventId: null,
      expectStart: true,
      suspect: null,
      lastEventMs: null,
      tierBlocks: new Uint32Array(NTIERS),
      matchRecord: null,
    };
    ranks.set(dpRank, pub);
    this.publishers.push(pub);
    return pub;
  }

  private dropPublisher(pub: Publisher): number {
    const dropped = this.clearPublisher(pub);
    const ranks = this.byWorker.get(pub.workerId)!;
    ranks.delete(pub.dpRank);
    if (ranks.size === 0) this.byWorker.delete(pub.workerId);
    this.publishers = this.publishers.filter((p) => p !== pub);
    this.freeSlots.push(pub.slot);
    return dropped;
  }

  /**
   * A worker's advertised cache size, `total_kv_blocks` per dp rank (from its registration): each of
   * its publishers' block-id tables is allocated for that many blocks from the start, instead of
   * doubling (and rehashing everything) from empty as it fills. A table uses half of its
   * allocation until it is about a third full, then doubles in place once (see ExtMap); tables
   * that exist get the allocation now. A hint, not a limit: a publisher holding more (lower tiers)
   * still grows. 0 forgets the hint. No answer depends on it. About 17 bytes per expected block and
   * publisher, touched as it fills; hints above EXPECT_BLOCKS_MAX (4,194,304 blocks, ~70 MB a
   * table) count as that, so a bogus registration cannot make the index reserve gigabytes.
   */
  expectBlocks(workerId: WorkerId, blocks: number): void {
    const n = Math.min(EXPECT_BLOCKS_MAX, Math.max(0, Math.floor(blocks)));
    if (!(n > 0)) {
      this.expected.delete(workerId);
      return;
    }
    this.expected.set(workerId, n);
    const ranks = this.byWorker.get(workerId);
    if (ranks !== undefined) for (const pub of ranks.values()) pub.map.reserveSlots(slotsFor(n));
  }

  /**
   * An empty block-id table for a publisher of the worker: reserved for its `expectBlocks` and
   * starting at half of that (it doubles in place as it fills), else the smallest table.
   */
  protected newTable(workerId: WorkerId): ExtMap {
    const e = this.expected.get(workerId);
    if (e === undefined) return new ExtMap();
    const res = slotsFor(e);
    return new ExtMap(startSlots(res), res);
  }

  /** Forget a worker on every dp rank (it left the pool), and its `expectBlocks`. Returns the blocks dropped. */
  removeWorker(workerId: WorkerId): number {
    this.expected.delete(workerId);
    const ranks = this.byWorker.get(workerId);
    if (ranks === undefined) return 0;
    let dropped = 0;
    for (const pub of [...ranks.values()]) dropped += this.dropPublisher(pub);
    return dropped;
  }

  /** Forget one (worker, dp rank). Returns the blocks dropped. */
  removeDpRank(workerId: WorkerId, dpRank: number): number {
    const pub = this.publisher(workerId, dpRank, false);
    return pub === undefined ? 0 : this.dropPublisher(pub);
  }

  /**
   * Repair a suspect publisher before its state is re-sent (a dump or a replay): drops its blocks,
   * clears the suspect flag and sets its event-id position. With `lastEventId` the stream must
   * continue at lastEventId + 1; without it the next event's id is accepted as the new baseline.
   */
  resync(workerId: WorkerId, dpRank: number, nowMs: number, lastEventId?: bigint): void {
    const pub = this.publisher(workerId, dpRank, true)!;
    this.clearPublisher(pub);
    pub.suspect = null;
    pub.lastEventId = lastEventId ?? null;
    pub.expectStart = false;
    pub.lastEventMs = nowMs;
  }

  /** Suspect state of one publisher (null when trusted or unknown). */
  suspectOf(workerId: WorkerId, dpRank: number): SuspectInfo | null {
    return this.publisher(workerId, dpRank, false)?.suspect ?? null;
  }

  // -------------------------------------------------------------------------
  // Match
  // -------------------------------------------------------------------------

  /**
   * For every known (worker, dp rank): leading blocks of the request (from block 0) held on the
   * device tier, on device-or-host, on device-or-host-or-disk, and on any tier.
   */
  match(localHashes: BigUint64Array): MatchResult {
    return this.matchInto(localHashes, false);
  }

  /**
   * `match` for a caller that reads the answer at once (the indexer's observe, one query at a time):
   * the result, its array and each publisher's record belong to the index and are overwritten by the
   * next `matchTransient`, so a query allocates no record per publisher. The same values as `match`.
   */
  matchTransient(localHashes: BigUint64Array): MatchResult {
    return this.matchInto(localHashes, true);
  }

  private matchInto(localHashes: BigUint64Array, reuse: boolean): MatchResult {
    const n = localHashes.length;
    const slots = this.walk(i32View(localHashes), n);
    const counts = this.counts;
    const bs = this.blockSize;
    const pubs = this.publishers;
    const workers: WorkerMatch[] = reuse ? this.transient.workers : new Array<WorkerMatch>(pubs.length);
    if (reuse) workers.length = pubs.length;
    for (let i = 0; i < pubs.length; i++) {
      const p = pubs[i]!;
      const s = p.slot;
      const d = counts[s]!;
      const h = counts[slots + s]!;
      const k = counts[2 * slots + s]!;
      const a = counts[3 * slots + s]!;
      const w = reuse ? p.matchRecord : null;
      if (w === null) {
        // A new record, written whole (`match`, or a publisher's first transient answer).
        const rec = matchRecord(p, d, h, k, a, bs);
        if (reuse) p.matchRecord = rec;
        workers[i] = rec;
        continue;
      }
      w.deviceBlocks = d;
      w.hostBlocks = h;
      w.diskBlocks = k;
      w.anyBlocks = a;
      w.deviceTokens = d * bs;
      w.hostTokens = h * bs;
      w.diskTokens = k * bs;
      w.anyTokens = a * bs;
      w.treeSize = p.map.size;
      w.suspect = p.suspect;
      w.lastEventId = p.lastEventId;
      w.lastEventMs = p.lastEventMs;
      workers[i] = w;
    }
    if (!reuse) return { blockSize: bs, requestBlocks: n, workers };
    const t = this.transient;
    t.requestBlocks = n;
    return t;
  }

  // -------------------------------------------------------------------------
  // Size and statistics
  // -------------------------------------------------------------------------

  /** Resident (publisher, block) pairs: the sum of every publisher's tree size. */
  get totalBlocks(): number {
    let t = 0;
    for (const p of this.publishers) t += p.map.size;
    return t;
  }

  protected publisherStats(): PublisherStats[] {
    return this.publishers.map((p) => ({
      workerId: p.workerId,
      dpRank: p.dpRank,
      blocks: p.map.size,
      blocksByTier: {
        device: p.tierBlocks[0]!,
        host_pinned: p.tierBlocks[1]!,
        disk: p.tierBlocks[2]!,
        external: p.tierBlocks[3]!,
      },
      suspect: p.suspect,
      lastEventId: p.lastEventId,
    }));
  }
}
