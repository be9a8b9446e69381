/**
 * Request-reply on a hot path over one wildcard inbox subscription (the decision service's observe
 * queries of remote pools and its JetStream publishes). `nc.request` captures two stack traces
 * and builds a timeout promise on every call, failing or not; here a request is a publish with a
 * reply subject under this connection's inbox, a map entry and one timer, and an error object is
 * made only when a request fails, with the same VantageErrors as `request` (README.md, "NATS").
 */
import { createInbox, type Msg, type MsgHdrs, type Subscription } from '@nats-io/transport-node';
import { readErrorHeaders, type VantageError } from './errors';
import { noResponders, requestFailed, requestTimeout, type NatsConnection } from './nats';
import type { Outbox } from './outbox';

interface Pending {
  readonly subject: string;
  readonly resolve: (m: Msg) => void;
  readonly reject: (e: VantageError) => void;
  readonly timer: NodeJS.Timeout;
}

export class Requester {
  readonly #prefix: string;
  readonly #pending = new Map<string, Pending>();
  readonly #sub: Subscription;
  #seq = 0;
  /** Requests leave through it: one socket write per event-loop turn. */
  readonly #out: Outbox;

  constructor(nc: NatsConnection, outbox: Outbox) {
    this.#out = outbox;
    this.#prefix = `${createInbox()}.`;
    this.#sub = nc.subscribe(`${this.#prefix}*`, { callback: (err, m) => (err === null ? this.#onReply(m) : this.#failAll(err)) });
  }

  /** Requests awaiting a reply. */
  get pending(): number {
    return this.#pending.size;
  }

  request(subject: string, payload: Uint8Array, timeoutMs: number, headers?: MsgHdrs): Promise<Msg> {
    return new Promise<Msg>((resolve, reject) => {
      const token = (this.#seq++).toString(36);
      const reply = this.#prefix + token;
      const timer = setTimeout(() => {
        if (this.#pending.delete(token)) reject(requestTimeout(subject, timeoutMs));
      }, timeoutMs);
      this.#pending.set(token, { subject, resolve, reject, timer });
      this.#out.publish(subject, payload, reply, headers, (e) => {
        clearTimeout(timer);
        if (this.#pending.delete(token)) reject(requestFailed(subject, e));
      });
    });
  }

  /** Stop listening; requests still pending fail as NATS_REQUEST_FAILED. */
  close(): void {
    this.#sub.unsubscribe();
    this.#failAll(new Error('requester closed'));
  }

  #onReply(m: Msg): void {
    const token = m.subject.slice(this.#prefix.length);
    const p = this.#pending.get(token);
    if (p === undefined) return; // timed out already
    this.#pending.delete(token);
    clearTimeout(p.timer);
    const h = m.headers;
    if (h !== undefined) {
      // The server's own status: 503 when nobody is subscribed to the subject.
      if (h.hasError && h.code === 503 && m.data.length === 0) {
        p.reject(noResponders(p.subject));
        return;
      }
      const remote = readErrorHeaders(h, { subject: p.subject });
      if (remote !== null) {
        p.reject(remote);
        return;
      }
    }
    p.resolve(m);
  }

  #failAll(err: unknown): void {
    for (const [token, p] of this.#pending) {
      this.#pending.delete(token);
      clearTimeout(p.timer);
      p.reject(requestFailed(p.subject, err));
    }
  }
}
