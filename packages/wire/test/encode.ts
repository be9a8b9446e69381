/**
 * Encoders that only tests (and benchmarks) use: Dynamo's messages in older field generations, in
 * JSON, and the kinds the simulated fleet does not publish (RouterEvent batches, ForwardPassMetrics,
 * ActiveSequenceEvents), plus the worker's side of the TCP request plane (`decodeTcpRequest`).
 * Other packages' tests import this as `@vantage/wire/test/encode`. Older generations are the
 * current shape (`src/`) without the fields added since; a value a generation cannot carry is a
 * RangeError.
 */
import type { KvEvent } from '@vantage/types';
import {
  encodeEnvelope,
  encodeEventPlaneMessage as encodeFleetMessage,
  TOPIC_ACTIVE_SEQUENCES,
  TOPIC_FORWARD_PASS_METRICS,
  TOPIC_KV_EVENTS,
  TOPIC_KV_METRICS,
  type ActiveLoad,
  type ActiveSequenceEvent,
  type ForwardPassMetrics,
  type Result,
} from '../src/index';
import { activeLoadToWire } from '../src/active-load';
import type { ActiveSequenceEventData } from '../src/active-sequence';
import type { EnvelopeHeader, EventPlanePayload } from '../src/codec';
import type { ForwardPassRequests } from '../src/forward-pass';
import { readJson } from '../src/json';
import { F64, Fields, writeMsgpack, type WireValue } from '../src/msgpack';
import type { TcpRequestFrame } from '../src/request-plane';
import { guard, WireReject } from '../src/result';
import { routerEventToWire } from '../src/router-event';
import { isMap, str } from '../src/values';

type Format = 'msgpack' | 'json';
const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

function encode(v: WireValue, format: Format | undefined): Uint8Array {
  return format === 'json' ? utf8.encode(writeJson(v)) : writeMsgpack(v);
}

// --- JSON -----------------------------------------------------------------------

function write(v: WireValue, parts: string[]): void {
  if (v === null) parts.push('null');
  else if (typeof v === 'boolean') parts.push(v ? 'true' : 'false');
  else if (typeof v === 'bigint') parts.push(v.toString(10));
  else if (v instanceof F64) {
    if (!Number.isFinite(v.value)) throw new RangeError(`JSON cannot carry ${v.value}`);
    // serde_json writes a whole f64 with a fraction (1.0), so it reads back as a float.
    parts.push(Number.isInteger(v.value) ? `${v.value}.0` : String(v.value));
  } else if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`only safe integers are written, got ${v}`);
    parts.push(String(v));
  } else if (typeof v === 'string') parts.push(JSON.stringify(v));
  else if (v instanceof Uint8Array) {
    // serde_json writes bytes as an array of numbers.
    parts.push(`[${Array.from(v).join(',')}]`);
  } else if (v instanceof Fields) {
    parts.push('{');
    v.entries.forEach(([k, x], i) => {
      if (i > 0) parts.push(',');
      parts.push(JSON.stringify(k), ':');
      write(x, parts);
    });
    parts.push('}');
  } else {
    parts.push('[');
    v.forEach((x, i) => {
      if (i > 0) parts.push(',');
      write(x, parts);
    });
    parts.push(']');
  }
}

/** Compact JSON, like serde_json::to_string: bigints as bare integer literals, the way serde_json prints u64. */
export function writeJson(v: WireValue): string {
  const parts: string[] = [];
  write(v, parts);
  return parts.join('');
}

// --- field generations ------------------------------------------------------------

/** The fields of `f` but `keys`. */
const drop = (f: WireValue, ...keys: string[]): Fields => new Fields((f as Fields).entries.filter(([k]) => !keys.includes(k)));
/** `f` with the value of `key` replaced by `fn` of it. */
const edit = (f: WireValue, key: string, fn: (v: WireValue) => WireValue): Fields =>
  new Fields((f as Fields).entries.map(([k, v]) => [k, k === key ? fn(v) : v] as const));

