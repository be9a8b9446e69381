import { mix2 } from './hash32';

/**
 * One (worker, dp rank)'s map from engine block id (`block_hash`, u64) to the tree position it
 * names and the tiers on which this publisher holds it.
 *
 * Hand-written open addressing over one Int32Array instead of `Map<bigint, …>`: a bigint key
 * costs an allocation per lookup and a heap object per entry, which dominated apply cost. Each
 * slot is three int32s side by side [keyLo, keyHi, value], value = position | tiers << 28 (positions
 * stay below 2^28, tiers are a 4-bit mask), so a probe touches one cache line and a slot is 12 bytes: the
 * table is larger than cache and every lookup of a random engine hash is a memory miss, so its
 * size (cache and TLB reach) is what the apply rate depends on. Linear probing with
 * backward-shift deletion keeps the table free of tombstones, so store/evict churn never lengthens
 * probes. Value 0 marks an empty slot (tiers are never 0).
 */
export const SLOT = 3;
// Slot layout: hash low half at offset 0, high half at K_HI, value at K_VAL.
const K_HI = 1;
export const K_VAL = 2;
/** Highest load (entries / slots) before the table doubles. */
const LOAD_NUM = 7;
const LOAD_DEN = 10;

/** Entries a table of `slots` slots holds before it doubles. */
function limitOf(slots: number): number {
  return Math.floor((slots * LOAD_NUM) / LOAD_DEN);
}

/** Slots needed to hold `entries` entries without growing. */
export function slotsFor(entries: number): number {
  let cap = 16;
  while (cap * LOAD_NUM < entries * LOAD_DEN) cap <<= 1;
  return cap;
}

export class ExtMap {
  /** Slots of [keyLo, keyHi, value]; slot index s addresses t[s * SLOT + field]. */
  t: Int32Array;
  mask: number;
  size = 0;
  /** Entries allowed before the next doubling. */
  limit: number;
  /**
   * Slots the table can double to in place: `buf` holds that many, `t` is a view of its first
   * mask + 1 (0: no reservation, `t` is `buf` and a doubling allocates). A table reserved for a
   * worker's whole cache (`expectBlocks`) starts at half the reservation, so while the cache is
   * less than about a third full the index touches only that half (a large allocation fresh from
   * the system is faulted in page by page as it is first touched: fewer page faults, and less
   * cache and TLB reach), where a table of the reserved size scatters its entries over all of it.
   */
  private reserved: number;
  private buf: Int32Array;

  /** A table of `slots` slots (rounded up to a power of two) that doubles in place up to `reserved` slots. */
  constructor(slots = 16, reserved = 0) {
    let cap = 16;
    while (cap < slots) cap <<= 1;
    let res = 0;
    if (reserved > cap) for (res = cap; res < reserved; ) res <<= 1;
    this.buf = new Int32Array(Math.max(res, cap) * SLOT);
    this.t = res > 0 ? this.buf.subarray(0, cap * SLOT) : this.buf;
    this.reserved = res;
    this.mask = cap - 1;
    this.limit = limitOf(cap);
  }

  /** Base offset of the slot holding key (lo, hi), or a negative number. Keys are the u64 halves as int32. */
  find(lo: number, hi: number): number {
    return this.probeFrom(mix2(lo, hi) & this.mask, lo, hi);
  }

  /**
   * find from the key's home slot (mix2(lo, hi) & mask), but on a miss returns where the key would go: the slot base of (lo, hi), or -(b + 1)
   * for the base b of the empty slot its probe ends on (insert there: room reserved by the caller).
   */
  probeFrom(home: number, lo: number, hi: number): number {
    const t = this.t;
    const mask = this.mask;
    let i = home;
    for (;;) {
      const b = i * SLOT;
      if (t[b + K_VAL] === 0) return -(b + 1);
      if (t[b] === lo && t[b + K_HI] === hi) return b;
      i = (i + 1) & mask;
    }
  }

