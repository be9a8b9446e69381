/**
 * KV block hashing identical to NVIDIA Dynamo's (lib/kv-router, `compute_block_hash_for_seq`
 * and `compute_seq_hash_for_block`):
 *
 *   local[i]  = XXH3-64(tokens[i*bs .. (i+1)*bs] as u32 little-endian, seed)     full blocks only
 *   seed      = 1337, or 1337 + XXH3-64(utf8(lora_name), 0) mod 2^64 with a LoRA
 *   seq[0]    = local[0]
 *   seq[i]    = XXH3-64(le64(seq[i-1]) ++ le64(local[i]), 1337)
 *
 * XXH3 is `@node-rs/xxhash`'s, except the 16-byte sequence-hash step (README.md).
 */
import { xxh3 } from '@node-rs/xxhash';
import type { LocalHash, SequenceHash } from '@vantage/types';
import { wasmChain } from './seq-wasm';
import { seqHash16 } from './seq16';

const DYNAMO_HASH_SEED = 1337n;

const U64 = 0xffff_ffff_ffff_ffffn;

/** XXH3-64 of raw bytes with a u64 seed. */
export function xxh3_64(data: Uint8Array, seed: bigint = 0n): bigint {
  return xxh3.xxh64(data, seed);
}

/** Seed for a LoRA adapter name; an empty or absent name means the base seed. */
export function loraSeed(loraName?: string | null): bigint {
  if (!loraName) return DYNAMO_HASH_SEED;
  return (DYNAMO_HASH_SEED + xxh3.xxh64(Buffer.from(loraName, 'utf8'), 0n)) & U64;
}

/** Token ids as u32 little-endian bytes (a view, no copy, when already a Uint32Array on a little-endian host). */
function tokenBytes(tokens: ArrayLike<number>): Uint8Array {
  const u32 = tokens instanceof Uint32Array ? tokens : Uint32Array.from(tokens as ArrayLike<number>);
  return new Uint8Array(u32.buffer, u32.byteOffset, u32.byteLength);
}

/** Local block hashes of a prompt: one per full block, a trailing partial block dropped. */
export function localBlockHashes(
  tokens: ArrayLike<number>,
  blockSize: number,
  loraName?: string | null,
): BigUint64Array {
  if (!Number.isInteger(blockSize) || blockSize <= 0 || blockSize > 1 << 20) {
    throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
  }
  const bytes = tokenBytes(tokens);
  const n = Math.floor(tokens.length / blockSize);
  const out = new BigUint64Array(n);
  const seed = loraSeed(loraName);
  const stride = blockSize * 4;
  for (let i = 0; i < n; i++) {
    out[i] = xxh3.xxh64(bytes.subarray(i * stride, (i + 1) * stride), seed);
  }
  return out;
}

/** Local hash of exactly one block of tokens. */
export function localBlockHash(blockTokens: ArrayLike<number>, loraName?: string | null): LocalHash {
  return xxh3.xxh64(tokenBytes(blockTokens), loraSeed(loraName)) as LocalHash;
}

const pair = new BigUint64Array(2);
const pairBytes = new Uint8Array(pair.buffer);
const pairU32 = new Uint32Array(pair.buffer);

/** The native reference for one sequence-hash step (tests and the load-time self-check compare against it). */
export function nextSequenceHashNative(parent: bigint, local: bigint): SequenceHash {
  pair[0] = parent;
  pair[1] = local;
  return xxh3.xxh64(pairBytes, DYNAMO_HASH_SEED) as SequenceHash;
}

/** seq[i] from seq[i-1] and local[i]. Hashes little-endian u64s (host order is little-endian on every platform we run). */
export function nextSequenceHash(parent: bigint, local: bigint): SequenceHash {
  pair[0] = parent;
  pair[1] = local;
  seqHash16(pairU32, 0, pairU32, 2, pairU32, 0);
  return pair[0] as SequenceHash;
}

/** The chain in JavaScript on u32 views (the reference for the WebAssembly chain, and its fallback). */
export function sequenceHashesJs(locals: BigUint64Array, out?: BigUint64Array): BigUint64Array {
  const n = locals.length;
  const res = out ?? new BigUint64Array(n);
  if (res.length !== n) throw new RangeError(`output holds ${res.length} hashes, input ${n}`);
  if (n === 0) return res;
  const src = new Uint32Array(locals.buffer, locals.byteOffset, 2 * n);
  const dst = new Uint32Array(res.buffer, res.byteOffset, 2 * n);
  dst[0] = src[0]!;
  dst[1] = src[1]!;
  for (let i = 1; i < n; i++) seqHash16(dst, 2 * i - 2, src, 2 * i, dst, 2 * i);
  return res;
}

/** The WebAssembly chain (`seq-wasm.ts`), or null until it has passed the load-time check below (or where it cannot run). */
let wasm = wasmChain();
/** Which implementation `sequenceHashes` uses for chains of 8 blocks or more. */
export function sequenceChainEngine(): 'wasm' | 'js' {
  return wasm === null ? 'js' : 'wasm';
}

/** Below this many blocks the JavaScript chain is used: copying in and out of WebAssembly memory is not worth it. */
const WASM_MIN_BLOCKS = 8;

/** Sequence hashes from local hashes, written into `out` (same length as `locals`; a fresh array when absent). */
export function sequenceHashes(locals: BigUint64Array, out?: BigUint64Array): BigUint64Array {
  const n = locals.length;
  if (wasm === null || n < WASM_MIN_BLOCKS) return sequenceHashesJs(locals, out);
  const res = out ?? new BigUint64Array(n);
  if (res.length !== n) throw new RangeError(`output holds ${res.length} hashes, input ${n}`);
  wasm.run(locals, res);
  return res;
}

/** Both hash sequences of a prompt in one pass. */
export function hashPrompt(
  tokens: ArrayLike<number>,
  blockSize: number,
  loraName?: string | null,
): { local: BigUint64Array; sequence: BigUint64Array } {
  const local = localBlockHashes(tokens, blockSize, loraName);
  return { local, sequence: sequenceHashes(local) };
}

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
  // Dynamo hashes little-endian bytes; the views above assume the host is little-endian too.
  throw new Error('@vantage/hashing requires a little-endian host');
}

// The JavaScript sequence-hash step must agree with the native one bit for bit: refuse to load otherwise.
for (const [p, l] of [
  [0n, 0n],
  [14643705804678351452n, 16777012769546811212n],
  [U64, U64],
  [0x8000_0000_0000_0001n, 0x0123_4567_89ab_cdefn],
] as const) {
  if (nextSequenceHash(p, l) !== nextSequenceHashNative(p, l)) throw new Error('@vantage/hashing: sequence-hash fast path disagrees with XXH3');
}

// The WebAssembly chain must agree with the JavaScript one (checked against XXH3 just above) and with
// the native step on a chain through edge values; otherwise it is not used.
if (wasm !== null) {
  const probe = BigUint64Array.from([0n, U64, 1n, 0x8000_0000_0000_0000n, 0x0123_4567_89ab_cdefn, 14643705804678351452n, 16777012769546811212n, 0xffff_ffffn, 0x1_0000_0000n, 42n]);
  const viaWasm = new BigUint64Array(probe.length);
  wasm.run(probe, viaWasm);
  const viaJs = sequenceHashesJs(probe);
  let parent = probe[0]!;
  let agree = viaWasm[0] === parent;
  for (let i = 1; i < probe.length && agree; i++) {
    parent = nextSequenceHashNative(parent, probe[i]!);
    agree = viaWasm[i] === parent && viaJs[i] === parent;
  }
  if (!agree) wasm = null;
}