/**
 * Field generations of RouterEvent, oldest first; each includes every field
 * of the ones before it.
 *   base            worker_id, event{event_id, data}                 (until Oct 2025)
 *   dp_rank         + event.dp_rank                                  (Oct 2025)
 *   mm_extra_info   + blocks[].mm_extra_info                         (Dec 2025)
 *   storage_tier    + storage_tier                                   (Mar 2026)
 *   start_position  + stored.start_position                          (Apr 2026)
 *   residency_domain + residency_domain: "worker"                    (current)
 */
export const ROUTER_EVENT_GENERATIONS = ['base', 'dp_rank', 'mm_extra_info', 'storage_tier', 'start_position', 'residency_domain'] as const;
export type RouterEventGeneration = (typeof ROUTER_EVENT_GENERATIONS)[number];

function routerEventWire(e: KvEvent, gen: RouterEventGeneration = 'residency_domain'): WireValue {
  const has = (field: RouterEventGeneration): boolean => ROUTER_EVENT_GENERATIONS.indexOf(gen) >= ROUTER_EVENT_GENERATIONS.indexOf(field);
  if (!has('dp_rank') && e.dpRank !== 0) throw new RangeError(`generation ${gen} cannot carry dp_rank ${e.dpRank}`);
  if (!has('storage_tier') && e.storageTier !== 'device') throw new RangeError(`generation ${gen} cannot carry storage tier ${e.storageTier}`);
  let top = routerEventToWire(e);
  if (!has('residency_domain')) top = drop(top, 'residency_domain');
  if (!has('storage_tier')) top = drop(top, 'storage_tier');
  return edit(top, 'event', (ev) => {
    const event = has('dp_rank') ? ev : drop(ev, 'dp_rank');
    return edit(event, 'data', (d) =>
      d instanceof Fields
        ? edit(d, 'stored', (st) => {
            const stored = has('start_position') ? st : drop(st, 'start_position');
            return has('mm_extra_info') ? stored : edit(stored, 'blocks', (b) => (b as WireValue[]).map((x) => drop(x, 'mm_extra_info')));
          })
        : d,
    );
  });
}

interface RouterEventEncodeOptions {
  /** Field generation to reproduce; the current Dynamo shape unless stated. */
  readonly generation?: RouterEventGeneration;
}

export function encodeRouterEventMsgpack(event: KvEvent, opts?: RouterEventEncodeOptions): Uint8Array {
  return writeMsgpack(routerEventWire(event, opts?.generation));
}

export function encodeRouterEventJson(event: KvEvent, opts?: RouterEventEncodeOptions): string {
  return writeJson(routerEventWire(event, opts?.generation));
}

/** A batch of RouterEvents as 1.6.1 sends it (a msgpack array of maps). */
export function encodeRouterEventBatchMsgpack(events: readonly KvEvent[], opts?: RouterEventEncodeOptions): Uint8Array {
  return writeMsgpack(events.map((e) => routerEventWire(e, opts?.generation)));
}

/** `kv_used_blocks`: Jan 2026 shape. `scheduler_load_scope`: adds that field (current). */
export const ACTIVE_LOAD_GENERATIONS = ['kv_used_blocks', 'scheduler_load_scope'] as const;
type ActiveLoadGeneration = (typeof ACTIVE_LOAD_GENERATIONS)[number];

export function encodeActiveLoad(load: ActiveLoad, opts?: { readonly generation?: ActiveLoadGeneration; readonly format?: Format }): Uint8Array {
  if (opts?.generation === 'kv_used_blocks' && load.schedulerLoadScope !== null) throw new RangeError('generation kv_used_blocks cannot carry scheduler_load_scope');
  const wire = opts?.generation === 'kv_used_blocks' ? drop(activeLoadToWire(load), 'scheduler_load_scope') : activeLoadToWire(load);
  return encode(wire, opts?.format);
}

// --- ActiveSequenceEvent ------------------------------------------------------------

/**
 *   base                  token_sequence, expected_output_tokens
 *   track_prefill_tokens  + track_prefill_tokens
 *   prefill_load_hint     + prefill_load_hint (current)
 */
export const ACTIVE_SEQUENCE_GENERATIONS = ['base', 'track_prefill_tokens', 'prefill_load_hint'] as const;
type ActiveSequenceGeneration = (typeof ACTIVE_SEQUENCE_GENERATIONS)[number];


