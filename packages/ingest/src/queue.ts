/**
 * A bounded FIFO between the NATS callbacks and the single writer of a pool.
 * Subscriptions push decoded items; one drain loop applies them in arrival order,
 * a batch per event-loop turn, so observe requests interleave between batches
 * but never inside an event. Depth is measured; when full, `push` refuses and
 * the caller counts the drop (core NATS has no redelivery: the index's event-id
 * gap detection then marks the affected worker suspect).
 */
export class WriterQueue<T> {
  private buf: (T | undefined)[];
  private head = 0;
  private tail = 0;
  private count = 0;
  private scheduled = false;
  private stopped = false;
  private idleWaiters: (() => void)[] = [];
  highWater = 0;

  constructor(
    private readonly capacity: number,
    private readonly batch: number,
    private readonly apply: (item: T) => void,
    private readonly onError: (err: unknown, item: T) => void,
  ) {
    this.buf = new Array<T | undefined>(capacity);
  }

  get depth(): number {
    return this.count;
  }

  /** False when full (the item is not queued). */
  push(item: T): boolean {
    if (this.count === this.capacity || this.stopped) return false;
    this.buf[this.tail] = item;
    this.tail = (this.tail + 1) % this.capacity;
    this.count++;
    if (this.count > this.highWater) this.highWater = this.count;
    this.schedule();
    return true;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.drain());
  }

  private drain(): void {
    this.scheduled = false;
    let n = 0;
    while (this.count > 0 && n < this.batch) {
      const item = this.buf[this.head] as T;
      this.buf[this.head] = undefined;
      this.head = (this.head + 1) % this.capacity;
      this.count--;
      n++;
      try {
        this.apply(item);
      } catch (e) {
        // A bug in apply must not stop the writer: later events still apply.
        this.onError(e, item);
      }
    }
    if (this.count > 0) this.schedule();
    else for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Resolves when everything queued so far has been applied. */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** False once `stop` was called. */
  get accepting(): boolean {
    return !this.stopped;
  }

  /** Refuse further pushes (shutdown); queued items still drain. */
  stop(): void {
    this.stopped = true;
  }
}
