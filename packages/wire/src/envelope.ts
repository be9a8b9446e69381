/**
 * Dynamo's event-plane envelope (lib/runtime event_plane), msgpack with named fields:
 *   EventEnvelope { topic: string, publisher_id: u64, sequence: u64 (per publisher, from 0),
 *                   published_at: u64 (ms since epoch), payload: bin }
 * Some releases add `published_at_ns: u64`; it is read when present and otherwise ignored.
 * `payload` is itself msgpack of the topic's event type.
 */
import type { WireLimits } from './limits';
import { Fields, type WireValue } from './msgpack';
import { asMap, bytes, get, optional, required, str, u64 } from './values';

export interface EventEnvelope {
  /** Topic as the publisher wrote it (normally the bare topic, e.g. `kv-events`). */
  readonly topic: string;
  /** Publisher instance; (publisherId, sequence) identifies a message for gap and duplicate detection. */
  readonly publisherId: bigint;
  readonly sequence: bigint;
  readonly publishedAtMs: bigint;
  /** Present only when the publisher sent `published_at_ns`. */
  readonly publishedAtNs?: bigint;
  readonly payload: Uint8Array;
}

export function envelopeFromValue(v: unknown, limits: WireLimits, path = 'envelope'): EventEnvelope {
  const m = asMap(v, path);
  const topic = str(required(m, 'topic', path), `${path}.topic`, limits.maxStringLength);
  const publisherId = u64(required(m, 'publisher_id', path), `${path}.publisher_id`);
  const sequence = u64(required(m, 'sequence', path), `${path}.sequence`);
  const publishedAtMs = u64(required(m, 'published_at', path), `${path}.published_at`);
  const ns = optional(get(m, 'published_at_ns'), (x) => u64(x, `${path}.published_at_ns`));
  const payload = bytes(required(m, 'payload', path), `${path}.payload`, limits.maxMessageBytes);
  const env: EventEnvelope = { topic, publisherId, sequence, publishedAtMs, payload };
  return ns === null ? env : { ...env, publishedAtNs: ns };
}

export function envelopeToWire(e: EventEnvelope): WireValue {
  const fields: [string, WireValue][] = [
    ['topic', e.topic],
    ['publisher_id', e.publisherId],
    ['sequence', e.sequence],
    ['published_at', e.publishedAtMs],
    ['payload', e.payload],
  ];
  if (e.publishedAtNs !== undefined) fields.push(['published_at_ns', e.publishedAtNs]);
  return new Fields(fields);
}
