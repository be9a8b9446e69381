/**
 * Minimal little-endian byte writer/reader for the snapshot format. Typed
 * arrays are copied as raw bytes (the host is little-endian; @vantage/hashing
 * refuses to load otherwise), so a 100 MB index snapshots at memcpy speed.
 */

export class SnapshotError extends Error {
  readonly code: 'bad_magic' | 'unsupported_version' | 'corrupt';
  constructor(code: SnapshotError['code'], message: string) {
    super(message);
    this.name = 'SnapshotError';
    this.code = code;
  }
}

export class ByteWriter {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.length + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void {
    this.ensure(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
  }
  u32(v: number): void {
    this.ensure(4);
    this.view.setUint32(this.length, v >>> 0, true);
    this.length += 4;
  }
  u64(v: bigint): void {
    this.ensure(8);
    this.view.setBigUint64(this.length, v, true);
    this.length += 8;
  }
  f64(v: number): void {
    this.ensure(8);
    this.view.setFloat64(this.length, v, true);
    this.length += 8;
  }
  bytes(src: ArrayBufferView): void {
    const b = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
    this.ensure(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }
  /** Patch a u32 written earlier (used for the payload length). */
  patchU32(at: number, v: number): void {
    this.view.setUint32(at, v >>> 0, true);
  }
  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

export class ByteReader {
  private readonly view: DataView;
  pos: number;
  constructor(
    private readonly buf: Uint8Array,
    start: number,
    private readonly end: number,
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = start;
  }
  private need(n: number): void {
    if (this.pos + n > this.end) throw new SnapshotError('corrupt', `snapshot truncated at byte ${this.pos}`);
  }
  u8(): number {
    this.need(1);
    return this.view.getUint8(this.pos++);
  }
  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(): bigint {
    this.need(8);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  f64(): number {
    this.need(8);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }
  /** Copy `count` elements into a fresh (aligned) typed array. */
  u32Array(count: number): Uint32Array {
    const n = count * 4;
    this.need(n);
    const out = new Uint32Array(count);
    new Uint8Array(out.buffer).set(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return out;
  }
  u8Array(count: number): Uint8Array {
    this.need(count);
    const out = this.buf.slice(this.pos, this.pos + count);
    this.pos += count;
    return out;
  }
  i32Array(count: number): Int32Array {
    const u = this.u32Array(count);
    return new Int32Array(u.buffer);
  }
  done(): boolean {
    return this.pos === this.end;
  }
}
