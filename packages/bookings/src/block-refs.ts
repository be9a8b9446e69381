/**
 * A rank's active-block map: sequence hash (u64) → number of live bookings holding it.
 *
 * Open addressing over one Int32Array instead of `Map<bigint, number>`: reading a hash out of a
 * BigUint64Array as a bigint allocates, and `prepareChain` probes it for the ranks of the pool on
 * every observe. Here keys are the u64's (lo, hi) halves as int32, read from an Int32Array view of
 * the caller's BigUint64Array, so a lookup allocates nothing. Slots are [keyLo, keyHi, count];
 * count 0 marks an empty slot. Linear probing with backward-shift deletion: no tombstones, so
 * booking churn never lengthens probes. Keys pass a full avalanche (murmur3's finaliser), with a
 * per-process random seed so crafted hashes cannot be chosen to collide.
 */
const SLOT = 3;
const SEED = (Math.random() * 0x1_0000_0000) | 0;

function mix(lo: number, hi: number): number {
  let h = (lo ^ SEED) ^ Math.imul(hi ^ (hi >>> 16), 0x85ebca6b);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

/** Int32 view of a BigUint64Array's bytes: element 2i is value i's low half, 2i+1 its high half (little-endian host). */
export function halves(v: BigUint64Array): Int32Array {
  return new Int32Array(v.buffer, v.byteOffset, v.length * 2);
}

/**
 * What both tables share: open addressing over one Int32Array of `width`-int slots whose third int is
 * the count (0: empty), grown to fit a whole booking at once (`reserve`) and shrunk once after a run of
 * drops (`settle`), never slot by slot.
 */
abstract class SlotTable {
  protected t: Int32Array;
  protected mask = 15;
  /** Distinct keys held. */
  size = 0;

  protected constructor(private readonly width: number) {
    this.t = new Int32Array(16 * width);
  }

  /** Slots in the table (a power of two). */
  get capacity(): number {
    return this.mask + 1;
  }

  /** Room for `n` more keys at most half full, in one resize (before adding a booking's blocks). */
  reserve(n: number): void {
    const cap = capacityFor(this.size + n);
    if (cap > this.mask + 1) this.resize(cap);
  }

  /** Shrink once when mostly empty (after a booking's blocks were dropped), so a burst does not keep its memory. */
  settle(): void {
    if (this.mask > 15 && this.size * 8 < this.mask + 1) this.resize(capacityFor(this.size));
  }

  protected resize(cap: number): void {
    this.t = rehash(this.t, cap, this.width);
    this.mask = cap - 1;
  }
}

export class BlockRefs extends SlotTable {
  constructor() {
    super(SLOT);
  }

  /** Slot base of (lo, hi), or -1. */
  private find(lo: number, hi: number): number {
    const t = this.t;
    const mask = this.mask;
    let i = mix(lo, hi) & mask;
    for (;;) {
      const b = i * SLOT;
      if (t[b + 2] === 0) return -1;
      if (t[b] === lo && t[b + 1] === hi) return b;
      i = (i + 1) & mask;
    }
  }

  has(lo: number, hi: number): boolean {
    return this.find(lo, hi) >= 0;
  }

  /** Reference count of (lo, hi); 0 when absent. */
  count(lo: number, hi: number): number {
    const b = this.find(lo, hi);
    return b < 0 ? 0 : this.t[b + 2]!;
  }

  /** Add one reference; true when the key was not held before. */
  add(lo: number, hi: number): boolean {
    const b = this.find(lo, hi);
    if (b >= 0) {
      this.t[b + 2]!++;
      return false;
    }
    // Grow at 1/2 load: probes stay short.
    if ((this.size + 1) * 2 > this.mask + 1) this.resize((this.mask + 1) * 2);
    const t = this.t;
    const mask = this.mask;
    let i = mix(lo, hi) & mask;
    while (t[i * SLOT + 2] !== 0) i = (i + 1) & mask;
    const nb = i * SLOT;
    t[nb] = lo;
    t[nb + 1] = hi;
    t[nb + 2] = 1;
    this.size++;
    return true;
  }

  /**
   * Drop one reference and return the references left (0: the key is gone), or -1 when it was not held.
   * The table never shrinks here: call `settle()` after a run of drops.
   */
  drop(lo: number, hi: number): number {
    const b = this.find(lo, hi);
    if (b < 0) return -1;
    const t = this.t;
    if (t[b + 2]! > 1) return --t[b + 2]!;
    removeSlot(t, this.mask, b, SLOT);
    this.size--;
    return 0;
  }
}

/** The smallest table (a power of two, at least 16 slots) holding `keys` at most half full. */
function capacityFor(keys: number): number {
  let cap = 16;
  while (cap < keys * 2) cap *= 2;
  return cap;
}

/**
 * Backward-shift deletion of the slot at base `b` in a table of `width`-int slots laid out as
 * [keyLo, keyHi, count, ...] (count 0: empty): later entries of its probe run move up into the
 * hole, so no tombstone is left. The caller updates its size.
 */
function removeSlot(t: Int32Array, mask: number, b: number, width: number): void {
  let hole = b / width;
  let j = hole;
  for (;;) {
    j = (j + 1) & mask;
    const jb = j * width;
    if (t[jb + 2] === 0) break;
    const home = mix(t[jb]!, t[jb + 1]!) & mask;
    // The entry at j may move into the hole unless its home lies cyclically in (hole, j].
    const between = hole <= j ? home > hole && home <= j : home > hole || home <= j;
    if (!between) {
      const hb = hole * width;
      for (let k = 0; k < width; k++) t[hb + k] = t[jb + k]!;
      hole = j;
    }
  }
  t[hole * width + 2] = 0;
}

/** A new table of `cap` slots (a power of two) of `width` ints holding every entry of `old`. */
function rehash(old: Int32Array, cap: number, width: number): Int32Array {
  const t = new Int32Array(cap * width);
  const mask = cap - 1;
  for (let b = 0; b < old.length; b += width) {
    if (old[b + 2] === 0) continue;
    let i = mix(old[b]!, old[b + 1]!) & mask;
    while (t[i * width + 2] !== 0) i = (i + 1) & mask;
    // Copied int by int: a subarray per entry would allocate an object for each one.
    const nb = i * width;
    for (let k = 0; k < width; k++) t[nb + k] = old[b + k]!;
  }
  return t;
}

/** Ranks a `HolderTable` can name in its per-key masks (two int32 words). */
export const HOLDER_MASK_RANKS = 64;
const HSLOT = 5;

/**
 * The ledger-wide sequence hash → holders table: per key, how many ranks hold it (`count`) and,
 * for ranks given a mask bit (0..63), which ones (two int32 words). Same open addressing, hashing
 * and backward-shift deletion as `BlockRefs`; slots are [keyLo, keyHi, count, mask0, mask1].
 * A rank without a bit (-1) is counted but not named.
 */
export class HolderTable extends SlotTable {
  constructor() {
    super(HSLOT);
  }

  /** Slot base of (lo, hi), or -1. Read `countAt`, `mask0At`, `mask1At` from it. */
  find(lo: number, hi: number): number {
    const t = this.t;
    const mask = this.mask;
    let i = mix(lo, hi) & mask;
    for (;;) {
      const b = i * HSLOT;
      if (t[b + 2] === 0) return -1;
      if (t[b] === lo && t[b + 1] === hi) return b;
      i = (i + 1) & mask;
    }
  }

  countAt(b: number): number {
    return b < 0 ? 0 : this.t[b + 2]!;
  }

  mask0At(b: number): number {
    return b < 0 ? 0 : this.t[b + 3]!;
  }

  mask1At(b: number): number {
    return b < 0 ? 0 : this.t[b + 4]!;
  }

  /** One more rank holds (lo, hi); `bit` names it in the mask (-1: counted only). */
  add(lo: number, hi: number, bit: number): void {
    let b = this.find(lo, hi);
    if (b < 0) {
      if ((this.size + 1) * 2 > this.mask + 1) this.resize((this.mask + 1) * 2);
      const t = this.t;
      const mask = this.mask;
      let i = mix(lo, hi) & mask;
      while (t[i * HSLOT + 2] !== 0) i = (i + 1) & mask;
      b = i * HSLOT;
      t[b] = lo;
      t[b + 1] = hi;
      t[b + 3] = 0;
      t[b + 4] = 0;
      this.size++;
    }
    const t = this.t;
    t[b + 2]!++;
    if (bit >= 0) t[b + 3 + (bit >>> 5)]! |= 1 << (bit & 31);
  }

  /** A rank stopped holding (lo, hi): returns the ranks left holding it, or -1 when the key was not held. Call `settle()` after a run of drops. */
  drop(lo: number, hi: number, bit: number): number {
    const b = this.find(lo, hi);
    if (b < 0) return -1;
    const t = this.t;
    if (bit >= 0) t[b + 3 + (bit >>> 5)]! &= ~(1 << (bit & 31));
    if (t[b + 2]! > 1) return --t[b + 2]!;
    removeSlot(t, this.mask, b, HSLOT);
    this.size--;
    return 0;
  }
}
