/**
 * The prefix index: Dynamo's radix tree over local block hashes, path-compressed into runs of
 * blocks (README, "Layout"), with a block-id table, event ids and suspect state per publisher (one
 * per worker and dp rank), tiers, loss detection, match and exact snapshots.
 */
import type { ExternalHash, KvEvent, KvStoredData, StorageTier, WorkerId } from '@vantage/types';
import { ExtMap, K_VAL, SLOT, slotsFor, touchHomes } from './ext-map';
import { grow, growableTable, growTable } from './growable';
import { mix2, u64From, u64Hi, u64Lo } from './hash32';
import { RepeatCheck } from './repeats';
import { DETACHED_REF, ROOT_REF, corrupt, readImage, SnapshotError, writeImage, type PublisherEntries, type PublisherHead, type TreeDump } from './snapshot-io';
import type { ApplyResult, IndexCounters, IndexStats, MatchResult, PublisherStats, RecoverResult, SuspectInfo, SuspectReason, WorkerMatch } from './types';

const NTIERS = 4;
const EMPTY_U64 = new BigUint64Array(0);
/** What `applyStored` did. */
const STORED_OK = 0;
const STORED_UNKNOWN_PARENT = 1;
const STORED_SELF_REFERENCING = 2;
/** Largest `expectBlocks` hint honoured (blocks per publisher). */
const EXPECT_BLOCKS_MAX = 1 << 22;

const TIER_INDEX: Readonly<Record<StorageTier, number>> = {
  device: 0,
  host_pinned: 1,
  disk: 2,
  external: 3,
};

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Mutable per-(worker, dp rank) state. */
interface Publisher extends PublisherHead {
  map: ExtMap;
  /** This publisher's record in `matchTransient` answers (made on first use). */
  matchRecord: Mutable<WorkerMatch> | null;
}

/** A BigUint64Array read as int32 halves (lo at 2i, hi at 2i+1) without copying: same buffer. */
function i32View(a: BigUint64Array): Int32Array {
  return new Int32Array(a.buffer, a.byteOffset, a.length * 2);
}

const POS_BITS = 28;
const POS_MASK = (1 << POS_BITS) - 1;
const ROOT = 0;
const NONE = -1; // no parent: cut from the tree (or never in it)
const FREED = -2;
/** Walk state before the first block: the root; or a chain that hangs from nothing. */
const AT_ROOT = -1;
const AT_DETACHED = -2;
const HS = 5; // holder entry: slot, c0, c1, c2, c3 (a node's entries are contiguous)
const H_SLOT = 0;
const H_C = 1;
const WIDE = 8;
const MIN_ALLOC = 16;
/** Positions handed out below which the index never compacts. */
const COMPACT_SLACK = 1 << 16;
/** Compact when positions handed out exceed this many times the positions in the tree (plus the slack). */
const COMPACT_RATIO = 4;

/**
 * The fields that make up the tree, replaced wholesale by a compaction (everything else, the
 * publishers, counters, hints and the slot-sized scratch, is kept). A test checks that every field
 * of a PrefixIndex is in this list or in KEPT_FIELDS.
 */
export const TREE_FIELDS = [
  'blo', 'bhi', 'bnode', 'bAlloc', 'bHigh',
  'aStart', 'aCap', 'aUsed', 'aRefs', 'aHigh', 'freeByClass',
  'nStart', 'nLen', 'nParent', 'nAlloc', 'nFirst', 'nNext', 'nPrev', 'nKids', 'nHold', 'nHCnt', 'nHCap', 'nMax', 'nMark',
  'kidMap', 'shadowed', 'nHigh', 'freeNodes', 'livePositions', 'hold', 'hTop', 'hFreeBy', 'multi', 'lowerEver', 'visit', 'mark', 'homes',
] as const;
/** Fields a compaction keeps. */
export const KEPT_FIELDS = [
  'blockSize', 'byWorker', 'expected', 'publishers', 'slotHigh', 'freeSlots', 'counters', 'counts', 'transient', 'rebuilding', 'repeats',
  'slotCap', 'lvl', 'seen', 'act', 'compactAt', 'compactions',
] as const;

/** Levels (cumulative tier sets) holding a block with tier bits b: level L iff a tier <= L is held. */
const LEVELS = Int32Array.from({ length: 16 }, (_, b) => {
  let m = 0;
  for (let l = 0; l < NTIERS; l++) if (b & ((2 << l) - 1)) m |= 1 << l;
  return m;
});
function levels(b: number): number {
  return LEVELS[b & 15]!;
}

/** Positions appended in preorder (a growable struct of arrays). */
class PositionList {
  parent: Int32Array = new Int32Array(1024);
  lo: Int32Array = new Int32Array(1024);
  hi: Int32Array = new Int32Array(1024);
  length = 0;

  push(parent: number, lo: number, hi: number): number {
    if (this.length === this.parent.length) {
      const n = this.length + 1;
      this.parent = grow(this.parent, n);
      this.lo = grow(this.lo, n);
      this.hi = grow(this.hi, n);
    }
    const i = this.length++;
    this.parent[i] = parent;
    this.lo[i] = lo;
    this.hi[i] = hi;
    return i;
  }
}

export class PrefixIndex {
  readonly blockSize: number;

  private readonly byWorker = new Map<bigint, Map<number, Publisher>>();
  /** Blocks each publisher of a worker is expected to hold (`expectBlocks`), for sizing its block-id table. */
  private readonly expected = new Map<bigint, number>();
  private publishers: Publisher[] = [];
  private slotHigh = 0;
  private freeSlots: number[] = [];
  private readonly counters: IndexCounters = {
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
  /**
   * Match counts written by the tree's walk: leading blocks of publisher slot s on cumulative tier
   * set t at `counts[t * stride + s]` (the stride is what `walk` returns).
   */
  private counts: Int32Array = new Int32Array(NTIERS * 32);
  /** The `matchTransient` answer, overwritten by each one. */
  private readonly transient: { blockSize: number; requestBlocks: number; workers: WorkerMatch[] };

  // Blocks by global position.
  private blo: Int32Array = growableTable(1024, 1024 * 16);
  private bhi: Int32Array = growableTable(1024, 1024 * 16);
  private bnode: Int32Array = growableTable(1024, 1024 * 16);
  /** Allocation of each position (fixed when the position is first handed out). */
  private bAlloc: Int32Array = growableTable(1024, 1024 * 16);
  private bHigh = 0;
  // Allocations.
  private aStart: Int32Array = new Int32Array(64);
  private aCap: Int32Array = new Int32Array(64);
  private aUsed: Int32Array = new Int32Array(64);
  private aRefs: Int32Array = new Int32Array(64);
  private aHigh = 0;
  private freeByClass: number[][] = [];
  // Nodes (0 is the root, an empty run).
  private nStart: Int32Array = new Int32Array(256);
  private nLen: Int32Array = new Int32Array(256);
  private nParent: Int32Array = new Int32Array(256);
  private nAlloc: Int32Array = new Int32Array(256);
  private nFirst: Int32Array = new Int32Array(256);
  private nNext: Int32Array = new Int32Array(256);
  private nPrev: Int32Array = new Int32Array(256);
  private nKids: Int32Array = new Int32Array(256);
  /** A node's holder entries: offset in `hold` (0: none), count and capacity (entries). */
  private nHold: Int32Array = new Int32Array(256);
  private nHCnt: Int32Array = new Int32Array(256);
  private nHCap: Int32Array = new Int32Array(256);
  private nMax: Int32Array = new Int32Array(256);
  private nMark: Int32Array = new Int32Array(256);
  private kidMap: (Map<number, number> | undefined)[] = [];
  /** Children ever left off a child map because a sibling has the same low half (rare). */
  private shadowed = 0;
  private nHigh = 1;
  private freeNodes: number[] = [];
  private livePositions = 0;
  // Holder entries (entry 0 unused: 0 ends a list).
  private hold: Int32Array = new Int32Array(HS * 256);
  private hTop = HS;
  /** Free holder blocks by capacity class (1, 2, 4, … entries). */
  private hFreeBy: number[][] = [];
  private slotCap = 32;
  /**
   * Per publisher slot: its positions named by more than one of its ids, position -> (ids << 4 |
   * tier bits), or null while there are none (the common case).
   */
  private multi: (Map<number, number> | null)[] = [];
  /** Set by the first block stored below the device tier: until then match walks one tier set. */
  private lowerEver = false;
  // Match scratch.
  private lvl: Int32Array = new Int32Array(32);
  private seen: Int32Array = new Int32Array(32);
  private act: Int32Array = new Int32Array(32);
  private visit = 0;
  private mark = 0;
  private homes: Int32Array = new Int32Array(256);
  /** The self-referencing check's scratch table. */
  private readonly repeats = new RepeatCheck();
  /** Positions handed out (`bHigh`) above which the next event boundary considers a compaction. */
  private compactAt = COMPACT_SLACK;
  /** Compactions so far (stats). */
  private compactions = 0;
  /** True while `replayTree` runs (the tree defers its own upkeep, compaction, until it ends). */
  private rebuilding = false;
  constructor(blockSize: number) {
    if (!Number.isInteger(blockSize) || blockSize <= 0 || blockSize > 1 << 20) {
      throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
    }
    this.blockSize = blockSize;
    this.transient = { blockSize, requestBlocks: 0, workers: [] };
    this.nParent[ROOT] = NONE;
  }

  // ---------------------------------------------------------------------------------------------
  // Events

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
          rejection: null,
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

    let blockOps = 0;
    let unknownParent = false;
    let unknownRemovals: BigUint64Array = EMPTY_U64;
    switch (data.kind) {
      case 'stored': {
        const r = this.applyStored(pub, tier, data, true);
        if (r === STORED_SELF_REFERENCING) {
          // Refused whole, as Dynamo drops it (it forwards an empty removal in its place: the id
          // is taken, the publisher is not marked); the index is unchanged.
          return { status: 'rejected', rejection: 'self_referencing', blockOps: 0, missedEvents: missed, unknownParent: false, unknownRemovals: EMPTY_U64, suspect: pub.suspect };
        }
        c.eventsApplied++;
        unknownParent = r === STORED_UNKNOWN_PARENT;
        if (unknownParent) {
          c.unknownParents++;
          this.markSuspect(pub, 'unknown_parent', nowMs);
        }
        blockOps = data.blockHashes.length;
        c.blocksStored += blockOps;
        break;
      }
      case 'removed':
        c.eventsApplied++;
        unknownRemovals = this.applyRemoved(pub, tier, data.blockHashes);
        blockOps = data.blockHashes.length;
        c.blocksRemoved += blockOps - unknownRemovals.length;
        c.unknownRemovals += unknownRemovals.length;
        break;
      case 'cleared':
        c.eventsApplied++;
        // Dynamo's newer semantics: only the emitting dp rank. The publisher's state is now known
        // exactly (empty), which repairs any earlier loss.
        this.clearPublisher(pub);
        c.clears++;
        break;
    }
    return { status: 'applied', rejection: null, blockOps, missedEvents: missed, unknownParent, unknownRemovals, suspect: pub.suspect };
  }

