/**
 * Durable, non-blocking publication of decision records to JetStream: queueing, batching
 * (`sendDelayMs`, `sendBatch`, `kick()`), the in-flight window, retries with backoff and
 * `Nats-Msg-Id` deduplication, and what a full queue or a shutdown does are the README's
 * "Decision records". A publish goes through the service's Requester rather than the JetStream
 * client, which would capture two stack traces per record.
 */
import { headers } from '@nats-io/transport-node';
import type { Logger, Requester } from '@vantage/runtime';

interface PublisherOptions {
  readonly requester: Requester;
  readonly subject: string;
  readonly log: Logger;
  readonly maxInFlight: number;
  readonly maxQueued: number;
  readonly publishTimeoutMs: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
  /** Hold new records up to this long before sending them together (0: send each at once). */
  readonly sendDelayMs?: number;
  /** With sendDelayMs: `kick()` sends the held records once at least this many are held (default 1). */
  readonly sendBatch?: number;
  readonly onPublished?: () => void;
  readonly onFailure?: () => void;
  readonly onDropped?: () => void;
  /** Records still unpublished when a shutdown's flush gave up (each logged by request id). */
  readonly onLeftAtShutdown?: (n: number) => void;
  readonly onQueueDepth?: (depth: number) => void;
}

interface Pending {
  readonly id: string;
  readonly requestId: string;
  readonly data: Uint8Array;
  attempts: number;
}

/** A JetStream publish ack: the stream stored it (or had it already: a deduplicated retry), or refused it. */
export function parseAck(data: Uint8Array): { ok: true; stream: string; seq: number; duplicate: boolean } | { ok: false; reason: string } {
  let a: { stream?: unknown; seq?: unknown; duplicate?: unknown; error?: { code?: unknown; err_code?: unknown; description?: unknown } };
  try {
    a = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as typeof a;
  } catch {
    return { ok: false, reason: 'publish ack is not JSON' };
  }
  if (typeof a !== 'object' || a === null) return { ok: false, reason: 'publish ack is not an object' };
  if (a.error !== undefined) return { ok: false, reason: `stream refused the record: ${String(a.error?.description ?? 'error')} (code ${String(a.error?.code)}, err_code ${String(a.error?.err_code)})` };
  if (typeof a.stream !== 'string' || typeof a.seq !== 'number') return { ok: false, reason: 'publish ack without stream and sequence' };
  return { ok: true, stream: a.stream, seq: a.seq, duplicate: a.duplicate === true };
}

export class RecordPublisher {
  readonly #queue: Pending[] = [];
  #head = 0;
  #inFlight = 0;
  #backoffUntil = 0;
  #consecutiveFailures = 0;
  #timer: NodeJS.Timeout | null = null;
  /** Sends held records when no `kick()` came within sendDelayMs. */
  #delayTimer: NodeJS.Timeout | null = null;
  /** The last pump stopped at maxInFlight with records left: an ack sends the next one at once. */
  #starved = false;
  readonly #delayMs: number;
  readonly #batch: number;
  #idleWaiters: (() => void)[] = [];
  #stopped = false;
  /** Start of the current streak of failures without an ack in between (null: the last attempt succeeded). */
  #failingSince: number | null = null;
  #lastError = '';
  published = 0;
  failures = 0;

  constructor(private readonly o: PublisherOptions) {
    this.#delayMs = o.sendDelayMs ?? 0;
    this.#batch = Math.max(1, o.sendBatch ?? 1);
  }

  get depth(): number {
    return this.#queue.length - this.#head + this.#inFlight;
  }

  /** How long publishing has failed without an ack in between (0 when the last attempt succeeded). */
  failingForMs(nowMs = Date.now()): number {
    return this.#failingSince === null ? 0 : nowMs - this.#failingSince;
  }

  /** The last failure's reason ('' when none since the last ack). */
  get lastError(): string {
    return this.#lastError;
  }

