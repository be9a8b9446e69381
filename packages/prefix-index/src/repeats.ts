/** Up to this many ids (blocks plus parent) are compared pairwise; more go through the scratch table. */
const PAIRWISE_MAX = 8;

/**
 * Whether a stored event names one block id twice, counting its parent among them: Dynamo's rule
 * for a self-referencing store (`dynamo-kv-router` `zmq_wire/convert.rs`: "all block hashes
 * (including parent) must be unique"). `ext` holds the event's block ids as int32 halves (lo at
 * 2i, hi at 2i+1), `n` of them, and `homes` a hash of each (their home slots in the publisher's
 * block-id table, which the apply computes anyway: equal ids have equal homes). Short events are
 * compared pairwise; longer ones go through one open-addressing scratch table keyed by the homes,
 * reused from event to event (cleared per use, allocated again only when a longer event needs more
 * room), so a block costs a load, a compare and a store.
 */
export class RepeatCheck {
  private table = new Int32Array(0);

  /**
   * `parentHome` is the parent's home (as `homes` are computed), or -1 for an event without a
   * parent; `parentLo`, `parentHi` its id's halves.
   */
  has(ext: Int32Array, homes: Int32Array, n: number, parentHome: number, parentLo: number, parentHi: number): boolean {
    if (n + (parentHome >= 0 ? 1 : 0) <= PAIRWISE_MAX) {
      for (let i = 0; i < n; i++) {
        const lo = ext[2 * i]!;
        const hi = ext[2 * i + 1]!;
        if (parentHome >= 0 && lo === parentLo && hi === parentHi) return true;
        for (let j = i + 1; j < n; j++) if (ext[2 * j] === lo && ext[2 * j + 1] === hi) return true;
      }
      return false;
    }
    // Slots hold block index + 1 (0: empty; n + 1: the parent). Equal ids have equal homes, so the
    // ids themselves are read only when two homes meet.
    let cap = 64;
    while (cap < 2 * n + 2) cap *= 2;
    if (this.table.length < cap) this.table = new Int32Array(cap);
    const t = this.table;
    t.fill(0, 0, cap);
    const mask = cap - 1;
    if (parentHome >= 0) t[parentHome & mask] = n + 1;
    for (let i = 0; i < n; i++) {
      const h = homes[i]!;
      let s = h & mask;
      for (;;) {
        const v = t[s]!;
        if (v === 0) {
          t[s] = i + 1;
          break;
        }
        if (v === n + 1 ? ext[2 * i] === parentLo && ext[2 * i + 1] === parentHi : homes[v - 1] === h && ext[2 * (v - 1)] === ext[2 * i] && ext[2 * (v - 1) + 1] === ext[2 * i + 1]) return true;
        s = (s + 1) & mask;
      }
    }
    return false;
  }
}
