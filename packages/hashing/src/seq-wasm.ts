/**
 * A whole sequence-hash chain in WebAssembly: `seq[0] = local[0]`,
 * `seq[i] = XXH3-64(le64(seq[i-1]) ++ le64(local[i]), 1337)`, with native 64-bit arithmetic.
 *
 * The step is the same XXH3 path as `seq16.ts` (`XXH3_len_9to16_64b`, see there); why and how it is
 * checked: README.md.
 *
 * Layout: one memory; the caller writes `n` local hashes (little-endian u64) at byte 0 and calls
 * `chain(0, 8n, n)`, which writes the `n` sequence hashes after them.
 */

// --- a minimal WebAssembly binary writer (only what the chain function needs) ---------------------

function uleb(v: number): number[] {
  const out: number[] = [];
  do {
    let b = v & 0x7f;
    v >>>= 7;
    if (v !== 0) b |= 0x80;
    out.push(b);
  } while (v !== 0);
  return out;
}

/** Signed LEB128 of a 64-bit value (given as an unsigned or signed bigint). */
function sleb64(value: bigint): number[] {
  let v = BigInt.asIntN(64, value);
  const out: number[] = [];
  for (;;) {
    const b = Number(v & 0x7fn);
    v >>= 7n;
    const done = (v === 0n && (b & 0x40) === 0) || (v === -1n && (b & 0x40) !== 0);
    out.push(done ? b : b | 0x80);
    if (done) return out;
  }
}

function section(id: number, body: number[]): number[] {
  return [id, ...uleb(body.length), ...body];
}

function name(s: string): number[] {
  const b = [...Buffer.from(s, 'utf8')];
  return [...uleb(b.length), ...b];
}

const I32 = 0x7f;
const I64 = 0x7e;
const op = {
  block: [0x02, 0x40],
  loop: [0x03, 0x40],
  end: [0x0b],
  br: (d: number) => [0x0c, ...uleb(d)],
  brIf: (d: number) => [0x0d, ...uleb(d)],
  get: (i: number) => [0x20, ...uleb(i)],
  set: (i: number) => [0x21, ...uleb(i)],
  tee: (i: number) => [0x22, ...uleb(i)],
  i64Load: [0x29, 0x03, 0x00],
  i64Store: [0x37, 0x03, 0x00],
  i32Const: (v: number) => [0x41, ...sleb64(BigInt(v))],
  i64Const: (v: bigint) => [0x42, ...sleb64(v)],
  i32Eqz: [0x45],
  i32GeU: [0x4f],
  i32Add: [0x6a],
  i32Shl: [0x74],
  i64Add: [0x7c],
  i64Mul: [0x7e],
  i64And: [0x83],
  i64Or: [0x84],
  i64Xor: [0x85],
  i64Shl: [0x86],
  i64ShrU: [0x88],
  i64Rotl: [0x89],
} as const;

// XXH3 constants (see seq16.ts): bitflips for seed 1337 from the default secret, and PRIME_MX1.
const U64 = 0xffff_ffff_ffff_ffffn;
const SEED = 1337n;
const BITFLIP1 = ((0x1f67b3b7a4a44072n ^ 0x78e5c0cc4ee679cbn) + SEED) & U64;
const BITFLIP2 = ((0x2172ffcc7dd05a82n ^ 0x8e2443f7744608b8n) - SEED) & U64;
const PRIME_MX1 = 0x165667919e3779f9n;
const M32 = 0xffff_ffffn;

