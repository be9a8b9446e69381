import { mix2 } from './hash32';

/**
 * One (worker, dp rank)'s map from engine block id (`block_hash`, u64) to the
 * tree node it names and the tiers on which this publisher holds it.
 *
 * Hand-written open addressing over typed arrays instead of `Map<bigint, …>`:
 * a bigint key costs a heap allocation per lookup and ~80 bytes per entry,
 * which is most of the apply cost at millions of blocks per second. Linear
 * probing with backward-shift deletion keeps the table tombstone-free, so
 * heavy store/evict churn never degrades probe lengths.
 *
 * Slot layout (struct of arrays): keyLo, keyHi (the u64 halves), node (0 =
 * empty; node 0 is the tree root, which is never a value) and tiers (bit per
 * storage tier).
 */
export class ExtMap {
  keyLo: Uint32Array;
  keyHi: Uint32Array;
  node: Int32Array;
  tiers: Uint8Array;
  mask: number;
  size = 0;

  constructor(capacity = 16) {
    let cap = 16;
    while (cap < capacity) cap <<= 1;
    this.keyLo = new Uint32Array(cap);
    this.keyHi = new Uint32Array(cap);
    this.node = new Int32Array(cap);
    this.tiers = new Uint8Array(cap);
    this.mask = cap - 1;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  /** Slot holding key (lo, hi), or -1. */
  find(lo: number, hi: number): number {
    const mask = this.mask;
    const node = this.node;
    const kl = this.keyLo;
    const kh = this.keyHi;
    let i = mix2(lo, hi) & mask;
    for (;;) {
      if (node[i] === 0) return -1;
      if (kl[i] === lo && kh[i] === hi) return i;
      i = (i + 1) & mask;
    }
  }

  /** Insert a key known to be absent; returns its slot. */
  insert(lo: number, hi: number, nodeIdx: number, tiers: number): number {
    // Grow at 1/2 load: probes stay short and the arrays are small (13 bytes a slot).
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    const mask = this.mask;
    const node = this.node;
    let i = mix2(lo, hi) & mask;
    while (node[i] !== 0) i = (i + 1) & mask;
    this.keyLo[i] = lo;
    this.keyHi[i] = hi;
    node[i] = nodeIdx;
    this.tiers[i] = tiers;
    this.size++;
    return i;
  }

  /** Delete the entry at slot i (backward-shift: later entries of the probe run move up). */
  removeAt(i: number): void {
    const mask = this.mask;
    const node = this.node;
    const kl = this.keyLo;
    const kh = this.keyHi;
    const tr = this.tiers;
    let hole = i;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (node[j] === 0) break;
      const home = mix2(kl[j]!, kh[j]!) & mask;
      // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
      const between = hole <= j ? home > hole && home <= j : home > hole || home <= j;
      if (!between) {
        kl[hole] = kl[j]!;
        kh[hole] = kh[j]!;
        node[hole] = node[j]!;
        tr[hole] = tr[j]!;
        hole = j;
      }
    }
    node[hole] = 0;
    tr[hole] = 0;
    this.size--;
  }

  private grow(): void {
    const oLo = this.keyLo;
    const oHi = this.keyHi;
    const oNode = this.node;
    const oTiers = this.tiers;
    const cap = (this.mask + 1) * 2;
    this.keyLo = new Uint32Array(cap);
    this.keyHi = new Uint32Array(cap);
    this.node = new Int32Array(cap);
    this.tiers = new Uint8Array(cap);
    this.mask = cap - 1;
    this.size = 0;
    for (let i = 0; i < oNode.length; i++) {
      const n = oNode[i]!;
      if (n !== 0) this.insert(oLo[i]!, oHi[i]!, n, oTiers[i]!);
    }
  }

  /** Drop every entry and release the arrays back to the minimum size. */
  reset(): void {
    this.keyLo = new Uint32Array(16);
    this.keyHi = new Uint32Array(16);
    this.node = new Int32Array(16);
    this.tiers = new Uint8Array(16);
    this.mask = 15;
    this.size = 0;
  }

  /** Bytes held by the table's arrays. */
  bytes(): number {
    return (this.mask + 1) * 13;
  }
}
