/**
 * A bounded set of recently seen request ids, each kept for a TTL.
 *
 * The Map's insertion order is the time order because the ledger's clock is
 * monotonic and re-adding an id moves it to the end; pruning therefore only
 * ever looks at the oldest entries, O(1) amortised per id. The capacity bound
 * protects memory when ids arrive faster than the TTL drains them; evictions
 * are reported so the loss of protection is visible.
 */
export class RecentIds<V> {
  readonly #entries = new Map<string, { atMs: number; value: V }>();

  constructor(
    private readonly ttlMs: number,
    private readonly capacity: number,
  ) {}

  /** Remember `id` at `atMs`; returns how many entries were evicted for capacity. */
  add(id: string, value: V, atMs: number): number {
    this.#entries.delete(id);
    this.#entries.set(id, { atMs, value });
    let evicted = 0;
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
      evicted++;
    }
    return evicted;
  }

  /** The value remembered for `id` if it has not outlived the TTL at `nowMs`. */
  get(id: string, nowMs: number): V | undefined {
    const e = this.#entries.get(id);
    if (e === undefined) return undefined;
    if (nowMs - e.atMs > this.ttlMs) {
      this.#entries.delete(id);
      return undefined;
    }
    return e.value;
  }

  has(id: string, nowMs: number): boolean {
    return this.get(id, nowMs) !== undefined;
  }

  delete(id: string): boolean {
    return this.#entries.delete(id);
  }

  /** Drop entries older than the TTL. */
  prune(nowMs: number): void {
    for (const [id, e] of this.#entries) {
      if (nowMs - e.atMs <= this.ttlMs) break;
      this.#entries.delete(id);
    }
  }
}
