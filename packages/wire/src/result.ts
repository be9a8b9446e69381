/** Typed outcomes of every decoder (package README, "Public API"); the codes are stable metric labels. */
import type { CodedResult } from '@vantage/types';

export const WIRE_ERROR_CODES = [
  /** Input ended before the value was complete (cut-off message). */
  'truncated',
  /** Not valid msgpack / JSON at all, trailing bytes, duplicate keys, bad UTF-8. */
  'malformed',
  /** A field has the wrong type (string where an integer belongs, float for u64, ...). */
  'wrong_type',
  /** A required field is absent. */
  'missing_field',
  /** An integer outside its field's range (u64, u32, safe count) or a negative count. */
  'out_of_range',
  /** Over a configured bound: message bytes, list length, nesting depth. */
  'too_large',
  /** An enum tag or topic we do not know (new Dynamo variant, typo). */
  'unknown_variant',
  /** Well-formed but a shape we deliberately do not apply (e.g. a cache-owner residency event). */
  'unsupported',
] as const;

export type WireErrorCode = (typeof WIRE_ERROR_CODES)[number];

export type Result<T> = CodedResult<T, WireErrorCode>;

type Rejection = Extract<Result<never>, { ok: false }>;

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function reject(code: WireErrorCode, reason: string): Rejection {
  return { ok: false, code, reason };
}

/**
 * Internal unwinding signal. Validators deep inside a value tree throw this so
 * the code reads straight; every public entry point catches it (and anything
 * else) and converts it to a Rejection. It never escapes the package.
 */
export class WireReject extends Error {
  constructor(
    readonly code: WireErrorCode,
    readonly reason: string,
  ) {
    super(reason);
    this.name = 'WireReject';
  }
}

/** Run `fn`, converting any throw into a Rejection so callers only ever see a Result. */
export function guard<T>(fn: () => T): Result<T> {
  try {
    return ok(fn());
  } catch (err) {
    if (err instanceof WireReject) return reject(err.code, err.reason);
    // A stack overflow from pathological nesting inside a third-party decoder.
    if (err instanceof RangeError && /call stack/i.test(err.message)) {
      return reject('too_large', 'nesting too deep');
    }
    return reject('malformed', `unexpected decoder failure: ${err instanceof Error ? err.message : String(err)}`);
  }
}
