/**
 * NATS subjects and JetStream names Dynamo uses, for each generation.
 *
 *   event plane (current)   namespace.{ns}.component.{comp}.kv-events
 *                           namespace.{ns}.kv_metrics
 *                           namespace.{ns}.component.{comp}.active_sequences_events
 *   per endpoint (1.6.1)    namespace.{ns}.component.{comp}.endpoint.{ep}.{topic}
 *                           for kv-events, kv_metrics, forward-pass-metrics, active_sequences_events;
 *                           the prefix is in discovery (`v1/event_channels`, `transport.config.subject_prefix`)
 *   legacy core NATS        namespace.{ns}.component.{comp}.kv_events          (JSON, until Aug 2025)
 *   JetStream               stream namespace-{ns}-component-{comp}-kv-events,
 *                           subject {stream}.kv-events                         (JSON)
 *
 * Event-plane segments (namespace, component, endpoint, topic) are percent-encoded (package README,
 * "Verified against Dynamo's source"), which keeps `.`, `*`, `>` and spaces from changing a subject's
 * meaning and changes nothing in the usual names, so the same builders give the older subjects too.
 */
import { ok, reject, type Result } from './result';

export const TOPIC_KV_EVENTS = 'kv-events';
export const TOPIC_KV_METRICS = 'kv_metrics';
export const TOPIC_ACTIVE_SEQUENCES = 'active_sequences_events';
/** 1.6.1: each worker's scheduler state about once a second per dp rank, endpoint-scoped. */
export const TOPIC_FORWARD_PASS_METRICS = 'forward-pass-metrics';
/** The core-NATS JSON topic before the event plane (underscore). */
const LEGACY_TOPIC_KV_EVENTS = 'kv_events';

const utf8 = new TextEncoder();
const HEX = '0123456789ABCDEF';

function safeByte(b: number): boolean {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x2d || b === 0x5f;
}

/** Percent-encode one subject segment the way Dynamo's event plane does. */
export function encodeSubjectSegment(value: string): string {
  let out = '';
  for (const b of utf8.encode(value)) {
    out += safeByte(b) ? String.fromCharCode(b) : `%${HEX[b >> 4]}${HEX[b & 15]}`;
  }
  return out;
}

const ENCODED_SEGMENT = /^(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2})*$/;

/** Inverse of encodeSubjectSegment; rejects bad escapes, stray characters and invalid UTF-8. */
export function decodeSubjectSegment(segment: string): Result<string> {
  if (typeof segment !== 'string') return reject('wrong_type', 'segment: expected a string');
  if (!ENCODED_SEGMENT.test(segment)) return reject('malformed', `${JSON.stringify(segment)}: every character outside [A-Za-z0-9_-] must be a %XX escape`);
  try {
    // decodeURIComponent refuses what is not UTF-8 once decoded, as a fatal TextDecoder does.
    return ok(decodeURIComponent(segment));
  } catch {
    return reject('malformed', `segment ${JSON.stringify(segment)} is not UTF-8 once decoded`);
  }
}

interface SubjectScope {
  readonly namespace: string;
  readonly component?: string;
  readonly endpoint?: string;
}

function checkName(kind: string, v: string | undefined): void {
  if (v === undefined) return;
  if (typeof v !== 'string' || v.length === 0) throw new RangeError(`${kind} name must be a non-empty string`);
}

/** `{scope}.{topic}` for the event plane; an endpoint scope requires a component. */
export function eventPlaneSubject(scope: SubjectScope, topic: string): string {
  checkName('namespace', scope.namespace);
  checkName('component', scope.component);
  checkName('endpoint', scope.endpoint);
  checkName('topic', topic);
  if (scope.endpoint !== undefined && scope.component === undefined) {
    throw new RangeError('an endpoint scope needs a component');
  }
  let s = `namespace.${encodeSubjectSegment(scope.namespace)}`;
  if (scope.component !== undefined) s += `.component.${encodeSubjectSegment(scope.component)}`;
  if (scope.endpoint !== undefined) s += `.endpoint.${encodeSubjectSegment(scope.endpoint)}`;
  return `${s}.${encodeSubjectSegment(topic)}`;
}

export function kvEventsSubject(namespace: string, component: string, endpoint?: string): string {
  return eventPlaneSubject(endpoint === undefined ? { namespace, component } : { namespace, component, endpoint }, TOPIC_KV_EVENTS);
}

export function kvMetricsSubject(namespace: string): string {
  return eventPlaneSubject({ namespace }, TOPIC_KV_METRICS);
}

export function activeSequencesSubject(namespace: string, component: string, endpoint?: string): string {
  return eventPlaneSubject(endpoint === undefined ? { namespace, component } : { namespace, component, endpoint }, TOPIC_ACTIVE_SEQUENCES);
}

/**
 * The endpoint scope's subject prefix, `namespace.{ns}.component.{comp}.endpoint.{ep}`, as 1.6.1
 * writes it in discovery (`subject_prefix`); `{prefix}.{topic}` is each topic's subject.
 */
export function endpointSubjectPrefix(namespace: string, component: string, endpoint: string): string {
  const s = eventPlaneSubject({ namespace, component, endpoint }, 'x');
  return s.slice(0, -2);
}

/** `{prefix}.{topic}` with the topic percent-encoded, for a prefix taken from discovery. */
export function prefixedSubject(prefix: string, topic: string): string {
  checkName('subject prefix', prefix);
  if (/[\s*>]/.test(prefix) || prefix.split('.').some((t) => t.length === 0)) {
    throw new RangeError(`subject prefix ${JSON.stringify(prefix)} is not a literal NATS subject`);
  }
  return `${prefix}.${encodeSubjectSegment(topic)}`;
}

function checkLegacyToken(kind: string, v: string): void {
  checkName(kind, v);
  // Older releases put names into subjects verbatim; these characters would split or widen the subject.
  if (/[\s.*>]/.test(v)) throw new RangeError(`${kind} name ${JSON.stringify(v)} cannot appear in a legacy subject`);
}

/** Core-NATS JSON subject used until Aug 2025. */
export function legacyKvEventsSubject(namespace: string, component: string): string {
  checkLegacyToken('namespace', namespace);
  checkLegacyToken('component', component);
  return `namespace.${namespace}.component.${component}.${LEGACY_TOPIC_KV_EVENTS}`;
}

/**
 * JetStream stream for durable KV events. Dynamo slugs
 * `namespace.{ns}.component.{comp}.kv-events`: lower-case, every character
 * outside [a-z0-9_-] (per Unicode code point) becomes `_`, leading `_` trimmed,
 * then `_` becomes `-`.
 */
export function jetStreamKvStreamName(namespace: string, component: string): string {
  checkName('namespace', namespace);
  checkName('component', component);
  const raw = `namespace.${namespace}.component.${component}.${TOPIC_KV_EVENTS}`.toLowerCase();
  let slug = '';
  for (const ch of raw) slug += /^[a-z0-9_-]$/.test(ch) ? ch : '_';
  return slug.replace(/^_+/, '').replaceAll('_', '-');
}

export function jetStreamKvSubject(namespace: string, component: string): string {
  return `${jetStreamKvStreamName(namespace, component)}.${TOPIC_KV_EVENTS}`;
}
