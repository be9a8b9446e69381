/**
 * A bounded set of recently seen request ids, each kept for a TTL.
 *
 * The Map's insertion order is the time order because the ledger's clock is
 * monotonic and re-adding an id moves it to the end; pruning therefore only
 * ever looks at the oldest entries, O(1) amortised per id. The capacity bound
 * protects memory when ids arrive faster than the TTL drains them; evictions
 * are reported so the loss of protection is visible.
 */
export class RecentIds {
  /** id → when it was remembered. */
  readonly #atMs = new Map<string, number>();

  constructor(
    private readonly ttlMs: number,
    private readonly capacity: number,
  ) {}

  /** Remember `id` at `atMs`; returns how many entries were evicted for capacity. */
  add(id: string, atMs: number): number {
    this.#atMs.delete(id);
    this.#atMs.set(id, atMs);
    let evicted = 0;
    while (this.#atMs.size > this.capacity) {
      const oldest = this.#atMs.keys().next();
      if (oldest.done === true) break;
      this.#atMs.delete(oldest.value);
      evicted++;
    }
    return evicted;
  }

  /** Whether `id` is remembered and has not outlived the TTL at `nowMs`. */
  has(id: string, nowMs: number): boolean {
    const atMs = this.#atMs.get(id);
    if (atMs === undefined) return false;
    if (nowMs - atMs > this.ttlMs) {
      this.#atMs.delete(id);
      return false;
    }
    return true;
  }

  delete(id: string): boolean {
    return this.#atMs.delete(id);
  }

  /** Drop entries older than the TTL. */
  prune(nowMs: number): void {
    for (const [id, atMs] of this.#atMs) {
      if (nowMs - atMs <= this.ttlMs) break;
      this.#atMs.delete(id);
    }
  }
}