  /** Insert a key known to be absent (room reserved by the caller). */
  insertFresh(lo: number, hi: number, value: number): void {
    const t = this.t;
    const mask = this.mask;
    let i = mix2(lo, hi) & mask;
    while (t[i * SLOT + K_VAL] !== 0) i = (i + 1) & mask;
    const b = i * SLOT;
    t[b] = lo;
    t[b + K_HI] = hi;
    t[b + K_VAL] = value;
    this.size++;
  }

  /** Delete the entry at slot base b; later entries of its probe run shift back into the hole. */
  removeAt(b: number): void {
    const t = this.t;
    const mask = this.mask;
    let hole = b / SLOT;
    let j = hole;
    for (;;) {
      j = (j + 1) & mask;
      const jb = j * SLOT;
      if (t[jb + K_VAL] === 0) break;
      const home = mix2(t[jb]!, t[jb + K_HI]!) & mask;
      // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
      const between = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!between) {
        const hb = hole * SLOT;
        t[hb] = t[jb]!;
        t[hb + K_HI] = t[jb + K_HI]!;
        t[hb + K_VAL] = t[jb + K_VAL]!;
        hole = j;
      }
    }
    const hb = hole * SLOT;
    t[hb] = 0;
    t[hb + K_HI] = 0;
    t[hb + K_VAL] = 0;
    this.size--;
  }

  /** Let the table double in place up to `slots` slots (its contents and slot count are unchanged). */
  reserveSlots(slots: number): void {
    const cap = this.mask + 1;
    if (slots <= Math.max(cap, this.reserved)) return;
    let res = cap;
    while (res < slots) res <<= 1;
    this.buf = new Int32Array(res * SLOT);
    this.buf.set(this.t);
    this.t = this.buf.subarray(0, cap * SLOT);
    this.reserved = res;
    this.limit = limitOf(cap);
  }

  /** Make room for `k` more entries (doubling as often as needed). */
  reserve(k: number): void {
    if (this.size + k <= this.limit) return;
    let cap = this.mask + 1;
    while (limitOf(cap) < this.size + k) cap <<= 1;
    let old = this.t;
    if (cap <= this.reserved) {
      // Within the reservation: the entries move out, and back in over the grown table.
      old = old.slice();
      this.t.fill(0);
      this.t = this.buf.subarray(0, cap * SLOT);
    } else {
      this.t = this.buf = new Int32Array(cap * SLOT);
      this.reserved = 0;
    }
    this.mask = cap - 1;
    this.limit = limitOf(cap);
    this.size = 0;
    for (let b = 0; b < old.length; b += SLOT) {
      const v = old[b + K_VAL]!;
      if (v !== 0) this.insertFresh(old[b]!, old[b + K_HI]!, v);
    }
  }

  /** Bytes allocated: the whole reservation (the part the table has not reached yet included). */
  bytes(): number {
    return this.buf.byteLength;
  }
}

/** Written by touchHomes so the engine cannot drop its loads as unused. */
const sink = { touched: 0 };

/**
 * The home slot in `map` of each of the n block ids in `ext` (int32 halves), into `homes` (returned;
 * a larger array when it is too short), then every home read once before any is used. Engine ids
 * are random, so each home is a cache miss; issued back to back from this short loop the misses
 * overlap (the loads do not depend on each other), where an apply loop, long and branchy, would
 * wait for them one at a time. The homes are hashed in a loop of their own first, so the reading
 * loop is little more than the loads and more of them fit in flight.
 */
export function touchHomes(map: ExtMap, ext: Int32Array, n: number, homes: Int32Array): Int32Array {
  const h = homes.length >= n ? homes : new Int32Array(Math.max(n, 2 * homes.length));
  const mask = map.mask;
  for (let i = 0; i < n; i++) h[i] = mix2(ext[2 * i]!, ext[2 * i + 1]!) & mask;
  const t = map.t;
  let acc = 0;
  for (let i = 0; i < n; i++) acc |= t[h[i]! * SLOT + K_VAL]!;
  sink.touched = acc;
  return h;
}
