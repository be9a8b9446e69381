/**
 * The prefix index: Dynamo's radix tree over local block hashes, path-compressed into runs of
 * blocks (README, "Layout"), with per-publisher block-id tables, tiers, loss detection, match and
 * exact snapshots (the publisher half is index-base.ts).
 */
import type { KvStoredData } from '@vantage/types';
import { K_VAL, SLOT, touchHomes } from './ext-map';
import { grow, growableTable, growTable } from './growable';
import { mix2, u64Hi, u64Lo } from './hash32';
import { EMPTY_U64, IndexBase, i32View, NTIERS, STORED_OK, STORED_SELF_REFERENCING, STORED_UNKNOWN_PARENT } from './index-base';
import { RepeatCheck } from './repeats';
import type { Publisher } from './index-base';
import { DETACHED_REF, PositionList, ROOT_REF, entriesOf, type TreeDump } from './tree-dump';
import type { IndexStats } from './types';

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

export class PrefixIndex extends IndexBase {
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
  constructor(blockSize: number) {
    super(blockSize);
    this.nParent[ROOT] = NONE;
  }

  protected ensureSlot(slot: number): void {
    if (slot < this.slotCap) return;
    const cap = (this.slotCap *= 2);
    this.counts = new Int32Array(NTIERS * cap);
    this.lvl = new Int32Array(cap);
    this.seen = new Int32Array(cap);
    this.act = new Int32Array(cap);
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

  protected applyStored(pub: Publisher, tier: number, data: KvStoredData, check: boolean): number {
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

  protected applyRemoved(pub: Publisher, tier: number, hashes: BigUint64Array): BigUint64Array {
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

  protected clearPublisher(pub: Publisher): number {
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

  /** The tree as a dump (tree-dump.ts): each node's run in order, nodes in preorder. */
  protected dumpTree(): TreeDump {
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
    return out.finish(
      this.publishers.map((p) => {
        const multi = this.multi[p.slot] ?? null;
        const bitsOf = (g: number, tiers: number): number => {
          const m = multi?.get(g);
          return m === undefined ? tiers : m & 15;
        };
        return entriesOf(p.map.t, p.map.size, POS_BITS, posOf, bitsOf);
      }),
    );
  }

  /** Rebuild an index from snapshot bytes. Throws SnapshotError on a foreign, corrupt or other-version image. */
  static restore(bytes: Uint8Array): PrefixIndex {
    return IndexBase.readImage(bytes, (bs) => new PrefixIndex(bs));
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
    const res = this.reservation(cap, 0, 1 << POS_BITS);
    this.blo = growTable(this.blo, cap, res);
    this.bhi = growTable(this.bhi, cap, res);
    this.bnode = growTable(this.bnode, cap, res);
    this.bAlloc = growTable(this.bAlloc, cap, res);
  }

  // ---------------------------------------------------------------------------------------------
  // Match

  /**
   * Walks the request down the runs from the root (README.md, "Layout", "Match"); a publisher leaves
   * a tier set where its holding ends before the run does (or the request leaves the run).
   */
  protected walk(loc: Int32Array, n: number): number {
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
  // Size and statistics

  get nodeCount(): number {
    return this.livePositions;
  }

  stats(): IndexStats {
    const publishers = this.publisherStats();
    let arrayBytes = 0;
    for (const a of [this.blo, this.bhi, this.bnode, this.aStart, this.aCap, this.aUsed, this.aRefs, this.nStart, this.nLen, this.nParent, this.nAlloc, this.nFirst, this.nNext, this.nPrev, this.nKids, this.nHold, this.nHCnt, this.nHCap, this.nMax, this.nMark, this.hold, this.counts]) {
      arrayBytes += a.byteLength;
    }
    for (const p of this.publishers) arrayBytes += p.map.bytes();
    return { blockSize: this.blockSize, publishers, totalBlocks: this.totalBlocks, nodes: this.nodeCount, arrayBytes, counters: { ...this.counters } };
  }

  /** Positions handed out (the block tables' high mark) and compactions so far. */
  get room(): { positions: number; inTree: number; compactions: number } {
    return { positions: this.bHigh, inTree: this.livePositions, compactions: this.compactions };
  }
}
