/**
 * Gateway lifecycle events, decoded at the edge.
 *
 * Wire shape (subject `vantage.v1.lifecycle.{pool}`, UTF-8 JSON):
 *   {"v":1, "requestId":"…", "sessionId":"…", "pool":"…",
 *    "kind":"first_token"|"done"|"cancelled"|"failed"|"usage",
 *    "atMs": <epoch ms, may be fractional>,
 *    "usage"?: {"inputTokens":n, "outputTokens":n, "cachedTokens":n},
 *    "error"?: "…"}
 *
 * `@vantage/protocol` will own this decoder; until it exports one, the
 * outcome service keeps this strict local copy behind one function so the
 * switch is a one-line change. Unknown extra keys are tolerated (a newer
 * gateway may add fields within v1); anything else that does not match is a
 * typed rejection, never an exception.
 */
import type { LifecycleEventInput, LifecycleKind } from '@vantage/records';

export type LifecycleRejectionCode = 'LIFECYCLE_NOT_JSON' | 'LIFECYCLE_UNKNOWN_VERSION' | 'LIFECYCLE_INVALID';

export type LifecycleDecode = { ok: true; value: LifecycleEventInput } | { ok: false; code: LifecycleRejectionCode; reason: string };

const KINDS: ReadonlySet<string> = new Set<LifecycleKind>(['first_token', 'done', 'cancelled', 'failed', 'usage']);
const MAX_ID = 256;
const td = new TextDecoder('utf-8', { fatal: true });

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function idOk(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_ID;
}

function invalid(reason: string): LifecycleDecode {
  return { ok: false, code: 'LIFECYCLE_INVALID', reason };
}

/**
 * Decode one lifecycle message. `subjectPool` is the subject's last token;
 * when given it must equal the body's `pool` (a mismatch means a misrouted or
 * forged event, and the pool is what dispatch checks rely on).
 */
export function decodeLifecycle(bytes: Uint8Array, subjectPool?: string): LifecycleDecode {
  let doc: unknown;
  try {
    doc = JSON.parse(td.decode(bytes));
  } catch (e) {
    return { ok: false, code: 'LIFECYCLE_NOT_JSON', reason: `not UTF-8 JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return invalid('body is not a JSON object');
  const o = doc as Record<string, unknown>;
  if (o['v'] !== 1) return { ok: false, code: 'LIFECYCLE_UNKNOWN_VERSION', reason: `unsupported version ${JSON.stringify(o['v'])}` };
  const { requestId, sessionId, pool, kind, atMs, usage, error } = o;
  if (!idOk(requestId)) return invalid('requestId must be a non-empty string of at most 256 characters');
  if (!idOk(sessionId)) return invalid('sessionId must be a non-empty string of at most 256 characters');
  if (!idOk(pool)) return invalid('pool must be a non-empty string of at most 256 characters');
  if (subjectPool !== undefined && subjectPool !== pool) return invalid(`pool ${JSON.stringify(pool)} does not match subject token ${JSON.stringify(subjectPool)}`);
  if (typeof kind !== 'string' || !KINDS.has(kind)) return invalid(`unknown kind ${JSON.stringify(kind)}`);
  // Whole ms must fit a timestamp-millis long exactly.
  if (typeof atMs !== 'number' || !Number.isFinite(atMs) || atMs < 0 || atMs > Number.MAX_SAFE_INTEGER) return invalid('atMs must be a finite non-negative number');
  const value: LifecycleEventInput = { requestId, sessionId, pool, kind: kind as LifecycleKind, atMs };
  if (usage !== undefined && usage !== null) {
    if (typeof usage !== 'object' || Array.isArray(usage)) return invalid('usage must be an object');
    const u = usage as Record<string, unknown>;
    if (!isCount(u['inputTokens']) || !isCount(u['outputTokens']) || !isCount(u['cachedTokens'])) {
      return invalid('usage.inputTokens, outputTokens and cachedTokens must be non-negative integers');
    }
    value.usage = { inputTokens: u['inputTokens'], outputTokens: u['outputTokens'], cachedTokens: u['cachedTokens'] };
  }
  if (error !== undefined && error !== null) {
    if (typeof error !== 'string') return invalid('error must be a string');
    value.error = error.length > 4096 ? `${error.slice(0, 4093)}...` : error;
  }
  return { ok: true, value };
}
