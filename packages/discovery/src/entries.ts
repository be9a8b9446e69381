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
 * Ids are read exactly (README.md, "What Dynamo 1.6.1 writes"). Unknown fields are ignored; a missing
 * required field, a wrong type or an id out of range is a rejection that names the field.
 */
import type { WorkerCapacity, WorkerId } from '@vantage/types';
import { decodeJsonExact, JsonFloat, type Result } from '@vantage/wire';

export type DiscoveryRejectCode = 'malformed' | 'truncated' | 'wrong_type' | 'missing_field' | 'out_of_range' | 'too_large' | 'unknown_variant';

type ParseResult<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly code: DiscoveryRejectCode; readonly reason: string };

/** The endpoint an entry belongs to. */
export interface EndpointScope {
  readonly namespace: string;
  readonly component: string;
  readonly endpoint: string;
}

export interface ModelCardEntry extends EndpointScope {
  readonly kind: 'model_card';
  readonly key: string;
  readonly instanceId: WorkerId;
  readonly modelName: string | null;
  /** From `kv_cache_block_size` and `runtime_config`. */
  readonly capacity: Omit<WorkerCapacity, 'schedulable'>;
  /** The worker runs a local indexer (1.6.1 default): its blocks can be recovered from it. */
  readonly enableLocalIndexer: boolean;
  readonly kvEventPublishing: boolean | null;
}

/** An endpoint instance (`v1/instances`, or an event source's recovery target). */
export interface RecoveryTarget extends EndpointScope {
  readonly instanceId: WorkerId;
  /** The request-plane transport, e.g. `{ kind: 'tcp', address: '127.0.0.1:PORT/…' }`. */
  readonly transport: { readonly kind: string; readonly address: string } | null;
  readonly codec: string | null;
}

export interface InstanceEntry extends RecoveryTarget {
  readonly kind: 'instance';
  readonly key: string;
}

/** What an event channel and an event source both say: the endpoint and the topic. */
interface EventEntry extends EndpointScope {
  readonly key: string;
  readonly topic: string;
}

export interface EventChannelEntry extends EventEntry {
  readonly kind: 'event_channel';
  /** The publisher (the envelope's `publisher_id`), one per topic per worker process or rank. */
  readonly publisherId: bigint;
  /** `transport.kind` as written (`Nats`, `Zmq`, …). */
  readonly transportKind: string;
  /** NATS subject prefix of the topic (`{prefix}.{topic}`); null for other transports. */
  readonly subjectPrefix: string | null;
}

export interface EventSourceEntry extends EventEntry {
  readonly kind: 'event_source';
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
/** Field `k` of `m`, required, read by `read` (paths name it as `path.k`). */
function req<T>(m: Obj, k: string, path: string, read: (v: unknown, path: string) => T): T {
  const v = own(m, k);
  if (v === undefined) throw new Reject('missing_field', `${path}.${k}: required field missing`);
  return read(v, `${path}.${k}`);
}
/** Field `k` of `m` read by `read`; null when absent or null. */
function opt<T>(m: Obj, k: string, path: string, read: (v: unknown, path: string) => T): T | null {
  const v = own(m, k);
  return v === undefined || v === null ? null : read(v, `${path}.${k}`);
}
function str(v: unknown, path: string): string {
  if (typeof v !== 'string') throw new Reject('wrong_type', `${path}: expected a string, got ${kindOf(v)}`);
  if (v.length === 0) throw new Reject('wrong_type', `${path}: empty string`);
  return v;
}
function uint(v: unknown, path: string, bits: 32 | 64): bigint {
  if (typeof v !== 'bigint') throw new Reject('wrong_type', `${path}: expected an unsigned ${bits === 64 ? '64-bit ' : ''}integer, got ${kindOf(v)}`);
  if (v < 0n || v >= 1n << BigInt(bits)) throw new Reject('out_of_range', `${path}: ${v} is outside [0, 2^${bits})`);
  return v;
}
const u64 = (v: unknown, path: string): bigint => uint(v, path, 64);
const workerId = (v: unknown, path: string): WorkerId => uint(v, path, 64) as WorkerId;
const u32 = (v: unknown, path: string): number => Number(uint(v, path, 32));
/** A positive count; 0 reads as "not advertised" (null), as an absent one does. */
function count(v: unknown, path: string): number | null {
  const n = u32(v, path);
  return n === 0 ? null : n;
}
function bool(v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') throw new Reject('wrong_type', `${path}: expected a boolean, got ${kindOf(v)}`);
  return v;
}

function scopeOf(m: Obj, path: string, endpointKey = 'endpoint'): EndpointScope {
  return { namespace: req(m, 'namespace', path, str), component: req(m, 'component', path, str), endpoint: req(m, endpointKey, path, str) };
}

/** `{"tcp": "addr"}` (or another single-key transport). */
function transportOf(v: unknown, path: string): { kind: string; address: string } {
  const m = obj(v, path);
  const keys = Object.keys(m);
  if (keys.length !== 1) throw new Reject('malformed', `${path}: expected one transport, got ${keys.length} keys`);
  const kind = keys[0]!;
  const addr = m[kind];
  return { kind, address: typeof addr === 'string' ? addr : JSON.stringify(addr, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x)) };
}

