/**
 * The facts the service needs from a JetStream delivery, read straight
 * from the message's ack subject without building the client's full
 * delivery-info object (`JsMsg.info` splits the subject into a dozen strings
 * per message). Whether it still matters is seen in a profile of the service
 * under load: `npm run bench:outcome -- --prof DIR` (no figure is claimed here).
 *
 * Ack subject layouts (nats-server):
 *   $JS.ACK.<stream>.<consumer>.<deliveryCount>.<streamSeq>.<deliverySeq>.<timestampNanos>.<pending>
 *   $JS.ACK.<domain>.<accountHash>.<stream>.<consumer>.<deliveryCount>.<streamSeq>.<deliverySeq>.<timestampNanos>.<pending>[.<token>]
 */

interface Delivery {
  deliveryCount: number;
  streamSeq: number;
  /** Publish time of the message in the stream, epoch milliseconds (nanoseconds truncated). */
  publishMs: number;
  /** Messages the consumer had not yet delivered when this one was (0: it was caught up). */
  pending: number;
}

/** Decimal digits of s[from, to) as a number; -1 when empty or not all digits. */
function digits(s: string, from: number, to: number): number {
  if (to <= from) return -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

/** Dot positions of the last parse (a subject has at most 11 dots). */
const dots = new Int32Array(12);

/** Token k (k ≥ 1) of a subject with n dots, as decimal digits. (Module level: a closure per call showed in profiles.) */
function token(reply: string, n: number, k: number): number {
  return digits(reply, (dots[k - 1] as number) + 1, k < n ? (dots[k] as number) : reply.length);
}

/** Parses an ack subject; null when it is not one (the caller falls back to the client's parser, which throws). */
export function parseDelivery(reply: string): Delivery | null {
  if (!reply.startsWith('$JS.ACK.')) return null;
  let n = 0;
  for (let i = reply.indexOf('.'); i !== -1; i = reply.indexOf('.', i + 1)) {
    if (n === dots.length) return null;
    dots[n++] = i;
  }
  // Token k spans (dots[k-1], dots[k]); tokens = n + 1.
  const tokens = n + 1;
  let first: number; // index of the deliveryCount token
  if (tokens === 9) first = 4;
  else if (tokens === 11 || tokens === 12) first = 6;
  else return null;
  const deliveryCount = token(reply, n, first);
  const streamSeq = token(reply, n, first + 1);
  // Timestamp in nanoseconds: its leading digits without the last six are the milliseconds (exact below 2^53).
  const tsFrom = (dots[first + 2] as number) + 1;
  const tsTo = first + 3 < n ? (dots[first + 3] as number) : reply.length;
  const msTo = Math.max(tsFrom, tsTo - 6);
  const publishMs = msTo === tsFrom ? 0 : digits(reply, tsFrom, msTo);
  const pending = token(reply, n, first + 4);
  if (deliveryCount < 0 || streamSeq < 0 || publishMs < 0 || pending < 0 || digits(reply, msTo, tsTo) < 0) return null;
  return { deliveryCount, streamSeq, publishMs, pending };
}
