/**
 * One socket write per turn of the event loop for everything a service sends through it (a
 * responder's replies, the decision service's observe queries, bookings and records). The NATS
 * client writes its buffer from a microtask queued by the first publish after a write, so
 * publishes made in different microtask runs each cost a write (a system call, costlier per route
 * than building a record). Here messages are queued and published at once from `setImmediate`,
 * after the current read and all its promise continuations: one write, in queue order (a booking
 * before its reply). `beforeFlush` hooks add messages that can wait for a write made anyway (the
 * decision records); `afterNextFlush` runs work that must not delay it, once it has been made.
 */
import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';

interface OutboxMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly reply: string | undefined;
  readonly headers: MsgHdrs | undefined;
  /** The connection refused the publish (closed, payload too large, bad subject). */
  readonly onError: ((e: unknown) => void) | undefined;
}

export class Outbox {
  #queue: OutboxMessage[] = [];
  #scheduled: NodeJS.Immediate | null = null;
  readonly #before: (() => void)[] = [];
  #after: (() => void)[] = [];
  /** Turns that sent something (for the tests and diagnostics). */
  flushes = 0;

  constructor(private readonly nc: NatsConnection) {}

  /** Queue a message for this turn's write. */
  publish(subject: string, data: Uint8Array, reply?: string, headers?: MsgHdrs, onError?: (e: unknown) => void): void {
    this.#queue.push({ subject, data, reply, headers, onError });
    this.#scheduled ??= setImmediate(this.#flush);
  }

  /** Run `f` just before each write (it may queue messages to leave with it). */
  beforeFlush(f: () => void): void {
    this.#before.push(f);
  }

  /** Run `f` once, right after the next write (once the connection has written the messages). */
  afterNextFlush(f: () => void): void {
    this.#after.push(f);
    this.#scheduled ??= setImmediate(this.#flush);
  }

  /** Hand everything queued to the connection now (shutdown; tests). */
  flushNow(): void {
    if (this.#scheduled !== null) clearImmediate(this.#scheduled);
    this.#flush();
  }

  readonly #flush = (): void => {
    // Messages the hooks queue join this write (#scheduled is still set: they schedule nothing).
    if (this.#queue.length > 0) for (const f of this.#before) f();
    this.#scheduled = null;
    const q = this.#queue;
    if (q.length > 0) {
      this.#queue = [];
      for (const m of q) {
        try {
          if (m.reply === undefined && m.headers === undefined) this.nc.publish(m.subject, m.data);
          else this.nc.publish(m.subject, m.data, m.headers === undefined ? { reply: m.reply } : m.reply === undefined ? { headers: m.headers } : { reply: m.reply, headers: m.headers });
        } catch (e) {
          m.onError?.(e);
        }
      }
      this.flushes++;
    }
    // The connection writes its buffer from a microtask queued by the first publish above (or at once, past its
    // pending limit): a microtask queued now runs after that write, so after-flush work never delays it.
    if (this.#after.length > 0) {
      const after = this.#after;
      this.#after = [];
      queueMicrotask(() => {
        for (const f of after) f();
      });
    }
  };
}
