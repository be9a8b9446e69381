/**
 * Field validators over a decoded value tree (from msgpackr or from our JSON
 * reader). Both front ends produce the same vocabulary:
 *   null, boolean, number, bigint, string, Uint8Array, arrays, plain objects,
 *   and JsonFloat (a JSON literal with a fraction or exponent).
 * Each validator either returns the exact domain value or throws WireReject
 * with the field's path; the public decoders turn that into a Rejection.
 */
import { toU64 } from '@vantage/types';
import { WireReject } from './result';

/** A JSON number written with a fraction or exponent: never valid where an integer belongs. */
export class JsonFloat {
  constructor(
    readonly value: number,
    readonly text: string,
  ) {}
}

export type Obj = Readonly<Record<string, unknown>>;

const U32_MAX = 0xffff_ffffn;
const MAX_COUNT = BigInt(Number.MAX_SAFE_INTEGER);

export function describe(v: unknown): string {
  if (v === null) return 'nil';
  if (v === undefined) return 'missing';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Uint8Array) return 'binary';
  if (v instanceof JsonFloat) return 'float';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'float';
  if (typeof v === 'bigint') return 'integer';
  if (typeof v === 'object') return isPlainObject(v) ? 'map' : 'extension value';
  return typeof v;
}

function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** `out[key] = value` by defineProperty, not assignment: a `__proto__` key must stay data, never a prototype. */
export function defineData(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

export function isMap(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && isPlainObject(v);
}

function wrongType(path: string, expected: string, v: unknown): never {
  throw new WireReject('wrong_type', `${path}: expected ${expected}, got ${describe(v)}`);
}

export function asMap(v: unknown, path: string): Obj {
  if (!isMap(v)) wrongType(path, 'map', v);
  return v;
}

/** Own property only: a hostile key such as `constructor` must not read through the prototype. */
export function get(m: Obj, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(m, key) ? m[key] : undefined;
}

export function required(m: Obj, key: string, path: string): unknown {
  const v = get(m, key);
  if (v === undefined) throw new WireReject('missing_field', `${path}.${key}: required field missing`);
  return v;
}

/** Integer value as bigint, or undefined when `v` is not an integer at all. */
function integerOf(v: unknown): bigint | undefined {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isInteger(v)) {
    // msgpackr yields numbers for widths up to 32 bits; anything past 2^53 here
    // came from a float encoding and has already lost bits.
    return Number.isSafeInteger(v) ? BigInt(v) : undefined;
  }
  return undefined;
}

/**
 * Full-range u64. Values in [-2^63, 0) are the same bits sent as i64 and are
 * reinterpreted (engines differ in signedness); anything else out of range is refused.
 */
export function u64(v: unknown, path: string): bigint {
  const i = integerOf(v);
  if (i === undefined) {
    if (typeof v === 'number' && Number.isInteger(v)) {
      throw new WireReject('out_of_range', `${path}: integer beyond 2^53 arrived as a float and lost precision`);
    }
    wrongType(path, 'unsigned 64-bit integer', v);
  }
  const u = toU64(i);
  if (u === undefined) throw new WireReject('out_of_range', `${path}: ${i} is outside [-2^63, 2^64)`);
  return u;
}

/** An integer in [0, max] as a number: `wrong_type` when not an integer, `out_of_range` outside (`bound` names max + 1). */
function uint(v: unknown, path: string, max: bigint, expected: string, bound: string): number {
  const i = integerOf(v);
  if (i === undefined) wrongType(path, expected, v);
  if (i < 0n || i > max) throw new WireReject('out_of_range', `${path}: ${i} is outside [0, ${bound})`);
  return Number(i);
}

export function u32(v: unknown, path: string): number {
  return uint(v, path, U32_MAX, 'unsigned 32-bit integer', '2^32');
}

/** A count (tokens, blocks) sent as u64/usize, as a number (package README, "Exactness"). */
export function count(v: unknown, path: string): number {
  return uint(v, path, MAX_COUNT, 'unsigned integer', '2^53');
}

