/**
 * A binary min-heap of timed items for the discrete-event replay. Items with
 * equal time come out in insertion order (a sequence number breaks ties), so
 * the replay is deterministic.
 */
interface Timed {
  readonly t: number;
}

export class EventHeap<T extends Timed> {
  private readonly items: T[] = [];
  private readonly seqs: number[] = [];
  private seq = 0;

  /** Time of the earliest item, Infinity when empty. */
  peekTime(): number {
    return this.items.length > 0 ? this.items[0]!.t : Infinity;
  }

  push(item: T): void {
    const items = this.items;
    const seqs = this.seqs;
    let i = items.length;
    items.push(item);
    seqs.push(this.seq++);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  pop(): T | undefined {
    const items = this.items;
    if (items.length === 0) return undefined;
    const top = items[0]!;
    const lastItem = items.pop()!;
    const lastSeq = this.seqs.pop()!;
    if (items.length > 0) {
      items[0] = lastItem;
      this.seqs[0] = lastSeq;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && this.less(l, m)) m = l;
        if (r < items.length && this.less(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }

  private less(a: number, b: number): boolean {
    const ta = this.items[a]!.t;
    const tb = this.items[b]!.t;
    return ta < tb || (ta === tb && this.seqs[a]! < this.seqs[b]!);
  }

  private swap(a: number, b: number): void {
    const items = this.items;
    const seqs = this.seqs;
    const x = items[a]!;
    items[a] = items[b]!;
    items[b] = x;
    const s = seqs[a]!;
    seqs[a] = seqs[b]!;
    seqs[b] = s;
  }
}
