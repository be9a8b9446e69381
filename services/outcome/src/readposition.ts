/**
 * How far the service has read its JetStream streams, as a publish time: the
 * read position `Joiner.takeExpired` holds joins for. Per stream and overall,
 * as README, "Joins after an outage", defines it.
 */
export class ReadPosition {
  /** Per stream: the newest publish time delivered, and whether the latest delivery said more were waiting. */
  private readonly last = new Map<string, { backlog: boolean; publishMs: number }>();
  /** `upTo`'s scratch: per stream, the publish time of its first inbox message (NaN: none found). */
  private readonly first: Float64Array;

  constructor(private readonly streams: readonly string[]) {
    this.first = new Float64Array(streams.length);
  }

  /**
   * A delivery: its publish time and the consumer's pending count (messages
   * not yet delivered). A redelivery's older publish time does not move the
   * stream's position back: everything up to the newest delivery was read.
   */
  delivered(stream: string, publishMs: number, pending: number): void {
    const r = this.last.get(stream);
    if (r === undefined) this.last.set(stream, { backlog: pending > 0, publishMs });
    else {
      r.backlog = pending > 0;
      if (publishMs > r.publishMs) r.publishMs = publishMs;
    }
  }

  /** A pull that waited out its expiry with nothing to deliver: the stream is caught up. */
  caughtUp(stream: string): void {
    this.last.delete(stream);
  }

  /** The read position; `inbox[from…]` are the messages fetched but not yet joined, in delivery order. */
  upTo(nowMs: number, inbox: readonly { stream: string; publishMs: number }[], from: number): number {
    const n = this.streams.length;
    const first = this.first.fill(NaN);
    // Stops once every stream's first message is found; at worst one pass over the inbox (bounded by maxInbox).
    for (let i = from, unseen = n; i < inbox.length && unseen > 0; i++) {
      const it = inbox[i] as { stream: string; publishMs: number };
      const k = this.streams.indexOf(it.stream);
      if (k >= 0 && Number.isNaN(first[k])) {
        first[k] = it.publishMs;
        unseen--;
      }
    }
    let upTo = nowMs;
    for (let k = 0; k < n; k++) {
      const r = this.last.get(this.streams[k] as string);
      const f = first[k] as number;
      const w = !Number.isNaN(f) ? f : r !== undefined && r.backlog ? r.publishMs : nowMs;
      if (w < upTo) upTo = w;
    }
    return upTo;
  }
}
