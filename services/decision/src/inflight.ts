/**
 * Local in-flight accounting (README, "Reservation and local in-flight"). A reservation also ends
 * after `timeoutMs` without done, cancelled or failed: a lost lifecycle event must not shrink the
 * local limit forever.
 */
import type { LifecycleKind } from '@vantage/protocol';

/** The lifecycle kinds that end a local in-flight reservation. */
export function endsInFlight(kind: LifecycleKind): boolean {
  return kind === 'done' || kind === 'cancelled' || kind === 'failed';
}

interface InFlightEntry {
  readonly model: string;
  readonly pool: string;
  readonly expiresAtMs: number;
}

export class InFlight {
  readonly #byRequest = new Map<string, InFlightEntry>();
  readonly #perModel = new Map<string, number>();

  constructor(
    private readonly timeoutMs: number,
    private readonly onChange: (model: string, count: number) => void = () => {},
    /** Entries held at once; past it the oldest is released early (`onEvicted`). */
    private readonly maxEntries = Number.POSITIVE_INFINITY,
    private readonly onEvicted: (e: InFlightEntry) => void = () => {},
  ) {}

  /** Count a reservation. A second add for the same request id replaces the first (a retried route). */
  add(requestId: string, model: string, pool: string, nowMs: number): void {
    this.release(requestId);
    if (this.#byRequest.size >= this.maxEntries) {
      // Insertion order: the first key is the oldest reservation, the one a timeout would end first.
      const oldest = this.#byRequest.entries().next();
      if (oldest.done !== true && this.release(oldest.value[0])) this.onEvicted(oldest.value[1]);
    }
    this.#byRequest.set(requestId, { model, pool, expiresAtMs: nowMs + this.timeoutMs });
    this.#bump(model, 1);
  }

  /** End a reservation; false when the request is not (or no longer) counted here. */
  release(requestId: string): boolean {
    const e = this.#byRequest.get(requestId);
    if (e === undefined) return false;
    this.#byRequest.delete(requestId);
    this.#bump(e.model, -1);
    return true;
  }

  /** Drop entries past their timeout; returns them (for metrics and logs). */
  expire(nowMs: number): InFlightEntry[] {
    const out: InFlightEntry[] = [];
    for (const [id, e] of this.#byRequest) {
      if (e.expiresAtMs <= nowMs && this.release(id)) out.push(e);
    }
    return out;
  }

  count(model: string): number {
    return this.#perModel.get(model) ?? 0;
  }

  has(requestId: string): boolean {
    return this.#byRequest.has(requestId);
  }

  get size(): number {
    return this.#byRequest.size;
  }

  #bump(model: string, d: number): void {
    const n = (this.#perModel.get(model) ?? 0) + d;
    this.#perModel.set(model, n);
    this.onChange(model, n);
  }
}
