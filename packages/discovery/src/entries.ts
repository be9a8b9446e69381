/**
 * Dynamo 1.6.1's discovery entries, parsed from their JSON documents (transport-free: a key and its
 * bytes in, a typed entry or a rejection out). Shapes as the 1.6.1 mocker writes them:
 *
 *   v1/mdc/{ns}/{comp}/{ep}/{id hex}        {"type":"Model","namespace","component","endpoint","instance_id":<u64>,
 *                                            "card_json":{"display_name","kv_cache_block_size",
 *                                              "runtime_config":{"total_kv_blocks","max_num_seqs","max_num_batched_tokens",
 *                                                "data_parallel_start_rank","data_parallel_size","enable_local_indexer",…},…}}
 *   v1/instances/{ns}/{comp}/{ep}/{id hex}  {"type":"Endpoint","namespace","component","endpoint","instance_id":<u64>,
 *                                            "transport":{"tcp":"127.0.0.1:PORT/…"} | {"nats_tcp":"…"},"request_plane_codec":"msgpack"}
 *   v1/event_channels/{scope…}/{id hex}     {"type":"EventChannel","scope":{"kind":"endpoint","endpoint":{"namespace","component","name"}},
 *                                            "topic","instance_id":<publisher u64>,
 *                                            "transport":{"kind":"Nats","config":{"subject_prefix":"namespace.….endpoint.generate"}}}
 *   v1/event_sources/{scope…}/{id hex}      {"type":"EventSource","scope":{…},"topic","publisher_id":<u64>,
 *                                            "metadata":{"worker":{"worker_id":<u64>,"dp_rank"},"publisher_id",
 *                                              "recovery_target":{"namespace","component","endpoint","instance_id",
 *                                                "transport":{…},"request_plane_codec"}}}
 *
 * Ids are u64 written as bare JSON numbers (18329147160771148149 is typical): they are read with an
 * exact JSON parser, never through a JS number. Unknown fields are ignored; a missing required
 * field, a wrong type or an id out of range is a rejection that names the field.
 */
import type { WorkerId } from '@vantage/types';
import { decodeJsonExact, JsonFloat, type Result } from '@vantage/wire';

export type DiscoveryRejectCode = 'malformed' | 'truncated' | 'wrong_type' | 'missing_field' | 'out_of_range' | 'too_large' | 'unknown_variant';

type ParseResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly code: DiscoveryRejectCode; readonly reason: string };

/** The endpoint an entry belongs to. */
export interface EndpointScope {
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
}

/** What a model card says about one worker's capacity. */
export interface CardCapacity {
  /** Tokens per KV block (`kv_cache_block_size`). */
  readonly blockSize: number;
  /** KV blocks per dp rank (`runtime_config.total_kv_blocks`); null when the card does not say. */
  readonly totalKvBlocks: number | null;
  readonly maxNumSeqs: number | null;
  /** Prefill token budget per forward pass: the denominator of P. */
  readonly maxNumBatchedTokens: number | null;
  readonly dpStartRank: number;
  readonly dpSize: number;
}

export interface ModelCardEntry extends EndpointScope {
  readonly kind: 'model_card';
  readonly key: string;
  readonly instanceId: WorkerId;
  readonly modelName: string | null;
  readonly capacity: CardCapacity;
  readonly enableLocalIndexer: boolean;
  readonly kvEventPublishing: boolean | null;
}

export interface InstanceEntry extends EndpointScope {
  readonly kind: 'instance';
  readonly key: string;
  readonly instanceId: WorkerId;
  /** The request-plane transport, e.g. `{ kind: 'tcp', address: '127.0.0.1:PORT/…' }`. */
  readonly transport: { readonly kind: string; readonly address: string } | null;
  readonly codec: string | null;
}

export interface EventChannelEntry extends EndpointScope {
  readonly kind: 'event_channel';
  readonly key: string;
  readonly topic: string;
  /** The publisher (the envelope's `publisher_id`), one per topic per worker process or rank. */
  readonly publisherId: bigint;
  /** `transport.kind` as written (`Nats`, `Zmq`, …). */
  readonly transportKind: string;
  /** NATS subject prefix of the topic (`{prefix}.{topic}`); null for other transports. */
  readonly subjectPrefix: string | null;
}

