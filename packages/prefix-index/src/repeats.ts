import { mix2 } from './hash32';

/** Up to this many ids (blocks plus parent) are compared pairwise; more go through the scratch table. */
const PAIRWISE_MAX = 16;

/**
 * Whether a stored event names one block id twice, counting its parent among them: Dynamo's rule
 * for a self-referencing store (`dynamo-kv-router` `zmq_wire/convert.rs`: "all block hashes
 * (including parent) must be unique"). `ext` holds the event's block ids as int32 halves (lo at
 * 2i, hi at 2i+1), `n` of them. Short events are compared pairwise; longer ones go through one
 * open-addressing scratch table reused from event to event (cleared per use, never allocated
 * again unless a longer event needs more room).
 */
export class RepeatCheck {
  private table = new Int32Array(0);

  has(ext: Int32Array, n: number, hasParent: boolean, parentLo: number, parentHi: number): boolean {
    if (n + (hasParent ? 1 : 0) <= PAIRWISE_MAX) {
      for (let i = 0; i < n; i++) {
        const lo = ext[2 * i]!;
        const hi = ext[2 * i + 1]!;
        if (hasParent && lo === parentLo && hi === parentHi) return true;
        for (let j = i + 1; j < n; j++) if (ext[2 * j] === lo && ext[2 * j + 1] === hi) return true;
      }
      return false;
    }
    // Slots hold block index + 1 (0: empty); the parent, if any, is compared directly.
    let cap = 64;
    while (cap < 2 * n) cap *= 2;
    if (this.table.length < cap) this.table = new Int32Array(cap);
    const t = this.table;
    t.fill(0, 0, cap);
    const mask = cap - 1;
    for (let i = 0; i < n; i++) {
      const lo = ext[2 * i]!;
      const hi = ext[2 * i + 1]!;
      if (hasParent && lo === parentLo && hi === parentHi) return true;
      let s = mix2(lo, hi) & mask;
      for (;;) {
        const v = t[s]!;
        if (v === 0) {
          t[s] = i + 1;
          break;
        }
        if (ext[2 * (v - 1)] === lo && ext[2 * (v - 1) + 1] === hi) return true;
        s = (s + 1) & mask;
      }
    }
    return false;
  }
}
