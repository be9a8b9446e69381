import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashPrompt, nextSequenceHash, nextSequenceHashNative, sequenceChainEngine, sequenceHashes, sequenceHashesJs } from '../src/index';

const vectorsPath = fileURLToPath(new URL('../../../../shared/reference/dynamo-hash-vectors.json', import.meta.url));
const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8')) as { sequence_hash: { tokens: number[]; block_size: number; sequence_hashes: string[] }[] };

/** The chain one native call per step: the reference the JavaScript fast path must reproduce. */
function nativeChain(locals: BigUint64Array): BigUint64Array {
  const out = new BigUint64Array(locals.length);
  for (let i = 0; i < locals.length; i++) out[i] = i === 0 ? locals[0]! : nextSequenceHashNative(out[i - 1]!, locals[i]!);
  return out;
}

const u64 = fc.bigUintN(64);
/** Values that stress carries: all-ones halves, single bits, small numbers. */
const edgy = fc.oneof(
  u64,
  fc.constantFrom(0n, 1n, 0xffff_ffffn, 0x1_0000_0000n, 0xffff_ffff_ffff_ffffn, 0x8000_0000_0000_0000n, 0xffff_ffff_0000_0000n),
  fc.integer({ min: 0, max: 63 }).map((b) => 1n << BigInt(b)),
);

describe('sequence-hash fast path (XXH3-64 of 16 bytes on u32 halves)', () => {
  it('equals the native XXH3 on random (parent, local) pairs', () => {
    fc.assert(
      fc.property(edgy, edgy, (p, l) => nextSequenceHash(p, l) === nextSequenceHashNative(p, l)),
      { seed: 0x5e9_1337, numRuns: 200_000 },
    );
  });
  it('equals the native chain on random prompts, into a fresh or a caller-owned array', () => {
    fc.assert(
      fc.property(fc.array(u64, { maxLength: 300 }), (xs) => {
        const locals = BigUint64Array.from(xs);
        const want = nativeChain(locals);
        expect(sequenceHashes(locals)).toEqual(want);
        const into = new BigUint64Array(locals.length);
        expect(sequenceHashes(locals, into)).toBe(into);
        expect(into).toEqual(want);
      }),
      { seed: 42, numRuns: 500 },
    );
  });
  it('runs long chains in WebAssembly, equal to the JavaScript chain and the native one on edge values', () => {
    expect(sequenceChainEngine()).toBe('wasm');
    fc.assert(
      fc.property(fc.array(edgy, { minLength: 8, maxLength: 600 }), (xs) => {
        const locals = BigUint64Array.from(xs);
        const want = nativeChain(locals);
        expect(sequenceHashes(locals)).toEqual(want);
        expect(sequenceHashesJs(locals)).toEqual(want);
      }),
      { seed: 7, numRuns: 300 },
    );
  });
  it('grows the WebAssembly memory for a long prompt (100k blocks) and stays exact', () => {
    const locals = new BigUint64Array(100_000);
    for (let i = 0; i < locals.length; i++) locals[i] = BigInt(i) * 0x9e37_79b9_7f4a_7c15n & 0xffff_ffff_ffff_ffffn;
    expect(sequenceHashes(locals)).toEqual(nativeChain(locals));
  });
  it('reads a subarray view at its own offset', () => {
    const all = BigUint64Array.from([5n, 6n, 7n, 8n, 9n]);
    expect(sequenceHashes(all.subarray(1, 4))).toEqual(nativeChain(BigUint64Array.from([6n, 7n, 8n])));
    const long = BigUint64Array.from({ length: 20 }, (_, i) => BigInt(i) * 977n);
    const into = new BigUint64Array(30);
    expect(sequenceHashes(long.subarray(3, 17), into.subarray(5, 19))).toEqual(nativeChain(long.slice(3, 17)));
    expect(into.subarray(5, 19)).toEqual(nativeChain(long.slice(3, 17)));
    expect(into[4]).toBe(0n);
    expect(into[19]).toBe(0n);
  });
  it.each(vectors.sequence_hash)("reproduces Dynamo's sequence vectors $tokens", (v) => {
    const { local } = hashPrompt(v.tokens, v.block_size);
    expect([...sequenceHashes(local)].map(String)).toEqual(v.sequence_hashes);
    let prev = local[0]!;
    for (let i = 1; i < local.length; i++) {
      prev = nextSequenceHash(prev, local[i]!);
      expect(prev.toString()).toBe(v.sequence_hashes[i]);
    }
  });
  it('refuses an output of the wrong length', () => {
    expect(() => sequenceHashes(new BigUint64Array(3), new BigUint64Array(2))).toThrow(RangeError);
  });
});
