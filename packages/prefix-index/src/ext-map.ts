import { mix2 } from './hash32';

/**
 * One (worker, dp rank)'s map from engine block id (`block_hash`, u64) to the tree node it names
 * and the tiers on which this publisher holds it.
 *
 * Hand-written open addressing over one Int32Array instead of `Map<bigint, …>`: a bigint key
 * costs an allocation per lookup and ~80 bytes per entry, which dominated apply cost. Each slot is
 * four int32s side by side [keyLo, keyHi, node, tiers], so a probe touches one cache line (the
 * table is far larger than cache; a lookup of a random engine hash is one memory miss). Linear
 * probing with backward-shift deletion keeps the table free of tombstones, so store/evict churn
 * never lengthens probes. node 0 marks an empty slot (node 0 is the root, never a value).
 */
export const SLOT = 4;
export const K_LO = 0;
export const K_HI = 1;
export const K_NODE = 2;
export const K_TIERS = 3;

export class ExtMap {
  /** Slots of [keyLo, keyHi, node, tiers]; a slot index s addresses t[s * SLOT + field]. */
  t: Int32Array;
  mask: number;
  size = 0;

  constructor(capacity = 16) {
    let cap = 16;
    while (cap < capacity) cap <<= 1;
    this.t = new Int32Array(cap * SLOT);
    this.mask = cap - 1;
  }

  /** Base offset of the slot holding key (lo, hi), or -1. Keys are the u64 halves as int32. */
  find(lo: number, hi: number): number {
    const t = this.t;
    const mask = this.mask;
    let i = mix2(lo, hi) & mask;
    for (;;) {
      const b = i * SLOT;
      if (t[b + K_NODE] === 0) return -1;
      if (t[b] === lo && t[b + K_HI] === hi) return b;
      i = (i + 1) & mask;
    }
  }

  /** Insert a key known to be absent; returns its slot base. */
  insert(lo: number, hi: number, node: number, tiers: number): number {
    // Grow at 1/2 load: probes stay short and a slot is only 16 bytes.
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    const t = this.t;
    const mask = this.mask;
    let i = mix2(lo, hi) & mask;
    while (t[i * SLOT + K_NODE] !== 0) i = (i + 1) & mask;
    const b = i * SLOT;
    t[b] = lo;
    t[b + K_HI] = hi;
    t[b + K_NODE] = node;
    t[b + K_TIERS] = tiers;
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
      if (t[jb + K_NODE] === 0) break;
      const home = mix2(t[jb]!, t[jb + K_HI]!) & mask;
      // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
      const between = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!between) {
        const hb = hole * SLOT;
        t[hb] = t[jb]!;
        t[hb + K_HI] = t[jb + K_HI]!;
        t[hb + K_NODE] = t[jb + K_NODE]!;
        t[hb + K_TIERS] = t[jb + K_TIERS]!;
        hole = j;
      }
    }
    const hb = hole * SLOT;
    t[hb + K_NODE] = 0;
    t[hb + K_TIERS] = 0;
    this.size--;
  }

  grow(): void {
    const old = this.t;
    const cap = (this.mask + 1) * 2;
    this.t = new Int32Array(cap * SLOT);
    this.mask = cap - 1;
    this.size = 0;
    for (let b = 0; b < old.length; b += SLOT) {
      const n = old[b + K_NODE]!;
      if (n !== 0) this.insert(old[b]!, old[b + K_HI]!, n, old[b + K_TIERS]!);
    }
  }

  bytes(): number {
    return this.t.byteLength;
  }
}
