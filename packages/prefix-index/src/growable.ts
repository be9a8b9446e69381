/**
 * Int32 tables that grow in place (README.md, "Layout": why a growable `SharedArrayBuffer`). A grown
 * table is a new fixed-length view over the same memory: V8 accesses it exactly like any
 * `Int32Array`, where a length-tracking view over a resizable buffer was measured slower for
 * matching. A table that outgrows its reservation is copied once into a new, larger one.
 */

/** Growable buffers as Node 20 has them (ES2024, not yet in this project's TypeScript lib). */
interface GrowableSab extends SharedArrayBuffer {
  readonly maxByteLength: number;
  grow(newByteLength: number): void;
}
type SabWithOptions = new (byteLength: number, options: { maxByteLength: number }) => GrowableSab;

/** V8's largest growable buffer: 4 GiB. */
const MAX_INTS = 2 ** 30;

/**
 * A zeroed table of `len` int32s that can grow in place to `reserve` int32s (at most 2^30, V8's
 * limit). Where the address space cannot be reserved, or the table is larger than a growable
 * buffer can be, it is an ordinary `Int32Array`, which `growTable` grows by copying.
 */
export function growableTable(len: number, reserve: number): Int32Array {
  if (len <= MAX_INTS) {
    const max = Math.min(MAX_INTS, Math.max(len, reserve));
    // The reservation asked for, then (if that address space is not to be had) none beyond len.
    for (const m of max > len ? [max, len] : [len]) {
      try {
        return new Int32Array(new (SharedArrayBuffer as unknown as SabWithOptions)(len * 4, { maxByteLength: m * 4 }), 0, len);
      } catch {
        /* no address space for this reservation: try the next, then an ordinary array */
      }
    }
  }
  return new Int32Array(len);
}

/**
 * `a` (from `growableTable`) grown to `len` int32s, contents kept and the rest zero: in place when
 * its reservation allows, else copied into a new table reserving `reserve` int32s. `a` must not be
 * used afterwards (in place, it is a view of the first `a.length` elements of the same memory).
 * Only a view of its whole buffer grows in place: memory past a shorter view (a subarray) is not
 * the view's and need not be zero.
 */
export function growTable(a: Int32Array, len: number, reserve: number): Int32Array {
  const buf = a.buffer as GrowableSab;
  if (buf instanceof SharedArrayBuffer && a.byteOffset === 0 && a.byteLength === buf.byteLength && buf.maxByteLength >= len * 4) {
    if (buf.byteLength < len * 4) buf.grow(len * 4);
    return new Int32Array(buf, 0, len);
  }
  const b = growableTable(len, reserve);
  b.set(a);
  return b;
}

/** `a`, or a copy of it at least `min` long (its length doubled as often as needed), for ordinary tables. */
export function grow(a: Int32Array, min: number): Int32Array {
  let n = Math.max(1, a.length);
  while (n < min) n *= 2;
  if (n === a.length) return a;
  const b = new Int32Array(n);
  b.set(a);
  return b;
}