export interface RecoveryTarget extends EndpointScope {
  readonly instanceId: WorkerId;
  readonly transport: { readonly kind: string; readonly address: string } | null;
  readonly codec: string | null;
}

export interface EventSourceEntry extends EndpointScope {
  readonly kind: 'event_source';
  readonly key: string;
  readonly topic: string;
  readonly publisherId: bigint;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** The worker's local indexer, to recover its blocks from (1.6.1: `worker_kv_query_source_<publisher hex>`). */
  readonly recoveryTarget: RecoveryTarget | null;
}

/** A key under a bucket this package does not interpret (kept out of the view, not an error). */
export interface OtherEntry {
  readonly kind: 'other';
  readonly key: string;
}

export type DiscoveryEntry = ModelCardEntry | InstanceEntry | EventChannelEntry | EventSourceEntry | OtherEntry;

export const DISCOVERY_PREFIX = 'v1/';
const BUCKETS = {
  'v1/mdc/': 'Model',
  'v1/instances/': 'Endpoint',
  'v1/event_channels/': 'EventChannel',
  'v1/event_sources/': 'EventSource',
} as const;

/** Largest discovery document accepted (a model card with a chat template is a few tens of kB). */
const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;
const U64_LIMIT = 1n << 64n;
const U32_LIMIT = 1n << 32n;

class Reject extends Error {
  constructor(
    readonly code: DiscoveryRejectCode,
    readonly reason: string,
  ) {
    super(reason);
  }
}

type Obj = Readonly<Record<string, unknown>>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof JsonFloat) && !(v instanceof Uint8Array);
}
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'missing';
  if (Array.isArray(v)) return 'array';
  if (v instanceof JsonFloat) return 'float';
  if (typeof v === 'bigint') return 'integer';
  return typeof v;
}
const own = (m: Obj, k: string): unknown => (Object.prototype.hasOwnProperty.call(m, k) ? m[k] : undefined);
function obj(v: unknown, path: string): Obj {
  if (!isObj(v)) throw new Reject('wrong_type', `${path}: expected an object, got ${kindOf(v)}`);
  return v;
}
function field(m: Obj, k: string, path: string): unknown {
  const v = own(m, k);
  if (v === undefined) throw new Reject('missing_field', `${path}.${k}: required field missing`);
  return v;
}
function str(v: unknown, path: string): string {
  if (typeof v !== 'string') throw new Reject('wrong_type', `${path}: expected a string, got ${kindOf(v)}`);
  if (v.length === 0) throw new Reject('wrong_type', `${path}: empty string`);
  return v;
}
function optStr(v: unknown, path: string): string | null {
  return v === undefined || v === null ? null : str(v, path);
}
function u64(v: unknown, path: string): bigint {
  if (typeof v !== 'bigint') throw new Reject('wrong_type', `${path}: expected an unsigned 64-bit integer, got ${kindOf(v)}`);
  if (v < 0n || v >= U64_LIMIT) throw new Reject('out_of_range', `${path}: ${v} is outside [0, 2^64)`);
  return v;
}
function u32(v: unknown, path: string): number {
  if (typeof v !== 'bigint') throw new Reject('wrong_type', `${path}: expected an unsigned integer, got ${kindOf(v)}`);
  if (v < 0n || v >= U32_LIMIT) throw new Reject('out_of_range', `${path}: ${v} is outside [0, 2^32)`);
  return Number(v);
}
/** A positive count; absent, null or 0 read as "not advertised" (null). */
function optCount(v: unknown, path: string): number | null {
  if (v === undefined || v === null) return null;
  const n = u32(v, path);
  return n === 0 ? null : n;
}
function optBool(v: unknown, path: string): boolean | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'boolean') throw new Reject('wrong_type', `${path}: expected a boolean, got ${kindOf(v)}`);
  return v;
}

function scopeOf(m: Obj, path: string, endpointKey = 'endpoint'): EndpointScope {
  return {
    namespace: str(field(m, 'namespace', path), `${path}.namespace`),
    component: str(field(m, 'component', path), `${path}.component`),
    endpoint: str(field(m, endpointKey, path), `${path}.${endpointKey}`),
  };
}

