import { mix2 } from './hash32';

/**
 * One (worker, dp rank)'s map from engine block id (`block_hash`, u64) to the tree node it names
 * and the tiers on which this publisher holds it.
 *
 * Hand-written open addressing over one Int32Array instead of `Map<bigint, …>`: a bigint key
 * costs an allocation per lookup and a heap object per entry, which dominated apply cost. Each
 * slot is three int32s side by side [keyLo, keyHi, value], value = node | tiers << 28 (node ids
 * stay below 2^28, tiers are a 4-bit mask), so a probe touches one cache line and a slot is 12 bytes: the
 * table is larger than cache and every lookup of a random engine hash is a memory miss, so its
 * size (cache and TLB reach) is what the apply rate depends on. Linear probing with
 * backward-shift deletion keeps the table free of tombstones, so store/evict churn never lengthens
 * probes. Value 0 marks an empty slot (node 0 is the root, never a value, and tiers are never 0).
 */
export const SLOT = 3;
export const K_LO = 0;
export const K_HI = 1;
export const K_VAL = 2;
/** Node ids are below 2^28: the top four bits of a value hold the tier mask. */
export const NODE_BITS = 28;
export const NODE_MASK = (1 << NODE_BITS) - 1;
/** Highest load (entries / slots) before the table doubles. */
const LOAD_NUM = 7;
const LOAD_DEN = 10;

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

  constructor(slots = 16) {
    let cap = 16;
    while (cap < slots) cap <<= 1;
    this.t = new Int32Array(cap * SLOT);
    this.mask = cap - 1;
    this.limit = Math.floor((cap * LOAD_NUM) / LOAD_DEN);
  }

  /** Base offset of the slot holding key (lo, hi), or -1. Keys are the u64 halves as int32. */
  find(lo: number, hi: number): number {
    return this.findFrom(mix2(lo, hi) & this.mask, lo, hi);
  }

  /** find, with the key's home slot (mix2(lo, hi) & mask) already computed. */
  findFrom(home: number, lo: number, hi: number): number {
    const t = this.t;
    const mask = this.mask;
    let i = home;
    for (;;) {
      const b = i * SLOT;
      if (t[b + K_VAL] === 0) return -1;
      if (t[b] === lo && t[b + K_HI] === hi) return b;
      i = (i + 1) & mask;
    }
  }

  /** Insert a key known to be absent (room reserved by the caller); returns its slot base. */
  insertFresh(lo: number, hi: number, value: number): number {
    const t = this.t;
    const mask = this.mask;
    let i = mix2(lo, hi) & mask;
    while (t[i * SLOT + K_VAL] !== 0) i = (i + 1) & mask;
    const b = i * SLOT;
    t[b] = lo;
    t[b + K_HI] = hi;
    t[b + K_VAL] = value;
    this.size++;
    return b;
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

  /** Make room for `k` more entries (doubling as often as needed). */
  reserve(k: number): void {
    if (this.size + k <= this.limit) return;
    let cap = this.mask + 1;
    while (Math.floor((cap * LOAD_NUM) / LOAD_DEN) < this.size + k) cap <<= 1;
    const old = this.t;
    this.t = new Int32Array(cap * SLOT);
    this.mask = cap - 1;
    this.limit = Math.floor((cap * LOAD_NUM) / LOAD_DEN);
    this.size = 0;
    for (let b = 0; b < old.length; b += SLOT) {
      const v = old[b + K_VAL]!;
      if (v !== 0) this.insertFresh(old[b]!, old[b + K_HI]!, v);
    }
  }

  bytes(): number {
    return this.t.byteLength;
  }
}
