/** Public decoders and encoders (package README; the encoders only tests use are in `test/encode.ts`). */
import type { KvEvent } from '@vantage/types';
import { activeLoadFromValue, activeLoadToWire, type ActiveLoad } from './active-load';
import { activeSequenceEventsFromValue, type ActiveSequenceEvent } from './active-sequence';
import { envelopeFromValue, envelopeToWire, type EventEnvelope } from './envelope';
import { forwardPassFromValue, type ForwardPassMetrics } from './forward-pass';
import { readJson } from './json';
import { resolveLimits, type DecodeOptions, type WireLimits } from './limits';
import { readMsgpack, writeMsgpack } from './msgpack';
import { guard, reject, WireReject, type Result } from './result';
import { routerEventFromValue, routerEventsFromValue, routerEventToWire } from './router-event';
import { decodeSubjectSegment, TOPIC_ACTIVE_SEQUENCES, TOPIC_FORWARD_PASS_METRICS, TOPIC_KV_EVENTS, TOPIC_KV_METRICS } from './subjects';
import { isMap } from './values';

type PayloadFormat = 'msgpack' | 'json';

interface PayloadDecodeOptions extends DecodeOptions {
  /** Payload encoding; msgpack (the event plane) unless stated. */
  readonly format?: PayloadFormat;
}

function parse(input: Uint8Array | string, format: PayloadFormat, limits: WireLimits): unknown {
  if (format === 'json') return readJson(input, limits.maxMessageBytes, limits.maxDepth);
  if (typeof input === 'string') throw new WireReject('wrong_type', 'input: msgpack must be bytes, got a string');
  return readMsgpack(input, limits.maxMessageBytes);
}

function decodeWith<T>(
  input: Uint8Array | string,
  opts: PayloadDecodeOptions | undefined,
  build: (v: unknown, limits: WireLimits) => T,
): Result<T> {
  return guard(() => {
    const limits = resolveLimits(opts?.limits);
    return build(parse(input, opts?.format ?? 'msgpack', limits), limits);
  });
}

// --- envelope ----------------------------------------------------------------

export function decodeEnvelope(bytes: Uint8Array, opts?: DecodeOptions): Result<EventEnvelope> {
  return decodeWith(bytes, opts, (v, limits) => envelopeFromValue(v, limits));
}

export function encodeEnvelope(envelope: EventEnvelope): Uint8Array {
  return writeMsgpack(envelopeToWire(envelope));
}

// --- RouterEvent -------------------------------------------------------------

export function decodeRouterEventMsgpack(bytes: Uint8Array, opts?: DecodeOptions): Result<KvEvent> {
  return decodeWith(bytes, { ...opts, format: 'msgpack' }, (v, limits) => routerEventFromValue(v, limits));
}

/** Legacy JSON RouterEvent (core NATS `...kv_events`, JetStream `{stream}.kv-events`), u64s exact. */
export function decodeRouterEventJson(input: Uint8Array | string, opts?: DecodeOptions): Result<KvEvent> {
  return decodeWith(input, { ...opts, format: 'json' }, (v, limits) => routerEventFromValue(v, limits));
}

/**
 * A `kv-events` payload in msgpack: one RouterEvent (older releases) or an array of them (1.6.1
 * batches every envelope), as a list in publisher order. A batch holds at most `maxBatchEvents`.
 */
export function decodeRouterEventsMsgpack(bytes: Uint8Array, opts?: DecodeOptions): Result<KvEvent[]> {
  return decodeWith(bytes, { ...opts, format: 'msgpack' }, (v, limits) => routerEventsFromValue(v, limits));
}

export function encodeRouterEventMsgpack(event: KvEvent): Uint8Array {
  return writeMsgpack(routerEventToWire(event));
}

// --- ActiveLoad --------------------------------------------------------------

export function decodeActiveLoad(input: Uint8Array | string, opts?: PayloadDecodeOptions): Result<ActiveLoad> {
  return decodeWith(input, opts, (v) => activeLoadFromValue(v));
}

export function encodeActiveLoad(load: ActiveLoad): Uint8Array {
  return writeMsgpack(activeLoadToWire(load));
}

// --- ForwardPassMetrics ------------------------------------------------------

/** `forward-pass-metrics` payload (1.6.1: worker id as a decimal string). */
export function decodeForwardPassMetrics(input: Uint8Array | string, opts?: PayloadDecodeOptions): Result<ForwardPassMetrics> {
  return decodeWith(input, opts, (v) => forwardPassFromValue(v));
}

// --- exact JSON (discovery documents, tools) ----------------------------------

/**
 * A JSON document with integers kept exact (a u64 written as a bare JSON number, as Dynamo's
 * discovery store writes `instance_id`, survives); bounded by `maxMessageBytes` and `maxDepth`.
 */
export function decodeJsonExact(input: Uint8Array | string, opts?: DecodeOptions): Result<unknown> {
  return decodeWith(input, { ...opts, format: 'json' }, (v) => v);
}

// --- ActiveSequenceEvent -----------------------------------------------------

/** One event or an `ActiveSequenceEventBatch`, as a list in publisher order. */
export function decodeActiveSequenceEvents(input: Uint8Array | string, opts?: PayloadDecodeOptions): Result<ActiveSequenceEvent[]> {
  return decodeWith(input, opts, (v, limits) => activeSequenceEventsFromValue(v, limits));
}

// --- event plane: envelope + dispatch by topic --------------------------------