/** An endpoint instance: a `v1/instances` document or an event source's recovery target. */
function endpointOf(m: Obj, p: string): RecoveryTarget {
  return {
    ...scopeOf(m, p),
    instanceId: req(m, 'instance_id', p, workerId),
    transport: opt(m, 'transport', p, transportOf),
    codec: opt(m, 'request_plane_codec', p, str),
  };
}

function modelCard(key: string, d: Obj): ModelCardEntry {
  const p = 'model_card';
  const card = req(d, 'card_json', p, obj);
  const cp = `${p}.card_json`;
  const rc = req(card, 'runtime_config', cp, obj);
  const rp = `${cp}.runtime_config`;
  const blockSize = req(card, 'kv_cache_block_size', cp, u32);
  if (blockSize < 1) throw new Reject('out_of_range', `${cp}.kv_cache_block_size: must be at least 1`);
  const dpSize = opt(rc, 'data_parallel_size', rp, u32) ?? 1;
  if (dpSize < 1) throw new Reject('out_of_range', `${rp}.data_parallel_size: must be at least 1`);
  const dpStartRank = opt(rc, 'data_parallel_start_rank', rp, u32) ?? 0;
  if (dpStartRank + dpSize > 0xffff_ffff) throw new Reject('out_of_range', `${rp}: dp ranks past 2^32`);
  return {
    kind: 'model_card',
    key,
    ...scopeOf(d, p),
    instanceId: req(d, 'instance_id', p, workerId),
    modelName: opt(card, 'display_name', cp, str),
    capacity: {
      blockSize,
      totalKvBlocks: opt(rc, 'total_kv_blocks', rp, count),
      maxNumSeqs: opt(rc, 'max_num_seqs', rp, count),
      maxNumBatchedTokens: opt(rc, 'max_num_batched_tokens', rp, count),
      dpStartRank,
      dpSize,
    },
    enableLocalIndexer: opt(rc, 'enable_local_indexer', rp, bool) ?? false,
    kvEventPublishing: opt(rc, 'kv_event_publishing_enabled', rp, bool),
  };
}

/**
 * The key, `scope: {kind: "endpoint", endpoint: {namespace, component, name}}` and `topic` of an
 * event channel or source; other scope kinds are not events of a worker endpoint.
 */
function eventEntry(key: string, d: Obj, p: string): EventEntry {
  const scope = req(d, 'scope', p, obj);
  const kind = req(scope, 'kind', `${p}.scope`, str);
  if (kind !== 'endpoint') throw new Reject('unknown_variant', `${p}.scope.kind: ${JSON.stringify(kind.slice(0, 64))} is not an endpoint scope`);
  const endpoint = scopeOf(req(scope, 'endpoint', `${p}.scope`, obj), `${p}.scope.endpoint`, 'name');
  return { key, ...endpoint, topic: req(d, 'topic', p, str) };
}

function eventChannel(key: string, d: Obj): EventChannelEntry {
  const p = 'event_channel';
  const t = req(d, 'transport', p, obj);
  const transportKind = req(t, 'kind', `${p}.transport`, str);
  let subjectPrefix: string | null = null;
  if (transportKind.toLowerCase() === 'nats') {
    subjectPrefix = req(req(t, 'config', `${p}.transport`, obj), 'subject_prefix', `${p}.transport.config`, str);
    // A prefix is a literal subject: wildcards or empty tokens would widen or break the subscription.
    if (/[\s*>]/.test(subjectPrefix) || subjectPrefix.split('.').some((x) => x.length === 0)) {
      throw new Reject('malformed', `${p}.transport.config.subject_prefix: ${JSON.stringify(subjectPrefix.slice(0, 128))} is not a literal subject`);
    }
  }
  return {
    kind: 'event_channel',
    ...eventEntry(key, d, p),
    publisherId: req(d, 'instance_id', p, u64),
    transportKind,
    subjectPrefix,
  };
}

function eventSource(key: string, d: Obj): EventSourceEntry {
  const p = 'event_source';
  const meta = req(d, 'metadata', p, obj);
  const worker = req(meta, 'worker', `${p}.metadata`, obj);
  const wp = `${p}.metadata.worker`;
  const recoveryTarget = opt(meta, 'recovery_target', `${p}.metadata`, (v, rp) => endpointOf(obj(v, rp), rp));
  return {
    kind: 'event_source',
    ...eventEntry(key, d, p),
    publisherId: req(d, 'publisher_id', p, u64),
    workerId: req(worker, 'worker_id', wp, workerId),
    dpRank: opt(worker, 'dp_rank', wp, u32) ?? 0,
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
    const type = req(d, 'type', 'document', str);
    const want = BUCKETS[bucket];
    if (type !== want) throw new Reject('unknown_variant', `document.type: ${JSON.stringify(type.slice(0, 64))} under ${bucket} (expected ${want})`);
    switch (bucket) {
      case 'v1/mdc/':
        return { ok: true, value: modelCard(key, d) };
      case 'v1/instances/':
        return { ok: true, value: { kind: 'instance', key, ...endpointOf(d, 'instance') } };
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