  private markSuspect(pub: Publisher, reason: SuspectReason, nowMs: number): void {
    // Suspect info objects are immutable so a match result can hand out the same reference.
    pub.suspect =
      pub.suspect === null
        ? { reason, sinceMs: nowMs, incidents: 1 }
        : { reason: pub.suspect.reason, sinceMs: pub.suspect.sinceMs, incidents: pub.suspect.incidents + 1 };
  }

  // ---------------------------------------------------------------------------------------------
  // Publisher management

  private publisher(workerId: WorkerId, dpRank: number, create: boolean): Publisher | undefined {
    let ranks = this.byWorker.get(workerId);
    const existing = ranks?.get(dpRank);
    if (existing !== undefined || !create) return existing;
    if (ranks === undefined) {
      ranks = new Map();
      this.byWorker.set(workerId, ranks);
    }
    const slot = this.freeSlots.length > 0 ? this.freeSlots.pop()! : this.slotHigh++;
    if (slot >= this.slotCap) {
      // A new highest slot: the slot-sized scratch doubles.
      const cap = (this.slotCap *= 2);
      this.counts = new Int32Array(NTIERS * cap);
      this.lvl = new Int32Array(cap);
      this.seen = new Int32Array(cap);
      this.act = new Int32Array(cap);
    }
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
   * A worker's advertised cache size, `total_kv_blocks` per dp rank, sizing its publishers' block-id
   * tables up front (README.md, "Layout", "Pre-sized block-id tables"); tables that exist get the
   * allocation now. 0 forgets the hint; hints above EXPECT_BLOCKS_MAX count as that.
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
   * starting at half of that, so filling it to the hint doubles it in place at most once; else the
   * smallest table.
   */
  private newTable(workerId: WorkerId): ExtMap {
    const e = this.expected.get(workerId);
    if (e === undefined) return new ExtMap();
    const res = slotsFor(e);
    return new ExtMap(res >>> 1, res);
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
    this.recover(workerId, dpRank, [], lastEventId ?? null, nowMs);
  }

  /**
   * Replace one publisher's state with what its worker's own index says it holds (README.md, `recover`);
   * `lastEventId` null: the next event's id is accepted as the new baseline (`resync`). A RangeError is thrown before anything changes when an event is another worker's or rank's, or invalid.
   */
  recover(workerId: WorkerId, dpRank: number, events: readonly KvEvent[], lastEventId: bigint | null, nowMs: number): RecoverResult {
    for (const e of events) {
      if (e.workerId !== workerId || e.dpRank !== dpRank) {
        throw new RangeError(`recovery event for worker ${e.workerId} dp rank ${e.dpRank} in the recovery of worker ${workerId} dp rank ${dpRank}`);
      }
      if (TIER_INDEX[e.storageTier] === undefined) throw new RangeError(`unknown storage tier ${String(e.storageTier)}`);
      const d = e.data;
      if (d.kind === 'stored' && d.blockHashes.length !== d.tokensHashes.length) {
        throw new RangeError(`stored event has ${d.blockHashes.length} block hashes but ${d.tokensHashes.length} tokens hashes`);
      }
    }
    const pub = this.publisher(workerId, dpRank, true)!;
    const dropped = this.clearPublisher(pub);
    pub.expectStart = false;
    let unknownParents = 0;
    let rejected = 0;
    const c = this.counters;
    for (const e of events) {
      const tier = TIER_INDEX[e.storageTier];
      const d = e.data;
      if (d.kind === 'stored') {
        const r = this.applyStored(pub, tier, d, true);
        if (r === STORED_SELF_REFERENCING) {
          rejected++;
          continue;
        }
        if (r === STORED_UNKNOWN_PARENT) unknownParents++;
        c.blocksStored += d.blockHashes.length;
      } else if (d.kind === 'removed') {
        const unknown = this.applyRemoved(pub, tier, d.blockHashes);
        c.blocksRemoved += d.blockHashes.length - unknown.length;
      } else this.clearPublisher(pub);
    }
    pub.lastEventId = lastEventId;
    pub.lastEventMs = nowMs;
    if (unknownParents > 0) {
      c.unknownParents += unknownParents;
      this.markSuspect(pub, 'unknown_parent', nowMs);
    }
    return { blocksDropped: dropped, blocks: pub.map.size, unknownParents, rejected, suspect: pub.suspect };
  }

  /** Last event id applied for one publisher (null before its first event, or when unknown). */
  lastEventIdOf(workerId: WorkerId, dpRank: number): bigint | null {
    return this.publisher(workerId, dpRank, false)?.lastEventId ?? null;
  }

  /** Suspect state of one publisher (null when trusted or unknown). */
  suspectOf(workerId: WorkerId, dpRank: number): SuspectInfo | null {
    return this.publisher(workerId, dpRank, false)?.suspect ?? null;
  }

  // ---------------------------------------------------------------------------------------------
  // Match

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
        const rec: Mutable<WorkerMatch> = {
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

  /**
   * Walks the request down the runs from the root (README.md, "Layout", "Match"); a publisher leaves
   * a tier set where its holding ends before the run does (or the request leaves the run).
   */
  private walk(loc: Int32Array, n: number): number {
    const S = this.slotCap;
    const counts = this.counts;
    counts.fill(0);
    if (n === 0) return S;
    let node = this.child(ROOT, loc[0]!, loc[1]!);
    if (node === 0) return S;
    let lower = 0;
    if (this.lowerEver) for (const p of this.publishers) lower += p.tierBlocks[1]! + p.tierBlocks[2]! + p.tierBlocks[3]!;
    const top = lower === 0 ? 1 : NTIERS;
    const hold = this.hold;
    const lvl = this.lvl;
    const seen = this.seen;
    const act = this.act;
    const blo = this.blo;
    const bhi = this.bhi;
    lvl.fill(top);
    let na = 0;
    {
      const end = this.nHold[node]! + this.nHCnt[node]! * HS;
      for (let e = this.nHold[node]!; e < end; e += HS) {
        const s = hold[e + H_SLOT]!;
        lvl[s] = 0;
        act[na++] = s;
      }
    }
    let depth = 0;
    for (;;) {
      const g = this.nStart[node]!;
      const len = this.nLen[node]!;
      const lim = Math.min(len, n - depth);
      let m = 1;
      while (m < lim && blo[g + m] === loc[2 * (depth + m)] && bhi[g + m] === loc[2 * (depth + m) + 1]) m++;
      const v = ++this.visit;
      const end = this.nHold[node]! + this.nHCnt[node]! * HS;
      for (let e = this.nHold[node]!; e < end; e += HS) {
        const s = hold[e + H_SLOT]!;
        seen[s] = v;
        for (let l = lvl[s]!; l < top; l++) {
          const c = Math.min(hold[e + H_C + l]!, m);
          if (c < len || m < len) {
            counts[l * S + s] = depth + c;
            lvl[s] = l + 1;
          } else break;
        }
      }
      let keep = 0;
      for (let j = 0; j < na; j++) {
        const s = act[j]!;
        if (seen[s] !== v) {
          for (let l = lvl[s]!; l < top; l++) counts[l * S + s] = depth;
          lvl[s] = top;
        }
        if (lvl[s]! < top) act[keep++] = s;
      }
      na = keep;
      depth += len;
      let next = 0;
      if (na > 0 && m === len && depth < n) next = this.child(node, loc[2 * depth]!, loc[2 * depth + 1]!);
      if (next === 0) {
        for (let j = 0; j < na; j++) {
          const s = act[j]!;
          for (let l = lvl[s]!; l < top; l++) counts[l * S + s] = depth;
        }
        break;
      }
      node = next;
    }
    if (top === 1) {
      counts.copyWithin(S, 0, S);
      counts.copyWithin(2 * S, 0, 2 * S);
    }
    return S;
  }

  // ---------------------------------------------------------------------------------------------
  // Stored

  private inTree(g: number): boolean {
    if (g < 0 || g >= this.bHigh) return false;
    const node = this.bnode[g]!;
    if (node <= 0 || this.nParent[node] === FREED) return false;
    const pos = g - this.nStart[node]!;
    return pos >= 0 && pos < this.nLen[node]!;
  }

  /**
   * Store a stored event's blocks: STORED_OK, STORED_UNKNOWN_PARENT, or (with `check`, before
   * changing anything) STORED_SELF_REFERENCING when it names one block id twice, its parent counted.
   */
  private applyStored(pub: Publisher, tier: number, data: KvStoredData, check: boolean): number {
    const n = data.blockHashes.length;
    const ext = i32View(data.blockHashes);
    const loc = i32View(data.tokensHashes);
    const map = pub.map;
    map.reserve(n + 1);
    let unknownParent = false;
    let g = AT_ROOT;
    if (data.parentHash !== null) {
      const f = map.find(u64Lo(data.parentHash), u64Hi(data.parentHash));
      if (f < 0) {
        unknownParent = true;
        g = AT_DETACHED;
      } else {
        const pg = map.t[f + K_VAL]! & POS_MASK;
        g = this.inTree(pg) ? pg : AT_DETACHED;
      }
    }
    const homes = (this.homes = touchHomes(map, ext, n, this.homes));
    // Refused before anything changes (growing the table's room above changes no answer).
    if (check) {
      const p = data.parentHash;
      const pLo = p === null ? 0 : u64Lo(p);
      const pHi = p === null ? 0 : u64Hi(p);
      if (this.repeats.has(ext, homes, n, p === null ? -1 : mix2(pLo, pHi) & map.mask, pLo, pHi)) return STORED_SELF_REFERENCING;
    }
    if (tier > 0) this.lowerEver = true;
    let i = 0;
    // Follow what the tree already has.
    while (i < n && g !== AT_DETACHED) {
      const lo = loc[2 * i]!;
      const hi = loc[2 * i + 1]!;
      let next = -1;
      if (g === AT_ROOT) {
        const c = this.child(ROOT, lo, hi);
        if (c !== 0) next = this.nStart[c]!;
      } else {
        let node = this.bnode[g]!;
        const pos = g - this.nStart[node]!;
        if (pos + 1 < this.nLen[node]!) {
          if (this.blo[g + 1] === lo && this.bhi[g + 1] === hi) next = g + 1;
          else {
            this.split(node, pos + 1);
            node = this.bnode[g]!;
          }
        }
        if (next < 0) {
          const c = this.child(node, lo, hi);
          if (c !== 0) next = this.nStart[c]!;
        }
      }
      if (next < 0) break;
      this.claim(pub, next, tier, ext[2 * i]!, ext[2 * i + 1]!, homes[i]!);
      g = next;
      i++;
      // A released old position may have cut the walk's node: still followed (unreachable), as the reference does.
    }
    if (i === n) {
      this.maybeCompact();
      return unknownParent ? STORED_UNKNOWN_PARENT : STORED_OK;
    }
    // New positions for blocks i..n-1.
    const k = n - i;
    const tbit = 1 << tier;
    const s = pub.slot;
    let node: number;
    let gStart: number;
    let extended = false;
    if (g >= 0) {
      node = this.bnode[g]!;
      const pos = g - this.nStart[node]!;
      if (pos + 1 < this.nLen[node]!) {
        this.split(node, pos + 1);
        node = this.bnode[g]!;
      }
      const a = this.nAlloc[node]!;
      const len = this.nLen[node]!;
      const e = this.holder(node, s);
      if (
        this.nKids[node] === 0 &&
        this.nStart[node]! + len === this.aStart[a]! + this.aUsed[a]! &&
        this.aUsed[a]! + k <= this.aCap[a]! &&
        e !== 0 &&
        this.hold[e + H_C + tier] === len
      ) {
        extended = true;
        gStart = this.nStart[node]! + len;
        this.nLen[node] = len + k;
        this.aUsed[a] = this.aUsed[a]! + k;
        for (let l = tier; l < NTIERS; l++) this.hold[e + H_C + l] = len + k;
        if (len + k > this.nMax[node]!) this.nMax[node] = len + k;
      }
    }
    if (!extended) {
      const a = this.alloc(k);
      gStart = this.aStart[a]!;
      this.aUsed[a] = k;
      const c = this.newNode(gStart, k, a);
      if (g === AT_ROOT) this.linkChild(ROOT, c, loc[2 * i]!);
      else if (g >= 0) this.linkChild(this.bnode[g]!, c, loc[2 * i]!);
      const e = this.newHolder(c, s);
      for (let l = tier; l < NTIERS; l++) this.hold[e + H_C + l] = k;
      this.nMax[c] = k;
      node = c;
    }
    const g0 = gStart!;
    for (let j = 0; j < k; j++) {
      this.blo[g0 + j] = loc[2 * (i + j)]!;
      this.bhi[g0 + j] = loc[2 * (i + j) + 1]!;
      this.bnode[g0 + j] = node!;
    }
    this.livePositions += k;
    // Map entries (a block id already held elsewhere moves here).
    const t = map.t;
    const val = tbit << POS_BITS;
    const a0 = this.bAlloc[g0]!;
    for (let j = 0; j < k; j++) {
      const elo = ext[2 * (i + j)]!;
      const ehi = ext[2 * (i + j) + 1]!;
      const f = map.probeFrom(homes[i + j]!, elo, ehi);
      if (f >= 0) {
        this.enter(pub, g0 + j, tbit, elo, ehi, f, true);
        continue;
      }
      // A new id (the common case), inserted here: `enter` does the same, and moves.
      const b = -f - 1;
      t[b] = elo;
      t[b + 1] = ehi;
      t[b + K_VAL] = (g0 + j) | val;
      map.size++;
      pub.tierBlocks[tier]!++;
      this.aRefs[a0]!++;
    }
    this.maybeCompact();
    return unknownParent ? STORED_UNKNOWN_PARENT : STORED_OK;
  }

  /** The publisher stores block (elo, ehi) at existing position g on tier bit tbit. */
  private claim(pub: Publisher, g: number, tier: number, elo: number, ehi: number, home: number): void {
    const tbit = 1 << tier;
    const map = pub.map;
    const f = map.probeFrom(home, elo, ehi);
    if (f >= 0) {
      const v = map.t[f + K_VAL]!;
      const g0 = v & POS_MASK;
      const held = v >>> POS_BITS;
      if (g0 === g) {
        if (held & tbit) return;
        const before = this.bitsAt(pub, g, held);
        map.t[f + K_VAL] = v | (tbit << POS_BITS);
        pub.tierBlocks[tier]!++;
        if (this.multi[pub.slot]?.has(g)) this.multi[pub.slot]!.set(g, (this.multi[pub.slot]!.get(g)! & ~15) | before | tbit);
        this.raise(pub.slot, g, before, before | tbit);
        return;
      }
    }
    this.enter(pub, g, tbit, elo, ehi, f, false);
  }

  /**
   * Point the publisher's entry for (elo, ehi) at position g with tier bit tbit (inserting it, or
   * moving it from where it was), and raise its holding at g. `f`: the id's `probeFrom` result.
   * `fresh`: g was just created for it (its holding already set by the caller).
   */
  private enter(pub: Publisher, g: number, tbit: number, elo: number, ehi: number, f: number, fresh: boolean): void {
    const map = pub.map;
    const s = pub.slot;
    let oldV = 0;
    if (f >= 0) {
      oldV = map.t[f + K_VAL]!;
      if ((oldV & POS_MASK) === g) throw new Error('internal: enter at the same position');
    }
    // The publisher's tier bits at g before this id arrives (fresh: its holding was set by the caller).
    let before = 0;
    if (!fresh) before = this.currentBits(pub, g);
    const tier = 31 - Math.clz32(tbit);
    if (f >= 0) {
      const g0 = oldV & POS_MASK;
      const held = oldV >>> POS_BITS;
      const oldBits = this.bitsAt(pub, g0, held);
      map.t[f + K_VAL] = g | (tbit << POS_BITS);
      for (let l = 0; l < NTIERS; l++) if (held & (1 << l)) pub.tierBlocks[l]!--;
      pub.tierBlocks[tier]!++;
      this.aRefs[this.bAlloc[g]!]!++;
      this.noteArrival(pub, g, before, tbit, fresh);
      if (!fresh) this.raise(s, g, before, before | tbit);
      // The old position loses this id's tiers.
      const after = this.departure(pub, g0, oldBits, held, 0, true);
      this.lower(s, g0, oldBits, after);
      this.unref(g0);
    } else {
      const b = -f - 1;
      map.t[b] = elo;
      map.t[b + 1] = ehi;
      map.t[b + K_VAL] = g | (tbit << POS_BITS);
      map.size++;
      pub.tierBlocks[tier]!++;
      this.aRefs[this.bAlloc[g]!]!++;
      this.noteArrival(pub, g, before, tbit, fresh);
      if (!fresh) this.raise(s, g, before, before | tbit);
    }
  }

  /** Bookkeeping of positions named by several ids: one more id names g (its bits before: `before`). */
  private noteArrival(pub: Publisher, g: number, before: number, tbit: number, fresh: boolean): void {
    if (fresh) return;
    const m = this.multi[pub.slot]?.get(g);
    if (m !== undefined) {
      this.multi[pub.slot]!.set(g, (((m >>> 4) + 1) << 4) | before | tbit);
      return;
    }
    if (before !== 0) {
      // A second id at a position the publisher holds through one already.
      (this.multi[pub.slot] ??= new Map()).set(g, (2 << 4) | before | tbit);
    }
  }

  /**
   * The publisher's tier bits at g after one of its ids drops the tiers `lost` there (`gone`: the
   * id no longer names g at all), given its bits before and that id's remaining tiers `rest`.
   */
  private departure(pub: Publisher, g: number, before: number, lost: number, rest: number, gone: boolean): number {
    const multi = this.multi[pub.slot];
    const m = multi?.get(g);
    if (m === undefined) return rest;
    const count = (m >>> 4) - (gone ? 1 : 0);
    const bits = before & ~lost;
    if (count <= 0) multi!.delete(g);
    else multi!.set(g, (count << 4) | bits);
    return bits;
  }

  /** Tier bits of the publisher at g, given one entry naming g with tiers `held`. */
  private bitsAt(pub: Publisher, g: number, held: number): number {
    const m = this.multi[pub.slot]?.get(g);
    return m === undefined ? held : m & 15;
  }

  /** Tier bits of the publisher at g from its holding (a scan of its map when one other id names g). */
  private currentBits(pub: Publisher, g: number): number {
    const m = this.multi[pub.slot]?.get(g);
    if (m !== undefined) return m & 15;
    if (!this.inTree(g)) return 0;
    const node = this.bnode[g]!;
    const e = this.holder(node, pub.slot);
    if (e === 0 || this.hold[e + H_C + 3]! <= g - this.nStart[node]!) return 0;
    const t = pub.map.t;
    for (let b = 0; b < t.length; b += SLOT) {
      const v = t[b + K_VAL]!;
      if (v !== 0 && (v & POS_MASK) === g) return v >>> POS_BITS;
    }
    return 0;
  }

  /** One map entry stopped naming position g: its allocation is freed when none names any of its positions. */
  private unref(g: number): void {
    const a = this.bAlloc[g]!;
    if (--this.aRefs[a]! === 0) (this.freeByClass[31 - Math.clz32(this.aCap[a]!)] ??= []).push(a);
  }

  /** Raise publisher s's holding at position g from tier bits `before` to `after`. */
  private raise(s: number, g: number, before: number, after: number): void {
    const gained = levels(after) & ~levels(before);
    if (gained === 0 || !this.inTree(g)) return;
    let node = this.bnode[g]!;
    let pos = g - this.nStart[node]!;
    let e = this.holder(node, s);
    let split = false;
    for (let l = 0; l < NTIERS; l++) if (gained & (1 << l) && (e === 0 ? 0 : this.hold[e + H_C + l]!) < pos) split = true;
    if (split) {
      this.split(node, pos);
      node = this.bnode[g]!;
      pos = 0;
      e = this.holder(node, s);
    }
    if (e === 0) e = this.newHolder(node, s);
    for (let l = 0; l < NTIERS; l++) if (gained & (1 << l) && this.hold[e + H_C + l] === pos) this.hold[e + H_C + l] = pos + 1;
    if (this.hold[e + H_C + 3]! > this.nMax[node]!) this.nMax[node] = this.hold[e + H_C + 3]!;
  }

  /** Lower publisher s's holding at position g from tier bits `before` to `after`; cut what nobody holds. */
  private lower(s: number, g: number, before: number, after: number): void {
    const lost = levels(before) & ~levels(after);
    if (lost === 0 || !this.inTree(g)) return;
    let node = this.bnode[g]!;
    let pos = g - this.nStart[node]!;
    let e = this.holder(node, s);
    if (e === 0) return;
    let split = false;
    for (let l = 0; l < NTIERS; l++) if (lost & (1 << l) && this.hold[e + H_C + l]! > pos + 1) split = true;
    if (split) {
      this.split(node, pos + 1);
      node = this.bnode[g]!;
      pos = g - this.nStart[node]!;
      e = this.holder(node, s);
      if (e === 0) return;
    }
    for (let l = 0; l < NTIERS; l++) if (lost & (1 << l) && this.hold[e + H_C + l] === pos + 1) this.hold[e + H_C + l] = pos;
    if (this.hold[e + H_C + 3] === 0) this.dropHolder(node, s);
    this.settle(node);
  }

  /**
   * Publisher s stops holding position g, which it held on tier `tier` only and as the last block of
   * its holding on every level from that tier up: lower those cut-offs by one in place. False (and
   * nothing changed) when that is not the case, for the general path.
   */
  private dropLast(s: number, g: number, tier: number): boolean {
    if (g >= this.bHigh) return false;
    const node = this.bnode[g]!;
    if (node <= 0 || this.nParent[node] === FREED) return false;
    const pos = g - this.nStart[node]!;
    if (pos < 0 || pos >= this.nLen[node]!) return false;
    const e = this.holder(node, s);
    const hold = this.hold;
    if (e === 0 || hold[e + H_C + tier] !== pos + 1 || hold[e + H_C + 3] !== pos + 1) return false;
    for (let l = tier; l < NTIERS; l++) hold[e + H_C + l] = pos;
    if (pos === 0) this.dropHolder(node, s);
    if (this.nMax[node] === pos + 1) this.settle(node);
    return true;
  }

  /** Recompute node's largest cut-off; positions past it leave the tree (nobody holds them), cutting what is below. */
  private settle(node: number): void {
    let m = 0;
    const end = this.nHold[node]! + this.nHCnt[node]! * HS;
    for (let e = this.nHold[node]!; e < end; e += HS) if (this.hold[e + H_C + 3]! > m) m = this.hold[e + H_C + 3]!;
    this.nMax[node] = m;
    const len = this.nLen[node]!;
    if (m >= len) return;
    this.cutKids(node);
    this.nLen[node] = m;
    this.livePositions -= len - m;
    if (m === 0) {
      this.unlinkChild(node);
      this.freeNode(node);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Removed and cleared

  /** Remove blocks on one tier; returns the ids the publisher did not hold there. */
  private applyRemoved(pub: Publisher, tier: number, hashes: BigUint64Array): BigUint64Array {
    const n = hashes.length;
    const ext = i32View(hashes);
    const tbit = 1 << tier;
    const map = pub.map;
    const s = pub.slot;
    let unknown: number[] | null = null;
    const homes = (this.homes = touchHomes(map, ext, n, this.homes));
    for (let i = 0; i < n; i++) {
      const f = map.probeFrom(homes[i]!, ext[2 * i]!, ext[2 * i + 1]!);
      const v = f < 0 ? 0 : map.t[f + K_VAL]!;
      const held = v >>> POS_BITS;
      if ((held & tbit) === 0) {
        (unknown ??= []).push(i);
        continue;
      }
      const g = v & POS_MASK;
      pub.tierBlocks[tier]!--;
      if (held === tbit && (this.multi[s] ?? null) === null && this.dropLast(s, g, tier)) {
        // The common case (one id, one tier, the last block of the publisher's holding): done in place.
        map.removeAt(f);
        this.unref(g);
        continue;
      }
      const before = this.bitsAt(pub, g, held);
      const rest = held & ~tbit;
      const after = this.departure(pub, g, before, tbit, rest, rest === 0);
      if (rest === 0) map.removeAt(f);
      else map.t[f + K_VAL] = g | (rest << POS_BITS);
      this.lower(s, g, before, after);
      if (rest === 0) this.unref(g);
    }
    this.maybeCompact();
    if (unknown === null) return EMPTY_U64;
    const out = new BigUint64Array(unknown.length);
    for (let k = 0; k < unknown.length; k++) out[k] = hashes[unknown[k]!]!;
    return out;
  }

  /** Drop every block of a publisher and trust it again (its `cleared` event, recovery, removal); returns how many. */
  private clearPublisher(pub: Publisher): number {
    const map = pub.map;
    const t = map.t;
    const s = pub.slot;
    const dropped = map.size;
    const mark = ++this.mark;
    const nodes: number[] = [];
    for (let b = 0; b < t.length; b += SLOT) {
      const v = t[b + K_VAL]!;
      if (v === 0) continue;
      const g = v & POS_MASK;
      if (!this.inTree(g)) continue;
      const node = this.bnode[g]!;
      if (this.nMark[node] !== mark) {
        this.nMark[node] = mark;
        nodes.push(node);
      }
    }
    for (const node of nodes) {
      if (this.nParent[node] === FREED) continue;
      this.dropHolder(node, s);
      this.settle(node);
    }
    for (let b = 0; b < t.length; b += SLOT) {
      const v = t[b + K_VAL]!;
      if (v !== 0) this.unref(v & POS_MASK);
    }
    pub.map = this.newTable(pub.workerId);
    this.multi[s] = null;
    pub.tierBlocks.fill(0);
    pub.suspect = null;
    this.maybeCompact();
    return dropped;
  }

  // ---------------------------------------------------------------------------------------------
  // Compaction, tree dump and snapshot

  /**
   * At an event boundary, once the positions handed out have doubled since the last check and exceed
   * COMPACT_RATIO times those in the tree (plus COMPACT_SLACK), rebuild the tree into tight
   * allocations (README.md, "Layout", "Compaction": why, and the bound on cost and room).
   */
  private maybeCompact(): void {
    if (this.bHigh <= this.compactAt || this.rebuilding) return;
    if (this.bHigh > COMPACT_RATIO * this.livePositions + COMPACT_SLACK) this.compact();
    this.compactAt = Math.max(2 * this.bHigh, COMPACT_SLACK);
  }

  /** Rebuild the tree from its dump into fresh tables; publishers (and their answer records) are kept. */
  compact(): void {
    const d = this.dumpTree();
    const fresh = new PrefixIndex(this.blockSize);
    const self = this as unknown as Record<string, unknown>;
    const from = fresh as unknown as Record<string, unknown>;
    for (const k of TREE_FIELDS) self[k] = from[k];
    for (const p of this.publishers) {
      p.map = this.newTable(p.workerId);
      p.tierBlocks.fill(0);
    }
    this.replayTree(d, this.publishers);
    this.compactions++;
  }

  /** The tree as a dump (snapshot-io.ts): each node's run in order, nodes in preorder. */
  private dumpTree(): TreeDump {
    const posOf = new Int32Array(this.bHigh).fill(-1);
    const out = new PositionList();
    // The subtree of `root` in preorder, iteratively: chains run thousands deep.
    const visit = (root: number, parentRef: number): void => {
      const stack = [root];
      while (stack.length > 0) {
        const node = stack.pop()!;
        const start = this.nStart[node]!;
        const p = this.nParent[node]!;
        // A child hangs from the last position of its parent's run.
        let par = node === root ? parentRef : posOf[this.nStart[p]! + this.nLen[p]! - 1]!;
        for (let j = 0; j < this.nLen[node]!; j++) par = posOf[start + j] = out.push(par, this.blo[start + j]!, this.bhi[start + j]!);
        for (let c = this.nFirst[node]!; c !== 0; c = this.nNext[c]!) stack.push(c);
      }
    };
    for (let c = this.nFirst[ROOT]!; c !== 0; c = this.nNext[c]!) visit(c, ROOT_REF);
    for (let n = 1; n < this.nHigh; n++) if (this.nParent[n] === NONE && this.nLen[n]! > 0) visit(n, DETACHED_REF);
    // An id whose position has left the tree: as a parent it starts a chain that hangs from nothing.
    for (const p of this.publishers) {
      const t = p.map.t;
      for (let b = 0; b < t.length; b += SLOT) {
        const v = t[b + K_VAL]!;
        const g = v & POS_MASK;
        if (v !== 0 && posOf[g]! < 0) posOf[g] = out.push(DETACHED_REF, this.blo[g]!, this.bhi[g]!);
      }
    }
    const n = out.length;
    return { parent: out.parent.slice(0, n), lo: out.lo.slice(0, n), hi: out.hi.slice(0, n), entries: this.publishers.map((p) => this.entriesOf(p, posOf)) };
  }

  /**
   * A publisher's entries for the dump, its positions mapped by `posOf` (-1: not in the dump, which a
   * consistent index never has), with its tier bits at each (fewer than its ids' tiers there once one
   * of several ids of a block was removed: Dynamo then drops the worker from the block).
   */
  private entriesOf(p: Publisher, posOf: Int32Array): PublisherEntries {
    const { t, size } = p.map;
    const idLo = new Int32Array(size);
    const idHi = new Int32Array(size);
    const pos = new Int32Array(size);
    const tiers = new Uint8Array(size);
    let k = 0;
    for (let b = 0; b < t.length; b += SLOT) {
      const v = t[b + K_VAL]!;
      if (v === 0) continue;
      const g = v & POS_MASK;
      if (posOf[g]! < 0) throw new Error(`internal: block-id entry names ${g}, which is not in the tree dump`);
      idLo[k] = t[b]!;
      idHi[k] = t[b + 1]!;
      pos[k] = posOf[g]!;
      tiers[k] = (v >>> POS_BITS) | (this.bitsAt(p, g, v >>> POS_BITS) << 4);
      k++;
    }
    if (k !== size) throw new Error(`internal: block-id table holds ${k} entries, its size says ${size}`);
    return { idLo, idHi, pos, tiers };
  }

  /**
   * Rebuild the tree of `pubs` (empty publishers of this index, one per `d.entries`, in order) by
   * storing each publisher's blocks again, chain by chain, through `applyStored`: the result holds
   * exactly the dump's (publisher, block id, position, tiers), in fresh tables; how: README.md,
   * "Snapshot format (version 1)". Counters, event ids and suspect state are the caller's.
   */
  private replayTree(d: TreeDump, pubs: readonly Publisher[]): void {
    this.rebuilding = true;
    try {
      const np = d.parent.length;
      // For the publisher being replayed: position -> its first entry there + 1 (0: none).
      const owner = new Int32Array(np);
      /** Per publisher: temporary ids to remove at the end, tier bits to clear (see below), a temporary id counter. */
      const temps: bigint[][] = [];
      const fixes: { parentHash: bigint | null; local: BigUint64Array; clear: number }[][] = [];
      const counters = new Int32Array(pubs.length);
      /** The j-th publisher's next temporary id: (counter, 0x7e3a91c5 ^ j) as (lo, hi), skipping ids in use. */
      const nextTemp = (j: number, taken: (lo: number, hi: number) => boolean): bigint => {
        for (;;) {
          const lo = ++counters[j]! | 0;
          const hi = 0x7e3a_91c5 ^ j;
          if (!taken(lo, hi)) return u64From(lo, hi);
        }
      };
      // 1. Every publisher's entries, chain by chain, with the temporary parents they need. Temporary
      //    ids stay until every publisher is stored, so that no position leaves the tree meanwhile
      //    (a position nobody holds is cut, with what hangs below it).
      for (let j = 0; j < pubs.length; j++) {
        const pub = pubs[j]!;
        const e = d.entries[j]!;
        const m = e.pos.length;
        if (m >= 1 << 25) corrupt(`publisher ${j} has ${m} entries`);
        // Entries by position (preorder, so a parent's entries are stored before its children's).
        const keys = new Float64Array(m);
        for (let k = 0; k < m; k++) keys[k] = e.pos[k]! * 33554432 + k;
        keys.sort();
        const order = new Int32Array(m);
        for (let i = 0; i < m; i++) order[i] = keys[i]! % 33554432;
        // The publisher's ids (those not stored yet included), so that temporary ids never take one
        // of them; needed only while its entries are being stored.
        const ids = new ExtMap(slotsFor(m));
        for (let k = 0; k < m; k++) {
          if (ids.find(e.idLo[k]!, e.idHi[k]!) >= 0) corrupt(`publisher ${j} has a block id twice`);
          ids.insertFresh(e.idLo[k]!, e.idHi[k]!, 1);
        }
        const fresh = (): bigint => nextTemp(j, (lo, hi) => ids.find(lo, hi) >= 0 || pub.map.find(lo, hi) >= 0);
        const mine: bigint[] = [];
        temps.push(mine);
        const myFixes: (typeof fixes)[number] = [];
        fixes.push(myFixes);
        /** Temporary ids: at a position (key q), or anchoring the detached chain that starts at q (key -2 - q). */
        const tempAt = new Map<number, bigint>();
        /** A temporary id stored now under `parentHash` with local hash `local`, kept in `tempAt` as `key`. */
        const temp = (key: number, parentHash: bigint | null, local: bigint): bigint => {
          const t = fresh();
          this.storeChain(pub, parentHash, 0, BigUint64Array.of(t), BigUint64Array.of(local));
          mine.push(t);
          tempAt.set(key, t);
          return t;
        };
        // An anchor hangs from an id never stored, so what is stored under it hangs from nothing.
        const anchor = (head: number): bigint => tempAt.get(-2 - head) ?? temp(-2 - head, fresh(), 0n);
        /** The publisher's id at position q (an entry's, or a temporary one stored now, with its missing ancestors). */
        const idAt = (q: number): bigint => {
          const own = owner[q]!;
          if (own !== 0) return u64From(e.idLo[own - 1]!, e.idHi[own - 1]!);
          const known = tempAt.get(q);
          if (known !== undefined) return known;
          // Climb to the nearest ancestor the publisher holds (or the root, or a detached head) ...
          const path: number[] = [];
          let x = q;
          while (x >= 0 && owner[x] === 0 && !tempAt.has(x)) {
            path.push(x);
            x = d.parent[x]!;
          }
          // ... and store temporary ids back down.
          let parentHash: bigint | null = x === ROOT_REF ? null : x >= 0 ? idAt(x) : anchor(path[path.length - 1]!);
          for (let i = path.length - 1; i >= 0; i--) {
            const y = path[i]!;
            parentHash = temp(y, parentHash, u64From(d.lo[y]!, d.hi[y]!));
          }
          return parentHash!;
        };
        const parentOf = (q: number): bigint | null => {
          const pp = d.parent[q]!;
          return pp === ROOT_REF ? null : pp === DETACHED_REF ? anchor(q) : idAt(pp);
        };
        let i = 0;
        while (i < m) {
          const k0 = order[i]!;
          const p0 = e.pos[k0]!;
          const t0 = e.tiers[k0]! & 15;
          // A chain: each next entry on the child position of the one before, with the same tiers.
          let len = 1;
          while (i + len < m) {
            const k = order[i + len]!;
            const prev = e.pos[order[i + len - 1]!]!;
            if (e.pos[k] === prev || d.parent[e.pos[k]!] !== prev || (e.tiers[k]! & 15) !== t0) break;
            len++;
          }
          const parentHash = parentOf(p0);
          const blocks = new BigUint64Array(len);
          const locals = new BigUint64Array(len);
          const bv = i32View(blocks);
          const lv = i32View(locals);
          for (let c = 0; c < len; c++) {
            const k = order[i + c]!;
            const q = e.pos[k]!;
            bv[2 * c] = e.idLo[k]!;
            bv[2 * c + 1] = e.idHi[k]!;
            lv[2 * c] = d.lo[q]!;
            lv[2 * c + 1] = d.hi[q]!;
          }
          for (let tier = 0; tier < NTIERS; tier++) if (t0 & (1 << tier)) this.storeChain(pub, parentHash, tier, blocks, locals);
          for (let c = 0; c < len; c++) {
            const k = order[i + c]!;
            if (owner[e.pos[k]!] === 0) owner[e.pos[k]!] = k + 1;
          }
          i += len;
        }
        // Where the publisher's tier bits are fewer than its ids' tiers there (one of several ids of a
        // position removed: Dynamo drops the worker from the block), the bits to clear, and the parent
        // a temporary id at that position is stored under.
        for (let a = 0; a < m; ) {
          const q = e.pos[order[a]!]!;
          let union = 0;
          const bits = e.tiers[order[a]!]! >>> 4;
          let z = a;
          for (; z < m && e.pos[order[z]!] === q; z++) {
            union |= e.tiers[order[z]!]! & 15;
            if (e.tiers[order[z]!]! >>> 4 !== bits) corrupt(`publisher ${j} has two tier sets at position ${q}`);
          }
          if ((bits & ~union) !== 0) corrupt(`publisher ${j} holds tiers at position ${q} that none of its ids has`);
          if (bits !== union) myFixes.push({ parentHash: parentOf(q), local: BigUint64Array.of(u64From(d.lo[q]!, d.hi[q]!)), clear: union & ~bits });
          a = z;
        }
        for (let k = 0; k < m; k++) owner[e.pos[k]!] = 0;
      }
      // 2. Tier bits cleared as Dynamo clears them: a temporary id stored at the position on each such
      //    tier and removed again drops the publisher from the block on that tier, its ids staying.
      for (let j = 0; j < pubs.length; j++) {
        const pub = pubs[j]!;
        for (const f of fixes[j]!) {
          // Every id of the publisher, temporary ones included, is in its table by now.
          const block = BigUint64Array.of(nextTemp(j, (lo, hi) => pub.map.find(lo, hi) >= 0));
          for (let tier = 0; tier < NTIERS; tier++) if (f.clear & (1 << tier)) this.storeChain(pub, f.parentHash, tier, block, f.local);
          for (let tier = 0; tier < NTIERS; tier++) if (f.clear & (1 << tier)) this.applyRemoved(pub, tier, block);
        }
      }
      // 3. The temporary ids go: what only they held leaves the tree.
      for (let j = 0; j < pubs.length; j++) if (temps[j]!.length > 0) this.applyRemoved(pubs[j]!, 0, BigUint64Array.from(temps[j]!));
    } finally {
      this.rebuilding = false;
    }
  }

  /** Store one chain of the publisher's blocks on one tier (a stored event without event-id bookkeeping). */
  private storeChain(pub: Publisher, parentHash: bigint | null, tier: number, blocks: BigUint64Array, locals: BigUint64Array): void {
    this.applyStored(pub, tier, { kind: 'stored', parentHash: parentHash as ExternalHash | null, startPosition: null, blockHashes: blocks, tokensHashes: locals }, false);
  }

  /** Exact image of the index (README "Snapshot"): block size, counters, publisher heads, then the tree dump. */
  snapshot(): Uint8Array {
    return writeImage(this.blockSize, this.counters, this.publishers, this.dumpTree());
  }

  /**
   * Rebuild an index from snapshot bytes. Throws SnapshotError on a foreign image (`bad_magic`),
   * another version (`unsupported_version`) or a damaged or inconsistent one (`corrupt`).
   */
  static restore(bytes: Uint8Array): PrefixIndex {
    try {
      const img = readImage(bytes);
      const idx = new PrefixIndex(img.blockSize);
      Object.assign(idx.counters, img.counters);
      idx.adopt(img.heads, img.tree);
      return idx;
    } catch (e) {
      // Anything but a SnapshotError (a block size the constructor refuses, say) is a corrupt image.
      if (e instanceof SnapshotError) throw e;
      return corrupt((e as Error).message);
    }
  }

  /** Become the publishers `heads` with the tree `d` (this index must be empty). */
  private adopt(heads: readonly PublisherHead[], d: TreeDump): void {
    const pubs: Publisher[] = [];
    for (const h of heads) {
      if (this.publisher(h.workerId, h.dpRank, false) !== undefined) corrupt('duplicate publisher');
      const p = this.publisher(h.workerId, h.dpRank, true)!;
      p.lastEventId = h.lastEventId;
      p.expectStart = h.expectStart;
      p.suspect = h.suspect;
      p.lastEventMs = h.lastEventMs;
      pubs.push(p);
    }
    this.replayTree(d, pubs);
    for (let i = 0; i < heads.length; i++) {
      const want = heads[i]!.tierBlocks;
      const got = pubs[i]!.tierBlocks;
      for (let t = 0; t < NTIERS; t++) {
        if (want[t] !== got[t]) corrupt(`publisher ${i} holds ${got[t]} blocks on tier ${t}, its header says ${want[t]}`);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Nodes, holders, children, allocations

  private holder(node: number, s: number): number {
    const hold = this.hold;
    const end = this.nHold[node]! + this.nHCnt[node]! * HS;
    for (let e = this.nHold[node]!; e < end; e += HS) if (hold[e + H_SLOT] === s) return e;
    return 0;
  }

  /** A new zeroed entry for slot s in node (its entries may move: offsets into them are stale after). */
  private newHolder(node: number, s: number): number {
    const cnt = this.nHCnt[node]!;
    const cap = this.nHCap[node]!;
    if (cnt === cap) {
      const to = this.hAlloc(cap === 0 ? 1 : cap * 2);
      const from = this.nHold[node]!;
      if (cnt > 0) {
        this.hold.copyWithin(to, from, from + cnt * HS);
        this.hRelease(from, cap);
      }
      this.nHold[node] = to;
      this.nHCap[node] = cap === 0 ? 1 : cap * 2;
    }
    const e = this.nHold[node]! + cnt * HS;
    this.hold[e + H_SLOT] = s;
    for (let l = 0; l < NTIERS; l++) this.hold[e + H_C + l] = 0;
    this.nHCnt[node] = cnt + 1;
    return e;
  }

  private dropHolder(node: number, s: number): void {
    const e = this.holder(node, s);
    if (e === 0) return;
    const cnt = this.nHCnt[node]! - 1;
    const last = this.nHold[node]! + cnt * HS;
    if (e !== last) this.hold.copyWithin(e, last, last + HS);
    this.nHCnt[node] = cnt;
    if (cnt === 0) this.dropHolders(node);
  }

  /** Free node's holder block. */
  private dropHolders(node: number): void {
    if (this.nHCap[node]! > 0) this.hRelease(this.nHold[node]!, this.nHCap[node]!);
    this.nHold[node] = 0;
    this.nHCnt[node] = 0;
    this.nHCap[node] = 0;
  }

  private hAlloc(cap: number): number {
    const cls = 31 - Math.clz32(cap);
    const off = this.hFreeBy[cls]?.pop();
    if (off !== undefined) return off;
    const at = this.hTop;
    this.hTop += cap * HS;
    if (this.hTop > this.hold.length) this.hold = grow(this.hold, this.hTop);
    return at;
  }

  private hRelease(off: number, cap: number): void {
    (this.hFreeBy[31 - Math.clz32(cap)] ??= []).push(off);
  }

  private newNode(start: number, len: number, a: number): number {
    let id = this.freeNodes.pop();
    if (id === undefined) {
      id = this.nHigh++;
      if (id >= this.nStart.length) {
        const m = id + 1;
        this.nStart = grow(this.nStart, m);
        this.nLen = grow(this.nLen, m);
        this.nParent = grow(this.nParent, m);
        this.nAlloc = grow(this.nAlloc, m);
        this.nFirst = grow(this.nFirst, m);
        this.nNext = grow(this.nNext, m);
        this.nPrev = grow(this.nPrev, m);
        this.nKids = grow(this.nKids, m);
        this.nHold = grow(this.nHold, m);
        this.nHCnt = grow(this.nHCnt, m);
        this.nHCap = grow(this.nHCap, m);
        this.nMax = grow(this.nMax, m);
        this.nMark = grow(this.nMark, m);
      }
    }
    this.nStart[id] = start;
    this.nLen[id] = len;
    this.nParent[id] = NONE;
    this.nAlloc[id] = a;
    this.nFirst[id] = 0;
    this.nNext[id] = 0;
    this.nPrev[id] = 0;
    this.nKids[id] = 0;
    this.nHold[id] = 0;
    this.nHCnt[id] = 0;
    this.nHCap[id] = 0;
    this.nMax[id] = 0;
    this.kidMap[id] = undefined;
    return id;
  }

  private freeNode(id: number): void {
    this.dropHolders(id);
    this.nParent[id] = FREED;
    this.kidMap[id] = undefined;
    this.freeNodes.push(id);
  }

  private child(node: number, lo: number, hi: number): number {
    const km = this.kidMap[node];
    if (km !== undefined) {
      // The map holds one child per low half; others sharing it (rare) are found on the list.
      const c = km.get(lo);
      if (c === undefined) return 0;
      if (this.bhi[this.nStart[c]!] === hi) return c;
    }
    for (let c = this.nFirst[node]!; c !== 0; c = this.nNext[c]!) {
      const g = this.nStart[c]!;
      if (this.blo[g] === lo && this.bhi[g] === hi) return c;
    }
    return 0;
  }

  private linkChild(p: number, c: number, lo: number): void {
    this.nParent[c] = p;
    const head = this.nFirst[p]!;
    this.nNext[c] = head;
    this.nPrev[c] = 0;
    if (head !== 0) this.nPrev[head] = c;
    this.nFirst[p] = c;
    const kids = ++this.nKids[p]!;
    let km = this.kidMap[p];
    if (km !== undefined) {
      if (!km.has(lo)) km.set(lo, c);
      else this.shadowed++;
    } else if (kids > WIDE) {
      km = this.kidMap[p] = new Map();
      // c's blocks may not be written yet: its low half is `lo`.
      for (let x = this.nFirst[p]!; x !== 0; x = this.nNext[x]!) {
        const l = x === c ? lo : this.blo[this.nStart[x]!]!;
        if (!km.has(l)) km.set(l, x);
        else this.shadowed++;
      }
    }
  }

  private unlinkChild(c: number): void {
    const p = this.nParent[c]!;
    if (p < 0) return;
    const prev = this.nPrev[c]!;
    const next = this.nNext[c]!;
    if (prev !== 0) this.nNext[prev] = next;
    else this.nFirst[p] = next;
    if (next !== 0) this.nPrev[next] = prev;
    this.nKids[p]!--;
    const km = this.kidMap[p];
    if (km !== undefined) {
      const l = this.blo[this.nStart[c]!]!;
      if (km.get(l) === c) {
        km.delete(l);
        // A sibling with the same low half is only on the list: look for one if any ever was.
        if (this.shadowed > 0) for (let x = this.nFirst[p]!; x !== 0; x = this.nNext[x]!) if (this.blo[this.nStart[x]!] === l) km.set(l, x);
      }
      if (this.nKids[p] === 0) this.kidMap[p] = undefined;
    }
    this.nParent[c] = NONE;
    this.nNext[c] = 0;
    this.nPrev[c] = 0;
  }

  /** Cut every child of node (each keeps its subtree, now unreachable). */
  private cutKids(node: number): void {
    for (let c = this.nFirst[node]!; c !== 0; ) {
      const next = this.nNext[c]!;
      this.nParent[c] = NONE;
      this.nNext[c] = 0;
      this.nPrev[c] = 0;
      c = next;
    }
    this.nFirst[node] = 0;
    this.nKids[node] = 0;
    this.kidMap[node] = undefined;
  }

  /** Split node before position k (0 < k < len); the shorter side is renumbered. */
  private split(node: number, k: number): void {
    const len = this.nLen[node]!;
    const start = this.nStart[node]!;
    const a = this.nAlloc[node]!;
    let p: number;
    let q: number;
    if (k <= len - k) {
      p = this.newNode(start, k, a);
      q = node;
      const par = this.nParent[node]!;
      // p takes node's place under its parent (same first block), node hangs below p.
      if (par >= 0) {
        const prev = this.nPrev[node]!;
        const next = this.nNext[node]!;
        this.nPrev[p] = prev;
        this.nNext[p] = next;
        if (prev !== 0) this.nNext[prev] = p;
        else this.nFirst[par] = p;
        if (next !== 0) this.nPrev[next] = p;
        const km = this.kidMap[par];
        if (km !== undefined && km.get(this.blo[start]!) === node) km.set(this.blo[start]!, p);
      }
      this.nParent[p] = par;
      this.nFirst[p] = node;
      this.nKids[p] = 1;
      this.nParent[node] = p;
      this.nNext[node] = 0;
      this.nPrev[node] = 0;
      this.nStart[node] = start + k;
      this.nLen[node] = len - k;
      for (let j = 0; j < k; j++) this.bnode[start + j] = p;
    } else {
      q = this.newNode(start + k, len - k, a);
      p = node;
      // q takes node's children.
      this.nFirst[q] = this.nFirst[node]!;
      this.nKids[q] = this.nKids[node]!;
      this.kidMap[q] = this.kidMap[node];
      for (let c = this.nFirst[q]!; c !== 0; c = this.nNext[c]!) this.nParent[c] = q;
      this.nFirst[node] = q;
      this.nKids[node] = 1;
      this.kidMap[node] = undefined;
      this.nParent[q] = node;
      this.nLen[node] = k;
      for (let j = k; j < len; j++) this.bnode[start + j] = q;
    }
    // Holders: node's entries (cut-offs over the whole run) become p's [0, k) and q's.
    const cuts: number[][] = [];
    const end = this.nHold[node]! + this.nHCnt[node]! * HS;
    for (let e = this.nHold[node]!; e < end; e += HS) cuts.push([this.hold[e + H_SLOT]!, this.hold[e + H_C]!, this.hold[e + H_C + 1]!, this.hold[e + H_C + 2]!, this.hold[e + H_C + 3]!]);
    this.dropHolders(node);
    let mp = 0;
    let mq = 0;
    for (const [s, ...c] of cuts) {
      if (c[3]! > 0) {
        const e = this.newHolder(p, s!);
        for (let l = 0; l < NTIERS; l++) this.hold[e + H_C + l] = Math.min(c[l]!, k);
        mp = Math.max(mp, Math.min(c[3]!, k));
      }
      if (c[3]! > k) {
        const e = this.newHolder(q, s!);
        for (let l = 0; l < NTIERS; l++) this.hold[e + H_C + l] = Math.max(0, c[l]! - k);
        mq = Math.max(mq, c[3]! - k);
      }
    }
    this.nMax[p] = mp;
    this.nMax[q] = mq;
  }

  private alloc(k: number): number {
    let cls = Math.log2(MIN_ALLOC);
    while (1 << cls < k) cls++;
    const free = this.freeByClass[cls];
    const reuse = free?.pop();
    if (reuse !== undefined) {
      this.aUsed[reuse] = 0;
      this.aRefs[reuse] = 0;
      return reuse;
    }
    const cap = 1 << cls;
    const start = this.bHigh;
    this.bHigh += cap;
    this.ensureBlocks(this.bHigh);
    // Allocation ids are never given back: a freed allocation is reused whole, id and all.
    const id = this.aHigh++;
    if (id >= this.aStart.length) {
      this.aStart = grow(this.aStart, id + 1);
      this.aCap = grow(this.aCap, id + 1);
      this.aUsed = grow(this.aUsed, id + 1);
      this.aRefs = grow(this.aRefs, id + 1);
    }
    this.bAlloc.fill(id, start, start + cap);
    this.aStart[id] = start;
    this.aCap[id] = cap;
    this.aUsed[id] = 0;
    this.aRefs[id] = 0;
    return id;
  }

  /** Room for n positions: the block tables grow in place (README.md, "Layout", "Tables grown in place"). */
  private ensureBlocks(n: number): void {
    let cap = this.blo.length;
    if (n <= cap) return;
    while (cap < n) cap *= 2;
    // Address space to grow in place to the blocks the registered workers advertise (`expectBlocks`,
    // summed), and at least 16 times cap.
    let expected = 0;
    for (const e of this.expected.values()) expected += e;
    let res = cap * 16;
    while (res < expected) res *= 2;
    res = Math.min(1 << POS_BITS, res);
    this.blo = growTable(this.blo, cap, res);
    this.bhi = growTable(this.bhi, cap, res);
    this.bnode = growTable(this.bnode, cap, res);
    this.bAlloc = growTable(this.bAlloc, cap, res);
  }

  // ---------------------------------------------------------------------------------------------
  // Size and statistics

  /** Resident (publisher, block) pairs: the sum of every publisher's tree size. */
  get totalBlocks(): number {
    let t = 0;
    for (const p of this.publishers) t += p.map.size;
    return t;
  }

  stats(): IndexStats {
    const publishers: PublisherStats[] = this.publishers.map((p) => ({
      workerId: p.workerId,
      dpRank: p.dpRank,
      blocks: p.map.size,
      blocksByTier: { device: p.tierBlocks[0]!, host_pinned: p.tierBlocks[1]!, disk: p.tierBlocks[2]!, external: p.tierBlocks[3]! },
      suspect: p.suspect,
      lastEventId: p.lastEventId,
    }));
    let arrayBytes = 0;
    for (const a of [this.blo, this.bhi, this.bnode, this.aStart, this.aCap, this.aUsed, this.aRefs, this.nStart, this.nLen, this.nParent, this.nAlloc, this.nFirst, this.nNext, this.nPrev, this.nKids, this.nHold, this.nHCnt, this.nHCap, this.nMax, this.nMark, this.hold, this.counts]) {
      arrayBytes += a.byteLength;
    }
    for (const p of this.publishers) arrayBytes += p.map.bytes();
    return { blockSize: this.blockSize, publishers, totalBlocks: this.totalBlocks, nodes: this.livePositions, arrayBytes, counters: { ...this.counters } };
  }

  /** Positions handed out (the block tables' high mark) and compactions so far. */
  get room(): { positions: number; inTree: number; compactions: number } {
    return { positions: this.bHigh, inTree: this.livePositions, compactions: this.compactions };
  }
}
