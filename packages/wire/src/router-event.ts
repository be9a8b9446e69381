/**
 * Dynamo's `RouterEvent` (lib/kv-router protocols), as msgpack (event plane,
 * `rmp_serde::to_vec_named`) or JSON (legacy core-NATS and JetStream paths).
 *
 * Wire shape, fields in declaration order (rmp and serde_json keep it):
 *   RouterEvent  { worker_id: u64, storage_tier: "device"|"host_pinned"|"disk"|"external",
 *                  residency_domain?: "worker"|"cache_owner", event: KvCacheEvent, state_source?: .. }
 *   KvCacheEvent { event_id: u64, data: KvCacheEventData, dp_rank: u32 }
 *   KvCacheEventData (externally tagged, snake_case):
 *     {"stored": {parent_hash: u64|nil, start_position: u32|nil,
 *                 blocks: [{block_hash: u64, tokens_hash: u64, mm_extra_info: obj|nil}]}}
 *     {"removed": {block_hashes: [u64]}}
 *     "cleared"
 * Defaults when absent (older publishers): storage_tier "device", dp_rank 0,
 * start_position nil, mm_extra_info nil, parent_hash nil. Unknown fields are ignored.
 */
import { STORAGE_TIERS, type ExternalHash, type KvEvent, type KvEventData, type WorkerId } from '@vantage/types';
import type { WireLimits } from './limits';
import { Fields, type WireValue } from './msgpack';
import { WireReject } from './result';
import { asMap, get, list, oneOf, opaque, optional, required, u32, u64, u64List, variant, type Obj } from './values';

/** Only a worker-owned event (`residency_domain` absent or "worker") is accepted: package README, "Field generations". */
function checkResidencyDomain(v: unknown, path: string): void {
  if (v === undefined || v === 'worker') return;
  if (typeof v === 'string') {
    throw new WireReject('unsupported', `${path}: residency domain ${JSON.stringify(v.slice(0, 64))} is not a worker-owned event`);
  }
  throw new WireReject('unsupported', `${path}: residency domain must be a string when present`);
}

function storedData(content: unknown, path: string, limits: WireLimits): KvEventData {
  const m = asMap(content, path);
  const parentHash = optional(get(m, 'parent_hash'), (v) => u64(v, `${path}.parent_hash`) as ExternalHash);
  const startPosition = optional(get(m, 'start_position'), (v) => u32(v, `${path}.start_position`));
  const blocks = list(required(m, 'blocks', path), `${path}.blocks`, limits.maxBlocksPerEvent);
  const blockHashes = new BigUint64Array(blocks.length);
  const tokensHashes = new BigUint64Array(blocks.length);
  let mm: unknown[] | undefined;
  for (let i = 0; i < blocks.length; i++) {
    const bp = `${path}.blocks[${i}]`;
    const b = asMap(blocks[i], bp);
    blockHashes[i] = u64(required(b, 'block_hash', bp), `${bp}.block_hash`);
    tokensHashes[i] = u64(required(b, 'tokens_hash', bp), `${bp}.tokens_hash`);
    const extra = get(b, 'mm_extra_info');
    if (extra !== undefined && extra !== null) {
      mm ??= new Array<unknown>(blocks.length).fill(null);
      mm[i] = opaque(extra, `${bp}.mm_extra_info`, limits.maxDepth);
    }
  }
  const out: KvEventData = { kind: 'stored', parentHash, startPosition, blockHashes, tokensHashes };
  return mm ? { ...out, mmExtraInfo: mm } : out;
}

function eventData(v: unknown, path: string, limits: WireLimits): KvEventData {
  const { tag, content } = variant(v, path);
  switch (tag) {
    case 'stored':
      return storedData(content, `${path}.stored`, limits);
    case 'removed': {
      const m = asMap(content, `${path}.removed`);
      const hashes = u64List(required(m, 'block_hashes', `${path}.removed`), `${path}.removed.block_hashes`, limits.maxBlocksPerEvent);
      return { kind: 'removed', blockHashes: hashes };
    }
    case 'cleared':
      if (content !== undefined && content !== null) {
        throw new WireReject('wrong_type', `${path}.cleared: a unit variant carries no content`);
      }
      return { kind: 'cleared' };
    default:
      throw new WireReject('unknown_variant', `${path}: unknown event kind ${JSON.stringify(tag.slice(0, 64))}`);
  }
}

