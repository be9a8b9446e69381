/**
 * Dynamo's `ActiveSequenceEvent` (router replica sync, published on
 * `...component.{comp}.active_sequences_events` with `--router-replica-sync`).
 * Newer releases batch them as `ActiveSequenceEventBatch { events: [..] }`.
 *
 * Wire shape, declaration order:
 *   { request_id: string, worker: { worker_id: u64, dp_rank: u32 },
 *     data: {"AddRequest": { token_sequence: [u64]|nil,           (sequence hashes)
 *                            track_prefill_tokens: bool (default true),
 *                            expected_output_tokens: u32|nil,
 *                            prefill_load_hint: { initial_effective_prefill_tokens: usize,
 *                                                 expected_prefill_duration: {secs: u64, nanos: u32}|nil }|nil }}
 *         | "Free" | "MarkPrefillCompleted",
 *     router_id: u64, lora_name: string|nil }
 */
import type { WorkerId } from '@vantage/types';
import type { WireLimits } from './limits';
import { WireReject } from './result';
import { asMap, bool, count, get, isMap, list, optional, required, str, u32, u64, u64List, variant } from './values';

/** serde's `std::time::Duration`: whole seconds plus nanoseconds below one second. */
interface WireDuration {
  readonly secs: bigint;
  readonly nanos: number;
}

interface PrefillLoadHint {
  /** Dynamo's effective prefill work for the request (prompt tokens minus cached overlap). */
  readonly initialEffectivePrefillTokens: number;
  readonly expectedPrefillDuration: WireDuration | null;
}

export type ActiveSequenceEventData =
  | {
      readonly kind: 'add_request';
      /** Sequence hashes of the request's blocks; null when the router did not send them. */
      readonly tokenSequence: BigUint64Array | null;
      readonly trackPrefillTokens: boolean;
      readonly expectedOutputTokens: number | null;
      readonly prefillLoadHint: PrefillLoadHint | null;
    }
  | { readonly kind: 'free' }
  | { readonly kind: 'mark_prefill_completed' };

export interface ActiveSequenceEvent {
  readonly requestId: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Publishing router's id (or worker id for worker-origin completion marks); used to drop one's own echo. */
  readonly routerId: bigint;
  readonly loraName: string | null;
  readonly data: ActiveSequenceEventData;
}

const NANOS_PER_SEC = 1_000_000_000;
const U64_MAX = 0xffff_ffff_ffff_ffffn;

function duration(v: unknown, path: string): WireDuration {
  // serde accepts a struct as a map or as a [secs, nanos] sequence.
  let secsV: unknown;
  let nanosV: unknown;
  if (Array.isArray(v)) {
    if (v.length !== 2) throw new WireReject('malformed', `${path}: a duration sequence has 2 entries, got ${v.length}`);
    [secsV, nanosV] = v;
  } else {
    const m = asMap(v, path);
    secsV = required(m, 'secs', path);
    nanosV = required(m, 'nanos', path);
  }
  let secs = u64(secsV, `${path}.secs`);
  let nanos = u32(nanosV, `${path}.nanos`);
  // Like serde: nanos past one second carry into secs, refusing overflow.
  if (nanos >= NANOS_PER_SEC) {
    secs += BigInt(Math.floor(nanos / NANOS_PER_SEC));
    nanos %= NANOS_PER_SEC;
    if (secs > U64_MAX) throw new WireReject('out_of_range', `${path}: duration overflows`);
  }
  return { secs, nanos };
}

function prefillLoadHint(v: unknown, path: string): PrefillLoadHint {
  const m = asMap(v, path);
  return {
    initialEffectivePrefillTokens: count(required(m, 'initial_effective_prefill_tokens', path), `${path}.initial_effective_prefill_tokens`),
    expectedPrefillDuration: optional(get(m, 'expected_prefill_duration'), (x) => duration(x, `${path}.expected_prefill_duration`)),
  };
}

function eventData(v: unknown, path: string, limits: WireLimits): ActiveSequenceEventData {
  const { tag, content } = variant(v, path);
  switch (tag) {
    case 'AddRequest': {
      const p = `${path}.AddRequest`;
      const m = asMap(content, p);
      const track = get(m, 'track_prefill_tokens');
      return {
        kind: 'add_request',
        tokenSequence: optional(get(m, 'token_sequence'), (x) => u64List(x, `${p}.token_sequence`, limits.maxSequenceHashes)),
        trackPrefillTokens: track === undefined ? true : bool(track, `${p}.track_prefill_tokens`),
        expectedOutputTokens: optional(get(m, 'expected_output_tokens'), (x) => u32(x, `${p}.expected_output_tokens`)),
        prefillLoadHint: optional(get(m, 'prefill_load_hint'), (x) => prefillLoadHint(x, `${p}.prefill_load_hint`)),
      };
    }
    case 'Free':
    case 'MarkPrefillCompleted':
      if (content !== undefined && content !== null) {
        throw new WireReject('wrong_type', `${path}.${tag}: a unit variant carries no content`);
      }
      return tag === 'Free' ? { kind: 'free' } : { kind: 'mark_prefill_completed' };
    default:
      throw new WireReject('unknown_variant', `${path}: unknown active-sequence kind ${JSON.stringify(tag.slice(0, 64))}`);
  }
}

function activeSequenceEventFromValue(v: unknown, limits: WireLimits, path = 'active_sequence_event'): ActiveSequenceEvent {
  const m = asMap(v, path);
  const wp = `${path}.worker`;
  const w = asMap(required(m, 'worker', path), wp);
  return {
    requestId: str(required(m, 'request_id', path), `${path}.request_id`, limits.maxStringLength),
    workerId: u64(required(w, 'worker_id', wp), `${wp}.worker_id`) as WorkerId,
    dpRank: u32(required(w, 'dp_rank', wp), `${wp}.dp_rank`),
    routerId: u64(required(m, 'router_id', path), `${path}.router_id`),
    loraName: optional(get(m, 'lora_name'), (x) => str(x, `${path}.lora_name`, limits.maxStringLength)),
    data: eventData(required(m, 'data', path), `${path}.data`, limits),
  };
}

/** One event or an `ActiveSequenceEventBatch` (a map with `events` and no `request_id`), as a list in publisher order. */
export function activeSequenceEventsFromValue(v: unknown, limits: WireLimits): ActiveSequenceEvent[] {
  if (!(isMap(v) && get(v, 'events') !== undefined && get(v, 'request_id') === undefined)) return [activeSequenceEventFromValue(v, limits)];
  const events = list(get(asMap(v, 'batch'), 'events'), 'batch.events', limits.maxBatchEvents);
  return events.map((e, i) => activeSequenceEventFromValue(e, limits, `batch.events[${i}]`));
}