export function bool(v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') wrongType(path, 'boolean', v);
  return v;
}

export function str(v: unknown, path: string, maxLength: number): string {
  if (typeof v !== 'string') wrongType(path, 'string', v);
  if (v.length > maxLength) throw new WireReject('too_large', `${path}: string of ${v.length} exceeds ${maxLength}`);
  return v;
}

/** A serde unit enum written as its bare name: one of `names`; any other name is `unknown_variant`. */
export function oneOf<const N extends readonly string[]>(v: unknown, path: string, names: N): N[number] {
  const s = str(v, path, 64);
  if (!names.includes(s)) throw new WireReject('unknown_variant', `${path}: unknown variant ${JSON.stringify(s)}`);
  return s;
}

/** Absent and nil both mean "none" for serde `Option` fields. */
export function optional<T>(v: unknown, read: (v: unknown) => T): T | null {
  return v === undefined || v === null ? null : read(v);
}

export function list(v: unknown, path: string, max: number): readonly unknown[] {
  if (!Array.isArray(v)) wrongType(path, 'array', v);
  if (v.length > max) throw new WireReject('too_large', `${path}: ${v.length} entries exceed the limit of ${max}`);
  return v;
}

export function u64List(v: unknown, path: string, max: number): BigUint64Array {
  const items = list(v, path, max);
  const out = new BigUint64Array(items.length);
  for (let i = 0; i < items.length; i++) out[i] = u64(items[i], `${path}[${i}]`);
  return out;
}

/**
 * Bytes: msgpack `bin`, or an array of byte values (serde's `Vec<u8>` accepts
 * both, and a JSON encoding can only send the latter).
 */
export function bytes(v: unknown, path: string, max: number): Uint8Array {
  if (v instanceof Uint8Array) {
    if (v.length > max) throw new WireReject('too_large', `${path}: ${v.length} bytes exceed ${max}`);
    // Copy out of the decoder's buffer so the caller owns an exact-size array.
    return new Uint8Array(v);
  }
  const items = list(v, path, max);
  const out = new Uint8Array(items.length);
  for (let i = 0; i < items.length; i++) out[i] = uint(items[i], `${path}[${i}]`, 255n, 'byte', '256');
  return out;
}

/**
 * A serde externally tagged enum: the bare variant name for a unit variant,
 * or a single-entry map `{ name: content }`. A unit variant may also come as
 * `{ name: nil }` (serde accepts both). Returns the tag and the content.
 */
export function variant(v: unknown, path: string): { tag: string; content: unknown } {
  if (typeof v === 'string') return { tag: v, content: undefined };
  if (isMap(v)) {
    const keys = Object.keys(v);
    if (keys.length !== 1) {
      throw new WireReject('malformed', `${path}: an enum map must have exactly one key, got ${keys.length}`);
    }
    const tag = keys[0]!;
    return { tag, content: v[tag] };
  }
  return wrongType(path, 'enum (string or single-key map)', v);
}

/**
 * Copy an opaque value (e.g. `mm_extra_info`) into plain data with a depth
 * bound. Integers become bigint whatever their wire width, so the msgpack and
 * JSON front ends agree on the result.
 */
export function opaque(v: unknown, path: string, maxDepth: number, depth = 0): unknown {
  if (depth > maxDepth) throw new WireReject('too_large', `${path}: nested deeper than ${maxDepth}`);
  if (v === null || typeof v === 'boolean' || typeof v === 'string' || typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isSafeInteger(v) ? BigInt(v) : v;
  if (v instanceof JsonFloat) return v.value;
  if (v instanceof Uint8Array) return new Uint8Array(v);
  if (Array.isArray(v)) return v.map((x, i) => opaque(x, `${path}[${i}]`, maxDepth, depth + 1));
  if (isMap(v)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) defineData(out, k, opaque(v[k], `${path}.${k}`, maxDepth, depth + 1));
    return out;
  }
  return wrongType(path, 'plain data', v);
}