  /** Queue one encoded record; false (counted, logged) when the queue is full. */
  enqueue(id: string, requestId: string, data: Uint8Array): boolean {
    if (this.#queue.length - this.#head >= this.o.maxQueued) {
      this.o.onDropped?.();
      this.o.log.error({ recordId: id, requestId, queued: this.#queue.length - this.#head }, 'decision record queue full: record not published');
      return false;
    }
    this.#queue.push({ id, requestId, data, attempts: 0 });
    if (this.#delayMs <= 0) this.#pump();
    else this.#delayTimer ??= setTimeout(this.#onDelay, this.#delayMs);
    return true;
  }

  /** Records queued and not yet sent. */
  get held(): number {
    return this.#queue.length - this.#head;
  }

  /**
   * Send the held records now if a batch (`sendBatch`) is held: called just before the service writes
   * messages of its own, so that the records leave in the same socket write. Cheap otherwise.
   */
  kick(): void {
    if (this.held >= this.#batch) this.#pump();
  }

  readonly #onDelay = (): void => {
    this.#delayTimer = null;
    this.#pump();
  };

  /** Resolves when everything queued has been acked (or `stop` gave up). */
  idle(): Promise<void> {
    if (this.depth === 0) return Promise.resolve();
    return new Promise((r) => this.#idleWaiters.push(r));
  }

  /** Flush within `deadlineMs`; whatever is left is logged by request id (never silently lost). */
  async flush(deadlineMs: number): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    this.#pump(); // whatever is held leaves now
    await Promise.race([this.idle(), new Promise<void>((r) => (timer = setTimeout(r, deadlineMs)))]);
    clearTimeout(timer);
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#delayTimer) clearTimeout(this.#delayTimer);
    this.#delayTimer = null;
    const left = this.#queue.slice(this.#head);
    if (left.length > 0 || this.#inFlight > 0) {
      this.o.onLeftAtShutdown?.(left.length + this.#inFlight);
      this.o.log.error(
        { unpublished: left.length, inFlight: this.#inFlight, requestIds: left.slice(0, 100).map((p) => p.requestId) },
        'decision records not published before shutdown',
      );
    }
    return left.length + this.#inFlight;
  }

  #pump(): void {
    if (this.#stopped) return;
    const now = Date.now();
    if (now < this.#backoffUntil) {
      this.#timer ??= setTimeout(() => {
        this.#timer = null;
        this.#pump();
      }, this.#backoffUntil - now);
      return;
    }
    while (this.#inFlight < this.o.maxInFlight && this.#head < this.#queue.length) {
      const p = this.#queue[this.#head]!;
      this.#head++;
      this.#send(p);
    }
    this.#starved = this.#head < this.#queue.length;
    if (!this.#starved && this.#delayTimer !== null) {
      clearTimeout(this.#delayTimer);
      this.#delayTimer = null;
    }
    // Compact the array now and then rather than shift() per record.
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue.splice(0, this.#head);
      this.#head = 0;
    }
    this.o.onQueueDepth?.(this.depth);
  }

  #send(p: Pending): void {
    this.#inFlight++;
    p.attempts++;
    const h = headers();
    h.set('Nats-Msg-Id', p.id);
    this.o.requester.request(this.o.subject, p.data, this.o.publishTimeoutMs, h).then(
      (m) => {
        const ack = parseAck(m.data);
        if (ack.ok) this.#acked();
        else this.#failed(p, new Error(ack.reason));
      },
      (e: unknown) => this.#failed(p, e),
    );
  }

  #acked(): void {
    this.#inFlight--;
    this.#consecutiveFailures = 0;
    this.#failingSince = null;
    this.#lastError = '';
    this.published++;
    this.o.onPublished?.();
    // Held records wait for their kick or timer; only a backlog stopped by maxInFlight moves on each ack.
    this.#after(this.#delayMs <= 0 || this.#starved);
  }

  #failed(p: Pending, e: unknown): void {
    this.#inFlight--;
    this.failures++;
    this.#consecutiveFailures++;
    this.#failingSince ??= Date.now();
    this.#lastError = e instanceof Error ? e.message : String(e);
    this.o.onFailure?.();
    const delay = Math.min(this.o.retryMaxMs, this.o.retryBaseMs * 2 ** Math.min(16, this.#consecutiveFailures - 1));
    const jittered = delay / 2 + Math.random() * (delay / 2);
    this.#backoffUntil = Math.max(this.#backoffUntil, Date.now() + jittered);
    // Log the first failure of a streak and then every 100th: an outage must be visible without flooding the log.
    if (this.#consecutiveFailures === 1 || this.#consecutiveFailures % 100 === 0) {
      this.o.log.warn({ err: e, recordId: p.id, requestId: p.requestId, attempt: p.attempts, retryInMs: Math.round(jittered), consecutiveFailures: this.#consecutiveFailures }, 'decision record publish failed; retrying');
    }
    // Back to the front: order is not a contract, but retrying oldest first bounds a record's delay.
    if (this.#head > 0) this.#queue[--this.#head] = p;
    else this.#queue.unshift(p);
    this.#after(true);
  }

  #after(pump: boolean): void {
    if (pump) this.#pump();
    if (this.depth === 0 && this.#idleWaiters.length > 0) {
      const w = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const f of w) f();
    }
  }
}