/** `{"tcp": "addr"}` (or another single-key transport); null when absent. */
function transportOf(v: unknown, path: string): { kind: string; address: string } | null {
  if (v === undefined || v === null) return null;
  const m = obj(v, path);
  const keys = Object.keys(m);
  if (keys.length !== 1) throw new Reject('malformed', `${path}: expected one transport, got ${keys.length} keys`);
  const kind = keys[0]!;
  const addr = m[kind];
  return { kind, address: typeof addr === 'string' ? addr : JSON.stringify(addr, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x)) };
}

function modelCard(key: string, d: Obj): ModelCardEntry {
  const p = 'model_card';
  const card = obj(field(d, 'card_json', p), `${p}.card_json`);
  const rc = obj(field(card, 'runtime_config', `${p}.card_json`), `${p}.card_json.runtime_config`);
  const rp = `${p}.card_json.runtime_config`;
  const blockSize = u32(field(card, 'kv_cache_block_size', `${p}.card_json`), `${p}.card_json.kv_cache_block_size`);
  if (blockSize < 1) throw new Reject('out_of_range', `${p}.card_json.kv_cache_block_size: must be at least 1`);
  const dpSizeRaw = own(rc, 'data_parallel_size');
  const dpSize = dpSizeRaw === undefined || dpSizeRaw === null ? 1 : u32(dpSizeRaw, `${rp}.data_parallel_size`);
  if (dpSize < 1) throw new Reject('out_of_range', `${rp}.data_parallel_size: must be at least 1`);
  const startRaw = own(rc, 'data_parallel_start_rank');
  const dpStartRank = startRaw === undefined || startRaw === null ? 0 : u32(startRaw, `${rp}.data_parallel_start_rank`);
  if (dpStartRank + dpSize > 0xffff_ffff) throw new Reject('out_of_range', `${rp}: dp ranks past 2^32`);
  return {
    kind: 'model_card',
    key,
    ...scopeOf(d, p),
    instanceId: u64(field(d, 'instance_id', p), `${p}.instance_id`) as WorkerId,
    modelName: optStr(own(card, 'display_name'), `${p}.card_json.display_name`),
    capacity: {
      blockSize,
      totalKvBlocks: optCount(own(rc, 'total_kv_blocks'), `${rp}.total_kv_blocks`),
      maxNumSeqs: optCount(own(rc, 'max_num_seqs'), `${rp}.max_num_seqs`),
      maxNumBatchedTokens: optCount(own(rc, 'max_num_batched_tokens'), `${rp}.max_num_batched_tokens`),
      dpStartRank,
      dpSize,
    },
    enableLocalIndexer: optBool(own(rc, 'enable_local_indexer'), `${rp}.enable_local_indexer`) ?? false,
    kvEventPublishing: optBool(own(rc, 'kv_event_publishing_enabled'), `${rp}.kv_event_publishing_enabled`),
  };
}

function instance(key: string, d: Obj): InstanceEntry {
  const p = 'instance';
  return {
    kind: 'instance',
    key,
    ...scopeOf(d, p),
    instanceId: u64(field(d, 'instance_id', p), `${p}.instance_id`) as WorkerId,
    transport: transportOf(own(d, 'transport'), `${p}.transport`),
    codec: optStr(own(d, 'request_plane_codec'), `${p}.request_plane_codec`),
  };
}

/** `scope: {kind: "endpoint", endpoint: {namespace, component, name}}`; other scope kinds are not events of a worker endpoint. */
function eventScope(d: Obj, p: string): EndpointScope {
  const scope = obj(field(d, 'scope', p), `${p}.scope`);
  const kind = str(field(scope, 'kind', `${p}.scope`), `${p}.scope.kind`);
  if (kind !== 'endpoint') throw new Reject('unknown_variant', `${p}.scope.kind: ${JSON.stringify(kind.slice(0, 64))} is not an endpoint scope`);
  return scopeOf(obj(field(scope, 'endpoint', `${p}.scope`), `${p}.scope.endpoint`), `${p}.scope.endpoint`, 'name');
}

