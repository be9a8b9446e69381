/**
 * MessagePack in and out. Reading uses msgpackr (narrower integer widths come back as numbers, which
 * the validators in `values.ts` normalise with bigints); every msgpackr failure is mapped to a
 * rejection. Writing is by hand, in rmp's narrowest forms: package README, "Written by hand, and why".
 */
import { Unpackr } from 'msgpackr';
import { WireReject } from './result';

// useRecords: false -> plain msgpack (no msgpackr record extension state);
// mapsAsObjects -> maps become plain objects (msgpackr renames a `__proto__` key);
// int64AsType: 'bigint' -> uint64/int64 are exact.
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

/** Decode one complete msgpack value; throws WireReject on any failure. */
export function readMsgpack(bytes: Uint8Array, maxBytes: number): unknown {
  if (!(bytes instanceof Uint8Array)) {
    throw new WireReject('wrong_type', 'input: expected bytes');
  }
  if (bytes.length === 0) throw new WireReject('truncated', 'input: empty message');
  if (bytes.length > maxBytes) {
    throw new WireReject('too_large', `input: ${bytes.length} bytes exceed the limit of ${maxBytes}`);
  }
  try {
    return unpackr.unpack(bytes);
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message)) {
      throw new WireReject('too_large', 'msgpack: nesting too deep');
    }
    const message = err instanceof Error ? err.message : String(err);
    const incomplete = (err as { incomplete?: unknown } | null)?.incomplete === true;
    if (incomplete || /unexpected end/i.test(message)) {
      throw new WireReject('truncated', `msgpack: ${message}`);
    }
    throw new WireReject('malformed', `msgpack: ${message}`);
  }
}

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

/** An ordered map for the writers: rmp emits struct fields in declaration order. */
export class Fields {
  constructor(readonly entries: ReadonlyArray<readonly [string, WireValue]>) {}
}

/** A float64 for the writers (rmp writes an `f64` field as 0xcb even when its value is whole). */
export class F64 {
  constructor(readonly value: number) {}
}

/** What the writers accept. Integers must be safe numbers or bigints; floats are `F64`. */
export type WireValue =
  | F64
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | Fields
  | readonly WireValue[];

const utf8 = new TextEncoder();

/** A growing byte buffer; `take(n)` makes room for n more bytes and returns where they go. */
class ByteSink {
  buf = new Uint8Array(256);
  view = new DataView(this.buf.buffer);
  len = 0;

  take(n: number): number {
    if (this.len + n > this.buf.length) {
      let size = this.buf.length * 2;
      while (size < this.len + n) size *= 2;
      const next = new Uint8Array(size);
      next.set(this.buf.subarray(0, this.len));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    const at = this.len;
    this.len += n;
    return at;
  }
  /** `v` big-endian in `n` bytes, two's complement when negative. */
  be(v: number | bigint, n: 1 | 2 | 4 | 8): void {
    const at = this.take(n);
    if (n === 8) return this.view.setBigUint64(at, BigInt.asUintN(64, BigInt(v)));
    let x = Number(v);
    for (let i = at + n - 1; i >= at; i--, x >>= 8) this.buf[i] = x & 0xff;
  }
  bytes(b: Uint8Array): void {
    const at = this.take(b.length);
    this.buf.set(b, at);
  }
}

function writeInt(out: ByteSink, v: bigint): void {
  if (v >= 0n) {
    if (v < 0x80n) out.be(v, 1);
    else if (v <= 0xffn) { out.be(0xcc, 1); out.be(v, 1); }
    else if (v <= 0xffffn) { out.be(0xcd, 1); out.be(v, 2); }
    else if (v <= 0xffff_ffffn) { out.be(0xce, 1); out.be(v, 4); }
    else if (v <= 0xffff_ffff_ffff_ffffn) { out.be(0xcf, 1); out.be(v, 8); }
    else throw new RangeError(`integer ${v} does not fit msgpack`);
    return;
  }
  // Negative: rmp's write_sint picks the narrowest signed form.
  if (v >= -32n) out.be(v, 1);
  else if (v >= -0x80n) { out.be(0xd0, 1); out.be(v, 1); }
  else if (v >= -0x8000n) { out.be(0xd1, 1); out.be(v, 2); }
  else if (v >= -0x8000_0000n) { out.be(0xd2, 1); out.be(v, 4); }
  else if (v >= -(1n << 63n)) { out.be(0xd3, 1); out.be(v, 8); }
  else throw new RangeError(`integer ${v} does not fit msgpack`);
}

function writeLen(out: ByteSink, n: number, fix: number, fixMax: number, c8: number | null, c16: number, c32: number): void {
  if (n <= fixMax) out.be(fix | n, 1);
  else if (c8 !== null && n <= 0xff) { out.be(c8, 1); out.be(n, 1); }
  else if (n <= 0xffff) { out.be(c16, 1); out.be(n, 2); }
  else { out.be(c32, 1); out.be(n, 4); }
}

function writeValue(out: ByteSink, v: WireValue): void {
  if (v === null) return out.be(0xc0, 1);
  if (v === true) return out.be(0xc3, 1);
  if (v === false) return out.be(0xc2, 1);
  if (typeof v === 'bigint') return writeInt(out, v);
  if (v instanceof F64) {
    out.be(0xcb, 1);
    const at = out.take(8);
    return out.view.setFloat64(at, v.value);
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`only safe integers are written, got ${v}`);
    return writeInt(out, BigInt(v));
  }
  if (typeof v === 'string') {
    const b = utf8.encode(v);
    writeLen(out, b.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
    return out.bytes(b);
  }
  if (v instanceof Uint8Array) {
    // bin has no fix form: 0xc4/0xc5/0xc6 are bin8/16/32.
    writeLen(out, v.length, 0, -1, 0xc4, 0xc5, 0xc6);
    return out.bytes(v);
  }
  if (v instanceof Fields) {
    writeLen(out, v.entries.length, 0x80, 15, null, 0xde, 0xdf);
    for (const [k, x] of v.entries) {
      writeValue(out, k);
      writeValue(out, x);
    }
    return;
  }
  writeLen(out, v.length, 0x90, 15, null, 0xdc, 0xdd);
  for (const x of v) writeValue(out, x);
}

/** Encode one value the way `rmp_serde::to_vec_named` would. */
export function writeMsgpack(v: WireValue): Uint8Array {
  const out = new ByteSink();
  writeValue(out, v);
  return out.buf.slice(0, out.len);
}