export type EventPlanePayload =
  /** One RouterEvent in the envelope (releases before 1.6). */
  | { readonly kind: 'kv_event'; readonly event: KvEvent }
  /** A batch of RouterEvents in one envelope (1.6.1), in publisher order. */
  | { readonly kind: 'kv_events'; readonly events: readonly KvEvent[] }
  | { readonly kind: 'forward_pass'; readonly metrics: ForwardPassMetrics }
  | { readonly kind: 'active_load'; readonly load: ActiveLoad }
  | { readonly kind: 'active_sequences'; readonly events: readonly ActiveSequenceEvent[] };

type EventPlaneMessage = EventPlanePayload & { readonly envelope: EventEnvelope };

interface EventPlaneDecodeOptions extends DecodeOptions {
  /**
   * Topic or full subject to dispatch on (e.g. the NATS subject the message
   * arrived on); the envelope's own `topic` when absent. Only the last
   * subject token counts, percent-decoded.
   */
  readonly topic?: string;
}

function topicOf(s: string): string {
  const last = s.slice(s.lastIndexOf('.') + 1);
  const d = decodeSubjectSegment(last);
  return d.ok ? d.value : last;
}

/** Decode an event-plane message: the envelope, then its payload according to the topic. */
export function decodeEventPlaneMessage(bytes: Uint8Array, opts?: EventPlaneDecodeOptions): Result<EventPlaneMessage> {
  if (opts?.topic !== undefined && typeof opts.topic !== 'string') return reject('wrong_type', 'options.topic: expected a string');
  const env = decodeEnvelope(bytes, opts);
  if (!env.ok) return env;
  const envelope = env.value;
  const topic = topicOf(opts?.topic ?? envelope.topic);
  const withEnvelope = <T>(r: Result<T>, wrap: (v: T) => EventPlanePayload): Result<EventPlaneMessage> =>
    r.ok ? { ok: true, value: { ...wrap(r.value), envelope } } : reject(r.code, `payload (${topic}): ${r.reason}`);
  switch (topic) {
    case TOPIC_KV_EVENTS: {
      // One parse: an array is a 1.6.1 batch, a map a single event of an older release.
      const r = decodeWith(envelope.payload, opts, (v, limits): EventPlanePayload =>
        Array.isArray(v) ? { kind: 'kv_events', events: routerEventsFromValue(v, limits) } : { kind: 'kv_event', event: routerEventFromValue(v, limits) },
      );
      return withEnvelope(r, (p) => p);
    }
    case TOPIC_FORWARD_PASS_METRICS:
      return withEnvelope(decodeForwardPassMetrics(envelope.payload, opts), (metrics) => ({ kind: 'forward_pass', metrics }));
    case TOPIC_KV_METRICS:
      return withEnvelope(decodeActiveLoad(envelope.payload, opts), (load) => ({ kind: 'active_load', load }));
    case TOPIC_ACTIVE_SEQUENCES:
      return withEnvelope(decodeActiveSequenceEvents(envelope.payload, opts), (events) => ({ kind: 'active_sequences', events }));
    default:
      return reject('unknown_variant', `envelope: unknown topic ${JSON.stringify(topic.slice(0, 128))}`);
  }
}

export type EnvelopeHeader = Omit<EventEnvelope, 'topic' | 'payload'>;

/** What the simulated fleet publishes, in an envelope whose topic matches the payload kind. */
export function encodeEventPlaneMessage(header: EnvelopeHeader, payload: Extract<EventPlanePayload, { kind: 'kv_event' | 'active_load' }>): Uint8Array {
  if (payload.kind === 'kv_event') return encodeEnvelope({ ...header, topic: TOPIC_KV_EVENTS, payload: encodeRouterEventMsgpack(payload.event) });
  return encodeEnvelope({ ...header, topic: TOPIC_KV_METRICS, payload: encodeActiveLoad(payload.load) });
}

// --- sniffing (operator tools) -------------------------------------------------

type SniffedKind = 'envelope' | 'router_event_msgpack' | 'router_event_batch' | 'router_event_json' | 'active_load' | 'active_sequence' | 'forward_pass';

/**
 * Best guess of what a captured message is, from its first byte and top-level
 * keys; undefined when nothing fits. For tools only: services know their subject.
 */
export function sniffMessage(bytes: Uint8Array): SniffedKind | undefined {
  if (!(bytes instanceof Uint8Array)) return undefined;
  let i = 0;
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09)) i++;
  // '{' is also msgpack fixint 123, but a bare integer is never a Dynamo message.
  if (bytes[i] === 0x7b) return 'router_event_json';
  const r = guard(() => readMsgpack(bytes, resolveLimits().maxMessageBytes));
  if (r.ok && Array.isArray(r.value)) {
    const first: unknown = r.value[0];
    return isMap(first) && Object.prototype.hasOwnProperty.call(first, 'event') ? 'router_event_batch' : undefined;
  }
  if (!r.ok || !isMap(r.value)) return undefined;
  const has = (k: string): boolean => Object.prototype.hasOwnProperty.call(r.value, k);
  if (has('payload') && has('publisher_id')) return 'envelope';
  if (has('event') && has('worker_id')) return 'router_event_msgpack';
  if (has('request_id') || has('events')) return 'active_sequence';
  if (has('scheduled_requests') && has('queued_requests')) return 'forward_pass';
  if (has('worker_id')) return 'active_load';
  return undefined;
}
