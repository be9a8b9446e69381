/**
 * The publisher half of the prefix index: publishers (one per worker and dp rank) with their
 * block-id tables, event ids and suspect state, the counters, the match answers built from one
 * walk, and the snapshot image. The tree half (prefix-index.ts: runs of blocks) supplies how
 * stored and removed blocks change the tree, how a publisher is cleared, the match walk and the
 * tree dump; the two halves are split by file only, there is one implementation.
 */
import type { ExternalHash, KvEvent, KvStoredData, StorageTier, WorkerId } from '@vantage/types';
import { ExtMap, slotsFor, startSlots } from './ext-map';
import { corrupt, readImage, SnapshotError, writeImage, type PublisherHead } from './snapshot-io';
import { u64From } from './hash32';
import { DETACHED_REF, ROOT_REF, idOf, type TreeDump } from './tree-dump';
import type { ApplyResult, IndexCounters, MatchResult, PublisherStats, RecoverResult, SuspectInfo, SuspectReason, WorkerMatch } from './types';

export const NTIERS = 4;
export const EMPTY_U64 = new BigUint64Array(0);
/** What `applyStored` did. */
export const STORED_OK = 0;
export const STORED_UNKNOWN_PARENT = 1;
export const STORED_SELF_REFERENCING = 2;
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
export interface Publisher extends PublisherHead {
  map: ExtMap;
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
   * Match counts written by the tree's walk: leading blocks of publisher slot s on cumulative tier
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

  /**
   * Store a stored event's blocks: STORED_OK, STORED_UNKNOWN_PARENT, or (with `check`, before
   * changing anything) STORED_SELF_REFERENCING when it names one block id twice, its parent counted.
   */
  protected abstract applyStored(pub: Publisher, tier: number, data: KvStoredData, check: boolean): number;
  /** Remove blocks on one tier; returns the ids the publisher did not hold there. */
  protected abstract applyRemoved(pub: Publisher, tier: number, hashes: BigUint64Array): BigUint64Array;
  /** Drop every block of a publisher (its `cleared` event, resync, removal); returns how many. */
  protected abstract clearPublisher(pub: Publisher): number;
  /** Make room for publisher slot `slot` (a new highest slot). */
  protected abstract ensureSlot(slot: number): void;
  /** Fill `counts` for the request's local hashes (as int32 halves); returns the stride. */
  protected abstract walk(loc: Int32Array, n: number): number;
  /** The tree as a dump (tree-dump.ts), publishers in `publishers` order. */
  protected abstract dumpTree(): TreeDump;

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
        pub.suspect = null;
        c.clears++;
        break;
    }
    return { status: 'applied', rejection: null, blockOps, missedEvents: missed, unknownParent, unknownRemovals, suspect: pub.suspect };
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

  /**
   * Replace one publisher's state with what its worker's own index says it holds (README.md, `recover`).
   * A RangeError is thrown before anything changes when an event is another worker's or rank's, or invalid.
   */
  recover(workerId: WorkerId, dpRank: number, events: readonly KvEvent[], lastEventId: bigint, nowMs: number): RecoverResult {
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
    pub.suspect = null;
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

  // -------------------------------------------------------------------------
  // Rebuilding from a tree dump (compaction, restore), and the snapshot image
  // -------------------------------------------------------------------------

  /**
   * Rebuild the tree of `pubs` (empty publishers of this index, one per `d.entries`, in order) by
   * storing each publisher's blocks again, chain by chain, through `applyStored`: the result holds
   * exactly the dump's (publisher, block id, position, tiers), in fresh tables; how: README.md,
   * "Snapshot format (version 1)". Counters, event ids and suspect state are the caller's.
   */
  protected replayTree(d: TreeDump, pubs: readonly Publisher[]): void {
    this.rebuilding = true;
    try {
      this.replayPublishers(d, pubs);
    } finally {
      this.rebuilding = false;
    }
  }

  /** True while `replayTree` runs (the tree defers its own upkeep, compaction, until it ends). */
  protected rebuilding = false;

  private replayPublishers(d: TreeDump, pubs: readonly Publisher[]): void {
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
        if (own !== 0) return idOf(e, own - 1);
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
   * Rebuild `make(blockSize)` from snapshot bytes. Throws SnapshotError on a foreign image
   * (`bad_magic`), another version (`unsupported_version`) or a damaged or inconsistent one (`corrupt`).
   */
  protected static readImage<T extends IndexBase>(bytes: Uint8Array, make: (blockSize: number) => T): T {
    try {
      const img = readImage(bytes);
      const idx = make(img.blockSize);
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
  protected adopt(heads: readonly PublisherHead[], d: TreeDump): void {
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
}