function dataToWire(d: ActiveSequenceEventData, gen: ActiveSequenceGeneration): WireValue {
  switch (d.kind) {
    case 'free':
      return 'Free';
    case 'mark_prefill_completed':
      return 'MarkPrefillCompleted';
    case 'add_request': {
      const f: [string, WireValue][] = [['token_sequence', d.tokenSequence ? Array.from(d.tokenSequence) : null]];
      if (gen !== 'base') f.push(['track_prefill_tokens', d.trackPrefillTokens]);
      else if (!d.trackPrefillTokens) throw new RangeError('generation base cannot carry track_prefill_tokens = false');
      f.push(['expected_output_tokens', d.expectedOutputTokens]);
      if (gen === 'prefill_load_hint') {
        const h = d.prefillLoadHint;
        f.push([
          'prefill_load_hint',
          h === null
            ? null
            : new Fields([
                ['initial_effective_prefill_tokens', h.initialEffectivePrefillTokens],
                [
                  'expected_prefill_duration',
                  h.expectedPrefillDuration === null
                    ? null
                    : new Fields([
                        ['secs', h.expectedPrefillDuration.secs],
                        ['nanos', h.expectedPrefillDuration.nanos],
                      ]),
                ],
              ]),
        ]);
      } else if (d.prefillLoadHint !== null) {
        throw new RangeError(`generation ${gen} cannot carry prefill_load_hint`);
      }
      return new Fields([['AddRequest', new Fields(f)]]);
    }
  }
}

function activeSequenceEventToWire(e: ActiveSequenceEvent, gen: ActiveSequenceGeneration = 'prefill_load_hint'): WireValue {
  return new Fields([
    ['request_id', e.requestId],
    ['worker', new Fields([['worker_id', e.workerId], ['dp_rank', e.dpRank]])],
    ['data', dataToWire(e.data, gen)],
    ['router_id', e.routerId],
    ['lora_name', e.loraName],
  ]);
}

function activeSequenceBatchToWire(events: readonly ActiveSequenceEvent[], gen: ActiveSequenceGeneration = 'prefill_load_hint'): WireValue {
  return new Fields([['events', events.map((e) => activeSequenceEventToWire(e, gen))]]);
}

interface ActiveSequenceEncodeOptions {
  readonly generation?: ActiveSequenceGeneration;
  readonly format?: Format;
}

export function encodeActiveSequenceEvent(event: ActiveSequenceEvent, opts?: ActiveSequenceEncodeOptions): Uint8Array {
  return encode(activeSequenceEventToWire(event, opts?.generation), opts?.format);
}

export function encodeActiveSequenceBatch(events: readonly ActiveSequenceEvent[], opts?: ActiveSequenceEncodeOptions): Uint8Array {
  return encode(activeSequenceBatchToWire(events, opts?.generation), opts?.format);
}

// --- ForwardPassMetrics --------------------------------------------------------------

function requestsToWire(r: ForwardPassRequests, scheduled: boolean): WireValue {
  const f: [string, WireValue][] = [
    ['num_prefill_requests', r.prefillRequests],
    ['sum_prefill_tokens', r.prefillTokens],
    ['var_prefill_length', new F64(r.prefillLengthVariance)],
  ];
  if (scheduled) f.push(['sum_prefill_kv_tokens', r.prefillKvTokens]);
  f.push(['num_decode_requests', r.decodeRequests], ['sum_decode_kv_tokens', r.decodeKvTokens], ['var_decode_kv_tokens', new F64(r.decodeKvTokensVariance)]);
  return new Fields(f);
}

/** The 1.6.1 wire tree (worker id as a decimal string), for fixtures and the simulated fleet. */
function forwardPassToWire(p: ForwardPassMetrics): WireValue {
  return new Fields([
    ['version', p.version],
    ['worker_id', String(p.workerId)],
    ['dp_rank', p.dpRank],
    ['counter_id', p.counterId],
    ['wall_time', new F64(p.wallTime)],
    ['scheduled_requests', requestsToWire(p.scheduled, true)],
    ['queued_requests', requestsToWire(p.queued, false)],
  ]);
}

