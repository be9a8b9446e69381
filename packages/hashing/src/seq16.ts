/**
 * XXH3-64 of exactly 16 bytes with seed 1337, in plain JavaScript on u32 halves: the sequence-hash
 * step `XXH3-64(le64(parent) ++ le64(local), 1337)`, on u32 views of BigUint64Arrays (README.md).
 *
 * XXH3's path for inputs of 9..16 bytes (the reference `XXH3_len_9to16_64b`):
 *   bitflip1 = (secret[24..32) ^ secret[32..40)) + seed
 *   bitflip2 = (secret[40..48) ^ secret[48..56)) - seed
 *   lo = le64(input[0..8)) ^ bitflip1,  hi = le64(input[len-8..len)) ^ bitflip2
 *   acc = len + bswap64(lo) + hi + fold64(lo × hi)      (fold64: low 64 bits ^ high 64 bits of the 128-bit product)
 *   avalanche: acc ^= acc >> 37; acc *= 0x165667919E3779F9; acc ^= acc >> 32
 * with XXH3's default secret and all arithmetic mod 2^64.
 */

/** Bytes 24..55 of XXH3's default secret (`XXH3_kSecret`), as little-endian u64s. */
const SECRET_24 = 0x1f67b3b7a4a44072n;
const SECRET_32 = 0x78e5c0cc4ee679cbn;
const SECRET_40 = 0x2172ffcc7dd05a82n;
const SECRET_48 = 0x8e2443f7744608b8n;
const U64 = 0xffff_ffff_ffff_ffffn;
const SEED = 1337n;

const BITFLIP1 = ((SECRET_24 ^ SECRET_32) + SEED) & U64;
const BITFLIP2 = ((SECRET_40 ^ SECRET_48) - SEED) & U64;
const B1L = Number(BITFLIP1 & 0xffff_ffffn);
const B1H = Number(BITFLIP1 >> 32n);
const B2L = Number(BITFLIP2 & 0xffff_ffffn);
const B2H = Number(BITFLIP2 >> 32n);
/** PRIME_MX1 = 0x165667919E3779F9, split for the multiplication. */
const MX_H = 0x16566791;
const MX_L = 0x9e3779f9;

const P32 = 0x1_0000_0000;

function bswap32(x: number): number {
  return (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;
}

/**
 * High 32 bits of the 64-bit product of two u32s, from 16-bit halves: each partial product is below
 * 2^32 and every sum below 2^34, exact in a double. The low 32 bits are `Math.imul(a, b) >>> 0`.
 */
function mulHi32(a: number, b: number): number {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const b0 = b & 0xffff;
  const b1 = b >>> 16;
  const m1 = a1 * b0;
  const m2 = a0 * b1;
  const mid = ((a0 * b0) >>> 16) + (m1 & 0xffff) + (m2 & 0xffff);
  return a1 * b1 + (m1 >>> 16) + (m2 >>> 16) + (mid >>> 16);
}

/**
 * seq = XXH3-64(le64(parent) ++ le64(local), 1337), reading parent from `src[pi], src[pi+1]` (low, high
 * u32), local from `loc[li], loc[li+1]`, writing the result to `out[oi], out[oi+1]`.
 */
export function seqHash16(src: Uint32Array, pi: number, loc: Uint32Array, li: number, out: Uint32Array, oi: number): void {
  const loL = (src[pi]! ^ B1L) >>> 0;
  const loH = (src[pi + 1]! ^ B1H) >>> 0;
  const hiL = (loc[li]! ^ B2L) >>> 0;
  const hiH = (loc[li + 1]! ^ B2H) >>> 0;

  // 128-bit lo × hi from four 32×32 products, as four u32 words w0..w3 (carries summed in doubles, < 2^34).
  const s1 = mulHi32(loL, hiL) + (Math.imul(loL, hiH) >>> 0) + (Math.imul(loH, hiL) >>> 0);
  const w1 = s1 >>> 0;
  const s2 = mulHi32(loL, hiH) + mulHi32(loH, hiL) + (Math.imul(loH, hiH) >>> 0) + (s1 - w1) / P32;
  const w2 = s2 >>> 0;
  const w3 = (mulHi32(loH, hiH) + (s2 - w2) / P32) >>> 0;
  const foldL = ((Math.imul(loL, hiL) >>> 0) ^ w2) >>> 0;
  const foldH = (w1 ^ w3) >>> 0;

  // acc = 16 + bswap64(lo) + hi + fold (mod 2^64); bswap64 swaps the halves and each half's bytes.
  const sumL = 16 + bswap32(loH) + hiL + foldL;
  let accL = sumL >>> 0;
  const accH = (bswap32(loL) + hiH + foldH + (sumL - accL) / P32) >>> 0;

  // Avalanche: acc ^= acc >> 37; acc *= PRIME_MX1 (mod 2^64); acc ^= acc >> 32.
  accL = (accL ^ (accH >>> 5)) >>> 0;
  const mL = Math.imul(accL, MX_L) >>> 0;
  const mH = (mulHi32(accL, MX_L) + Math.imul(accL, MX_H) + Math.imul(accH, MX_L)) >>> 0;
  out[oi] = (mL ^ mH) >>> 0;
  out[oi + 1] = mH;
}
