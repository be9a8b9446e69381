/**
 * Gateway lifecycle events, decoded with `@vantage/protocol`'s `lifecycleEventCodec` (the codec the
 * gateway client encodes with) and mapped to `@vantage/records`' plain `LifecycleEventInput`
 * (records stays a leaf package). The mapping and the rejections: README, "What it owns".
 */
import { lifecycleEventCodec, type ProtocolErrorCode } from '@vantage/protocol';
import type { LifecycleEventInput } from '@vantage/records';

export type LifecycleRejectionCode = 'LIFECYCLE_NOT_JSON' | 'LIFECYCLE_UNKNOWN_VERSION' | 'LIFECYCLE_INVALID';

interface DecodedLifecycle {
  event: LifecycleEventInput;
  /** Competing (background) traffic: the request has no decision by design. */
  background: boolean;
  /** The request's arrival (epoch ms) for requests without a decision; null when not sent. */
  arrivalMs: number | null;
}

type LifecycleDecode = { ok: true; value: DecodedLifecycle } | { ok: false; code: LifecycleRejectionCode; reason: string };

const CODE_OF: Record<ProtocolErrorCode, LifecycleRejectionCode> = {
  malformed_json: 'LIFECYCLE_NOT_JSON',
  unsupported_version: 'LIFECYCLE_UNKNOWN_VERSION',
  schema_violation: 'LIFECYCLE_INVALID',
  u64_out_of_range: 'LIFECYCLE_INVALID',
  payload_too_large: 'LIFECYCLE_INVALID',
  malformed_binary: 'LIFECYCLE_INVALID',
};

/**
 * Decode one lifecycle message into records' input, with the request-level background marker and
 * arrival. `subjectPool` is the subject's last token; when given it must equal the body's `pool` (a
 * mismatch means a misrouted or forged event, and the pool is what dispatch checks rely on). The
 * size limit is the caller's (messages above it are dead-lettered as OVERSIZED first).
 */
export function decodeLifecycle(bytes: Uint8Array, subjectPool?: string): LifecycleDecode {
  const r = lifecycleEventCodec.decode(bytes, Number.MAX_SAFE_INTEGER);
  if (!r.ok) return { ok: false, code: CODE_OF[r.code], reason: `${r.code}: ${r.reason}` };
  const e = r.value;
  if (subjectPool !== undefined && subjectPool !== e.pool) {
    return { ok: false, code: 'LIFECYCLE_INVALID', reason: `pool ${JSON.stringify(e.pool)} does not match subject token ${JSON.stringify(subjectPool)}` };
  }
  const event: LifecycleEventInput = { requestId: e.requestId, sessionId: e.sessionId, pool: e.pool, kind: e.kind, atMs: e.atMs };
  if (e.usage !== null) event.usage = { inputTokens: e.usage.inputTokens, outputTokens: e.usage.outputTokens, cachedTokens: e.usage.cachedTokens };
  // In outcome records an error is `code: message`, or `code` alone.
  if (e.error !== null) event.error = e.error.message === null || e.error.message === '' ? e.error.code : `${e.error.code}: ${e.error.message}`;
  return { ok: true, value: { event, background: e.background === true, arrivalMs: e.arrivalMs ?? null } };
}
