/**
 * Dynamo's `ForwardPassMetrics` (1.6.1), published by each worker about once a second per dp rank,
 * even when idle: the only periodic per-worker signal, saying the worker is alive and what its
 * scheduler holds. Its shape, as the 1.6.1 mocker publishes it, is in the package README (the queue
 * has no `sum_prefill_kv_tokens`).
 *
 * `worker_id` is a string here (unlike every other topic); an integer is accepted too. Counts are
 * non-negative integers; the variances and `wall_time` are finite numbers. Missing counters read 0,
 * unknown fields are ignored, a `version` other than 1 is refused (`unknown_variant`): a new layout
 * must not be read as this one.
 */
import type { WorkerId } from '@vantage/types';
import { WireReject } from './result';
import { asMap, count, describe, get, optional, required, u32, u64, JsonFloat, type Obj } from './values';

export interface ForwardPassRequests {
  /** Requests in (or waiting for) a prefill step. */
  readonly prefillRequests: number;
  /** Their prompt tokens still to prefill. */
  readonly prefillTokens: number;
  /** Variance of their prompt lengths. */
  readonly prefillLengthVariance: number;
  /** KV tokens the prefill requests already hold (scheduled only; 0 for the queue). */
  readonly prefillKvTokens: number;
  /** Requests decoding. */
  readonly decodeRequests: number;
  /** KV tokens the decoding requests hold. */
  readonly decodeKvTokens: number;
  readonly decodeKvTokensVariance: number;
}

export interface ForwardPassMetrics {
  readonly version: number;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Counts forward passes per (worker, rank). */
  readonly counterId: bigint;
  /** Seconds the last forward pass took. */
  readonly wallTime: number;
  readonly scheduled: ForwardPassRequests;
  readonly queued: ForwardPassRequests;
}

const U64_DECIMAL = /^[0-9]{1,20}$/;

function workerIdOf(v: unknown, path: string): WorkerId {
  if (typeof v === 'string') {
    if (!U64_DECIMAL.test(v)) throw new WireReject('wrong_type', `${path}: expected a decimal u64 string, got ${JSON.stringify(v.slice(0, 32))}`);
    const n = BigInt(v);
    if (n >= 1n << 64n) throw new WireReject('out_of_range', `${path}: ${v} is outside [0, 2^64)`);
    return n as WorkerId;
  }
  return u64(v, path) as WorkerId;
}

function real(v: unknown, path: string): number {
  if (v === undefined || v === null) return 0;
  const n = v instanceof JsonFloat ? v.value : typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number') throw new WireReject('wrong_type', `${path}: expected a number, got ${describe(v)}`);
  if (!Number.isFinite(n)) throw new WireReject('out_of_range', `${path}: ${n} is not finite`);
  return n;
}

const counter = (m: Obj, key: string, path: string): number => optional(get(m, key), (x) => count(x, `${path}.${key}`)) ?? 0;

function requestsOf(v: unknown, path: string): ForwardPassRequests {
  const m = asMap(v, path);
  return {
    prefillRequests: counter(m, 'num_prefill_requests', path),
    prefillTokens: counter(m, 'sum_prefill_tokens', path),
    prefillLengthVariance: real(get(m, 'var_prefill_length'), `${path}.var_prefill_length`),
    prefillKvTokens: counter(m, 'sum_prefill_kv_tokens', path),
    decodeRequests: counter(m, 'num_decode_requests', path),
    decodeKvTokens: counter(m, 'sum_decode_kv_tokens', path),
    decodeKvTokensVariance: real(get(m, 'var_decode_kv_tokens'), `${path}.var_decode_kv_tokens`),
  };
}

export function forwardPassFromValue(v: unknown, path = 'forward_pass_metrics'): ForwardPassMetrics {
  const m = asMap(v, path);
  const version = u32(required(m, 'version', path), `${path}.version`);
  if (version !== 1) throw new WireReject('unknown_variant', `${path}.version: ${version} is not a known layout (1)`);
  return {
    version,
    workerId: workerIdOf(required(m, 'worker_id', path), `${path}.worker_id`),
    dpRank: optional(get(m, 'dp_rank'), (x) => u32(x, `${path}.dp_rank`)) ?? 0,
    counterId: optional(get(m, 'counter_id'), (x) => u64(x, `${path}.counter_id`)) ?? 0n,
    wallTime: real(get(m, 'wall_time'), `${path}.wall_time`),
    scheduled: requestsOf(required(m, 'scheduled_requests', path), `${path}.scheduled_requests`),
    queued: requestsOf(required(m, 'queued_requests', path), `${path}.queued_requests`),
  };
}