function eventChannel(key: string, d: Obj): EventChannelEntry {
  const p = 'event_channel';
  const t = obj(field(d, 'transport', p), `${p}.transport`);
  const transportKind = str(field(t, 'kind', `${p}.transport`), `${p}.transport.kind`);
  let subjectPrefix: string | null = null;
  if (transportKind.toLowerCase() === 'nats') {
    const c = obj(field(t, 'config', `${p}.transport`), `${p}.transport.config`);
    subjectPrefix = str(field(c, 'subject_prefix', `${p}.transport.config`), `${p}.transport.config.subject_prefix`);
    // A prefix is a literal subject: wildcards or empty tokens would widen or break the subscription.
    if (/[\s*>]/.test(subjectPrefix) || subjectPrefix.split('.').some((x) => x.length === 0)) {
      throw new Reject('malformed', `${p}.transport.config.subject_prefix: ${JSON.stringify(subjectPrefix.slice(0, 128))} is not a literal subject`);
    }
  }
  return {
    kind: 'event_channel',
    key,
    ...eventScope(d, p),
    topic: str(field(d, 'topic', p), `${p}.topic`),
    publisherId: u64(field(d, 'instance_id', p), `${p}.instance_id`),
    transportKind,
    subjectPrefix,
  };
}

function eventSource(key: string, d: Obj): EventSourceEntry {
  const p = 'event_source';
  const meta = obj(field(d, 'metadata', p), `${p}.metadata`);
  const worker = obj(field(meta, 'worker', `${p}.metadata`), `${p}.metadata.worker`);
  const wp = `${p}.metadata.worker`;
  const rtRaw = own(meta, 'recovery_target');
  let recoveryTarget: RecoveryTarget | null = null;
  if (rtRaw !== undefined && rtRaw !== null) {
    const rp = `${p}.metadata.recovery_target`;
    const rt = obj(rtRaw, rp);
    recoveryTarget = {
      ...scopeOf(rt, rp),
      instanceId: u64(field(rt, 'instance_id', rp), `${rp}.instance_id`) as WorkerId,
      transport: transportOf(own(rt, 'transport'), `${rp}.transport`),
      codec: optStr(own(rt, 'request_plane_codec'), `${rp}.request_plane_codec`),
    };
  }
  const dp = own(worker, 'dp_rank');
  return {
    kind: 'event_source',
    key,
    ...eventScope(d, p),
    topic: str(field(d, 'topic', p), `${p}.topic`),
    publisherId: u64(field(d, 'publisher_id', p), `${p}.publisher_id`),
    workerId: u64(field(worker, 'worker_id', wp), `${wp}.worker_id`) as WorkerId,
    dpRank: dp === undefined || dp === null ? 0 : u32(dp, `${wp}.dp_rank`),
    recoveryTarget,
  };
}

/**
 * Parse one discovery entry from its logical key and its JSON value. Keys outside the four buckets
 * give `{ kind: 'other' }`; a document whose `type` does not match its bucket is refused.
 */
export function parseDiscoveryEntry(key: string, value: Uint8Array | string): ParseResult<DiscoveryEntry> {
  if (typeof key !== 'string' || key.length === 0) return { ok: false, code: 'malformed', reason: 'key: expected a non-empty string' };
  const bucket = (Object.keys(BUCKETS) as (keyof typeof BUCKETS)[]).find((b) => key.startsWith(b));
  if (bucket === undefined) return { ok: true, value: { kind: 'other', key } };
  const parsed: Result<unknown> = decodeJsonExact(value, { limits: { maxMessageBytes: MAX_DOCUMENT_BYTES } });
  if (!parsed.ok) return { ok: false, code: parsed.code === 'unsupported' ? 'malformed' : parsed.code, reason: `${key}: ${parsed.reason}` };
  try {
    const d = obj(parsed.value, 'document');
    const type = str(field(d, 'type', 'document'), 'document.type');
    const want = BUCKETS[bucket];
    if (type !== want) throw new Reject('unknown_variant', `document.type: ${JSON.stringify(type.slice(0, 64))} under ${bucket} (expected ${want})`);
    switch (bucket) {
      case 'v1/mdc/':
        return { ok: true, value: modelCard(key, d) };
      case 'v1/instances/':
        return { ok: true, value: instance(key, d) };
      case 'v1/event_channels/':
        return { ok: true, value: eventChannel(key, d) };
      case 'v1/event_sources/':
        return { ok: true, value: eventSource(key, d) };
    }
  } catch (e) {
    if (e instanceof Reject) return { ok: false, code: e.code, reason: `${key}: ${e.reason}` };
    return { ok: false, code: 'malformed', reason: `${key}: unexpected parser failure: ${e instanceof Error ? e.message : String(e)}` };
  }
}
