/**
 * Dynamo's `ActiveLoad`, published on `namespace.{ns}.kv_metrics` by workers
 * (kv_used_blocks) and by routers' schedulers (active_decode_blocks,
 * active_prefill_tokens, scheduler_load_scope).
 *
 * Wire shape, declaration order:
 *   { worker_id: u64, dp_rank: u32 (default 0), active_decode_blocks: u64|nil,
 *     active_prefill_tokens: u64|nil, scheduler_load_scope: "local"|"replica_synchronized"|nil,
 *     kv_used_blocks: u64|nil }
 * `scheduler_load_scope` is the newest field; absent means nil.
 */
import type { WorkerId } from '@vantage/types';
import { Fields, type WireValue } from './msgpack';
import { asMap, count, get, oneOf, optional, required, u32, u64 } from './values';

const SCHEDULER_LOAD_SCOPES = ['local', 'replica_synchronized'] as const;
export type SchedulerLoadScope = (typeof SCHEDULER_LOAD_SCOPES)[number];

export interface ActiveLoad {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Scheduler-tracked decode blocks; null when this publisher does not report it. */
  readonly activeDecodeBlocks: number | null;
  /** Scheduler-tracked prefill tokens; null when not reported. */
  readonly activePrefillTokens: number | null;
  /** Whether scheduler load includes replicas' bookings; null for worker-published loads and older releases. */
  readonly schedulerLoadScope: SchedulerLoadScope | null;
  /** KV blocks in use on the worker (worker-published); null when not reported. */
  readonly kvUsedBlocks: number | null;
}

export function activeLoadFromValue(v: unknown, path = 'active_load'): ActiveLoad {
  const m = asMap(v, path);
  return {
    workerId: u64(required(m, 'worker_id', path), `${path}.worker_id`) as WorkerId,
    dpRank: optional(get(m, 'dp_rank'), (x) => u32(x, `${path}.dp_rank`)) ?? 0,
    activeDecodeBlocks: optional(get(m, 'active_decode_blocks'), (x) => count(x, `${path}.active_decode_blocks`)),
    activePrefillTokens: optional(get(m, 'active_prefill_tokens'), (x) => count(x, `${path}.active_prefill_tokens`)),
    schedulerLoadScope: optional(get(m, 'scheduler_load_scope'), (x) => oneOf(x, `${path}.scheduler_load_scope`, SCHEDULER_LOAD_SCOPES)),
    kvUsedBlocks: optional(get(m, 'kv_used_blocks'), (x) => count(x, `${path}.kv_used_blocks`)),
  };
}

/** The current shape (`scheduler_load_scope` included). */
export function activeLoadToWire(l: ActiveLoad): WireValue {
  return new Fields([
    ['worker_id', l.workerId],
    ['dp_rank', l.dpRank],
    ['active_decode_blocks', l.activeDecodeBlocks],
    ['active_prefill_tokens', l.activePrefillTokens],
    ['scheduler_load_scope', l.schedulerLoadScope],
    ['kv_used_blocks', l.kvUsedBlocks],
  ]);
}
