import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { hashPrompt, localBlockHash, localBlockHashes, loraSeed, sequenceHashes, xxh3_64 } from '../src/index';

// Vectors published beside the reference (Dynamo's own test constants, recomputed independently).
const vectorsPath = fileURLToPath(new URL('../../../../shared/reference/dynamo-hash-vectors.json', import.meta.url));
const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8')) as {
  raw_bytes: { utf8: string; seed: number; xxh3_64: string }[];
  local_block_hash: { tokens: number[]; xxh3_64: string }[];
  sequence_hash: { tokens: number[]; block_size: number; sequence_hashes: string[] }[];
  lora: { tokens: number[]; lora_name: string; xxh3_64: string }[];
};

describe('Dynamo hash vectors', () => {
  it.each(vectors.raw_bytes)('raw bytes $utf8', (v) => {
    expect(xxh3_64(Buffer.from(v.utf8, 'utf8'), BigInt(v.seed)).toString()).toBe(v.xxh3_64);
  });
  it.each(vectors.local_block_hash)('local block $tokens', (v) => {
    expect(localBlockHash(v.tokens).toString()).toBe(v.xxh3_64);
    expect([...localBlockHashes(v.tokens, 4)].map(String)).toEqual([v.xxh3_64]);
  });
  it.each(vectors.sequence_hash)('sequence $tokens', (v) => {
    const { sequence } = hashPrompt(v.tokens, v.block_size);
    expect([...sequence].map(String)).toEqual(v.sequence_hashes);
  });
  it.each(vectors.lora)('lora $lora_name', (v) => {
    expect(localBlockHash(v.tokens, v.lora_name).toString()).toBe(v.xxh3_64);
    expect(localBlockHash(v.tokens, v.lora_name)).not.toBe(localBlockHash(v.tokens));
  });
});

describe('block rules', () => {
  it('drops a trailing partial block', () => {
    expect(localBlockHashes([1, 2, 3, 4, 5, 6, 7], 4).length).toBe(1);
    expect(localBlockHashes([1, 2, 3], 4).length).toBe(0);
  });
  it('empty LoRA name is the base seed', () => {
    expect(loraSeed('')).toBe(1337n);
    expect(loraSeed(undefined)).toBe(1337n);
  });
  it('accepts Uint32Array and plain arrays alike, including tokens above 2^31', () => {
    const toks = [0xffff_fffe, 7, 0x8000_0000, 1];
    expect(localBlockHashes(Uint32Array.from(toks), 2)).toEqual(localBlockHashes(toks, 2));
  });
  it('sequence of empty is empty', () => {
    expect(sequenceHashes(new BigUint64Array(0)).length).toBe(0);
  });
  it('rejects a bad block size', () => {
    expect(() => localBlockHashes([1, 2], 0)).toThrow(RangeError);
  });
});