export function encodeForwardPassMetrics(m: ForwardPassMetrics, opts?: { readonly format?: Format }): Uint8Array {
  return encode(forwardPassToWire(m), opts?.format);
}

// --- event plane ----------------------------------------------------------------------

interface EventPlaneEncodeOptions {
  readonly routerEventGeneration?: RouterEventGeneration;
  readonly activeLoadGeneration?: ActiveLoadGeneration;
  readonly activeSequenceGeneration?: ActiveSequenceGeneration;
  /** Send active-sequence events as one `ActiveSequenceEventBatch` (newer releases); default true. */
  readonly batchActiveSequences?: boolean;
}

/** Any payload in an envelope whose topic matches the payload kind, in any generation. */
export function encodeEventPlaneMessage(header: EnvelopeHeader, payload: EventPlanePayload, opts?: EventPlaneEncodeOptions): Uint8Array {
  const wrap = (topic: string, body: Uint8Array): Uint8Array => encodeEnvelope({ ...header, topic, payload: body });
  switch (payload.kind) {
    case 'kv_event':
      return opts?.routerEventGeneration === undefined ? encodeFleetMessage(header, payload) : wrap(TOPIC_KV_EVENTS, encodeRouterEventMsgpack(payload.event, { generation: opts.routerEventGeneration }));
    case 'active_load':
      return opts?.activeLoadGeneration === undefined ? encodeFleetMessage(header, payload) : wrap(TOPIC_KV_METRICS, encodeActiveLoad(payload.load, { generation: opts.activeLoadGeneration }));
    case 'kv_events':
      return wrap(TOPIC_KV_EVENTS, encodeRouterEventBatchMsgpack(payload.events, { generation: opts?.routerEventGeneration }));
    case 'forward_pass':
      return wrap(TOPIC_FORWARD_PASS_METRICS, encodeForwardPassMetrics(payload.metrics));
    case 'active_sequences': {
      const so = { generation: opts?.activeSequenceGeneration };
      if (opts?.batchActiveSequences !== false) return wrap(TOPIC_ACTIVE_SEQUENCES, encodeActiveSequenceBatch(payload.events, so));
      if (payload.events.length !== 1) throw new RangeError('an unbatched active-sequence message carries exactly one event');
      return wrap(TOPIC_ACTIVE_SEQUENCES, encodeActiveSequenceEvent(payload.events[0]!, so));
    }
  }
}

// --- the worker's side of the request plane --------------------------------------------

/** One complete request frame (what a worker reads); the inverse of `encodeTcpRequest`. */
export function decodeTcpRequest(bytes: Uint8Array): Result<TcpRequestFrame> {
  return guard(() => {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const need = (n: number, what: string): void => {
      if (bytes.length < n) throw new WireReject('truncated', `request frame: ${what} cut off`);
    };
    need(2, 'path length');
    const pl = dv.getUint16(0);
    need(2 + pl + 2, 'path');
    const endpointPath = text(bytes.subarray(2, 2 + pl), 'request frame path');
    const hl = dv.getUint16(2 + pl);
    const ho = 4 + pl;
    need(ho + hl + 4, 'headers');
    const h = readJson(bytes.subarray(ho, ho + hl), hl + 1, 4);
    if (!isMap(h)) throw new WireReject('wrong_type', 'request frame headers: expected a JSON object');
    const headers: Record<string, string> = {};
    for (const k of Object.keys(h)) headers[k] = str(h[k], `request frame headers.${k}`, 4096);
    const bl = dv.getUint32(ho + hl);
    const bo = ho + hl + 4;
    need(bo + bl, 'payload');
    if (bytes.length > bo + bl) throw new WireReject('malformed', 'request frame: trailing bytes');
    return { endpointPath, headers, payload: bytes.slice(bo, bo + bl) };
  });
}

function text(b: Uint8Array, what: string): string {
  try {
    return utf8Strict.decode(b);
  } catch {
    throw new WireReject('malformed', `${what}: not UTF-8`);
  }
}