function chainModule(): Uint8Array {
  // params: 0 src (byte offset), 1 dst (byte offset), 2 n; locals: 3 i (i32), then i64s.
  const [SRC, DST, N, I] = [0, 1, 2, 3];
  const [PREV, LO, HI, P00, P01, P10, P11, CROSS, X, ACC] = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
  const addr = (base: number): number[] => [...op.get(base), ...op.get(I), ...op.i32Const(3), ...op.i32Shl, ...op.i32Add];
  const lo32 = (l: number): number[] => [...op.get(l), ...op.i64Const(M32), ...op.i64And];
  const hi32 = (l: number): number[] => [...op.get(l), ...op.i64Const(32n), ...op.i64ShrU];
  // bswap64(x): swap bytes within 16-bit lanes, then 16-bit lanes within 32-bit halves, then the halves.
  const bswap = (l: number): number[] => [
    ...op.get(l), ...op.i64Const(8n), ...op.i64ShrU, ...op.i64Const(0x00ff00ff00ff00ffn), ...op.i64And,
    ...op.get(l), ...op.i64Const(0x00ff00ff00ff00ffn), ...op.i64And, ...op.i64Const(8n), ...op.i64Shl,
    ...op.i64Or, ...op.tee(X),
    ...op.i64Const(16n), ...op.i64ShrU, ...op.i64Const(0x0000ffff0000ffffn), ...op.i64And,
    ...op.get(X), ...op.i64Const(0x0000ffff0000ffffn), ...op.i64And, ...op.i64Const(16n), ...op.i64Shl,
    ...op.i64Or, ...op.i64Const(32n), ...op.i64Rotl,
  ];
  // prettier-ignore
  const body = [
    // if (n == 0) return
    ...op.block, ...op.get(N), ...op.i32Eqz, ...op.brIf(0),
    // prev = src[0]; dst[0] = prev; i = 1
    ...op.get(DST), ...op.get(SRC), ...op.i64Load, ...op.tee(PREV), ...op.i64Store,
    ...op.i32Const(1), ...op.set(I),
    ...op.block, ...op.loop,
    ...op.get(I), ...op.get(N), ...op.i32GeU, ...op.brIf(1),
    // lo = prev ^ bitflip1; hi = src[i] ^ bitflip2
    ...op.get(PREV), ...op.i64Const(BITFLIP1), ...op.i64Xor, ...op.set(LO),
    ...addr(SRC), ...op.i64Load, ...op.i64Const(BITFLIP2), ...op.i64Xor, ...op.set(HI),
    // 32×32 partial products of lo × hi
    ...lo32(LO), ...lo32(HI), ...op.i64Mul, ...op.set(P00),
    ...lo32(LO), ...hi32(HI), ...op.i64Mul, ...op.set(P01),
    ...hi32(LO), ...lo32(HI), ...op.i64Mul, ...op.set(P10),
    ...hi32(LO), ...hi32(HI), ...op.i64Mul, ...op.set(P11),
    // cross = (p00 >> 32) + (p10 & M32) + p01   (cannot overflow: at most 2^64 - 1)
    ...hi32(P00), ...lo32(P10), ...op.i64Add, ...op.get(P01), ...op.i64Add, ...op.set(CROSS),
    // fold = low64 ^ high64, low64 = (cross << 32) | (p00 & M32), high64 = (p10 >> 32) + (cross >> 32) + p11
    ...op.get(CROSS), ...op.i64Const(32n), ...op.i64Shl, ...lo32(P00), ...op.i64Or,
    ...hi32(P10), ...hi32(CROSS), ...op.i64Add, ...op.get(P11), ...op.i64Add,
    ...op.i64Xor,
    // acc = 16 + bswap64(lo) + hi + fold
    ...bswap(LO), ...op.i64Add, ...op.get(HI), ...op.i64Add, ...op.i64Const(16n), ...op.i64Add, ...op.set(ACC),
    // avalanche: acc ^= acc >> 37; acc *= PRIME_MX1; acc ^= acc >> 32
    ...op.get(ACC), ...op.get(ACC), ...op.i64Const(37n), ...op.i64ShrU, ...op.i64Xor,
    ...op.i64Const(PRIME_MX1), ...op.i64Mul, ...op.tee(ACC),
    ...op.get(ACC), ...op.i64Const(32n), ...op.i64ShrU, ...op.i64Xor, ...op.set(PREV),
    // dst[i] = prev; i++
    ...addr(DST), ...op.get(PREV), ...op.i64Store,
    ...op.get(I), ...op.i32Const(1), ...op.i32Add, ...op.set(I),
    ...op.br(0),
    ...op.end, ...op.end,
    ...op.end, // outer block
    ...op.end, // function
  ];
  const locals = [2, ...uleb(1), I32, ...uleb(10), I64];
  const func = [...locals, ...body];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 3, I32, I32, I32, 0]), // type 0: (i32, i32, i32) -> ()
    ...section(3, [1, 0]), // function 0 has type 0
    ...section(5, [1, 0x00, 1]), // one memory, 1 page initially, growable
    ...section(7, [2, ...name('chain'), 0x00, 0, ...name('mem'), 0x02, 0]),
    ...section(10, [1, ...uleb(func.length), ...func]),
  ]);
}

interface WasmChain {
  /** `out` = sequence hashes of `locals` (same length). */
  run(locals: BigUint64Array, out: BigUint64Array): void;
}

/** The part of the WebAssembly JS API used here (the project's TypeScript libs do not declare it). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { readonly exports: Record<string, unknown> };
}

/** The WebAssembly chain, or null where WebAssembly cannot be instantiated. */
export function wasmChain(): WasmChain | null {
  const api = (globalThis as unknown as { WebAssembly?: WasmApi }).WebAssembly;
  let exports: Record<string, unknown>;
  try {
    if (api === undefined) return null;
    exports = new api.Instance(new api.Module(chainModule())).exports;
  } catch {
    return null;
  }
  const chain = exports.chain as (src: number, dst: number, n: number) => void;
  const mem = exports.mem as WasmMemory;
  let bytes = new Uint8Array(mem.buffer);
  return {
    run(locals: BigUint64Array, out: BigUint64Array): void {
      const n = locals.length;
      const need = 16 * n;
      if (need > mem.buffer.byteLength) mem.grow(Math.ceil((need - mem.buffer.byteLength) / 65536));
      if (bytes.buffer !== mem.buffer) bytes = new Uint8Array(mem.buffer);
      bytes.set(new Uint8Array(locals.buffer, locals.byteOffset, 8 * n), 0);
      chain(0, 8 * n, n);
      new Uint8Array(out.buffer, out.byteOffset, 8 * n).set(bytes.subarray(8 * n, 16 * n));
    },
  };
}