/** Validate a decoded RouterEvent value tree into the domain type. Throws WireReject. */
export function routerEventFromValue(v: unknown, limits: WireLimits, path = 'router_event'): KvEvent {
  const m: Obj = asMap(v, path);
  const workerId = u64(required(m, 'worker_id', path), `${path}.worker_id`) as WorkerId;
  const tierValue = get(m, 'storage_tier'); // absent (older publishers) is device; nil is not a tier
  const tier = tierValue === undefined ? 'device' : oneOf(tierValue, `${path}.storage_tier`, STORAGE_TIERS);
  checkResidencyDomain(get(m, 'residency_domain'), `${path}.residency_domain`);
  const ep = `${path}.event`;
  const e = asMap(required(m, 'event', path), ep);
  const eventId = u64(required(e, 'event_id', ep), `${ep}.event_id`);
  const data = eventData(required(e, 'data', ep), `${ep}.data`, limits);
  const dpRank = optional(get(e, 'dp_rank'), (x) => u32(x, `${ep}.dp_rank`)) ?? 0;
  return { workerId, dpRank, storageTier: tier, eventId, data };
}

/**
 * A `kv-events` payload: 1.6.1 sends a msgpack array of RouterEvents per envelope (a batch, in
 * publisher order); older releases send one RouterEvent map. Both come back as a list. An empty
 * batch is valid (nothing to apply).
 */
export function routerEventsFromValue(v: unknown, limits: WireLimits, path = 'router_events'): KvEvent[] {
  return Array.isArray(v) ? routerEventList(v, limits, path, limits.maxBatchEvents) : [routerEventFromValue(v, limits, 'router_event')];
}

/** An array of at most `max` RouterEvents (anything else is refused). */
export function routerEventList(v: unknown, limits: WireLimits, path: string, max: number): KvEvent[] {
  const items = list(v, path, max);
  const out: KvEvent[] = new Array<KvEvent>(items.length);
  for (let i = 0; i < items.length; i++) out[i] = routerEventFromValue(items[i], limits, `${path}[${i}]`);
  return out;
}

function dataToWire(d: KvEventData): WireValue {
  switch (d.kind) {
    case 'stored': {
      if (d.blockHashes.length !== d.tokensHashes.length) {
        throw new RangeError('stored event: blockHashes and tokensHashes differ in length');
      }
      const blocks: WireValue[] = [];
      for (let i = 0; i < d.blockHashes.length; i++) {
        blocks.push(
          new Fields([
            ['block_hash', d.blockHashes[i]!],
            ['tokens_hash', d.tokensHashes[i]!],
            ['mm_extra_info', toWireOpaque(d.mmExtraInfo?.[i] ?? null)],
          ]),
        );
      }
      return new Fields([['stored', new Fields([['parent_hash', d.parentHash], ['start_position', d.startPosition], ['blocks', blocks]])]]);
    }
    case 'removed':
      return new Fields([['removed', new Fields([['block_hashes', Array.from(d.blockHashes)]])]]);
    case 'cleared':
      // A serde unit variant: the bare name, in msgpack (rmp 1.x) and JSON alike.
      return 'cleared';
  }
}

/** Opaque decoded data (plain objects, arrays, scalars) back to writer values. */
function toWireOpaque(v: unknown): WireValue {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean' || typeof v === 'string' || typeof v === 'bigint' || v instanceof Uint8Array) return v;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError('opaque value: only integers can be re-encoded');
    return v;
  }
  if (Array.isArray(v)) return v.map(toWireOpaque);
  if (typeof v === 'object') {
    return new Fields(Object.keys(v).map((k) => [k, toWireOpaque((v as Record<string, unknown>)[k])] as const));
  }
  throw new RangeError(`opaque value of type ${typeof v} cannot be encoded`);
}

/** The RouterEvent wire tree of a domain event, as current Dynamo writes it (`residency_domain: "worker"`). */
export function routerEventToWire(e: KvEvent): WireValue {
  return new Fields([
    ['worker_id', e.workerId],
    ['storage_tier', e.storageTier],
    ['residency_domain', 'worker'],
    ['event', new Fields([['event_id', e.eventId], ['data', dataToWire(e.data)], ['dp_rank', e.dpRank]])],
  ]);
}
