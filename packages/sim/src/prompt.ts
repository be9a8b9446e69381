/**
 * Prompts as the engine sees them: hashes of every full block plus the
 * tokens of the trailing partial block (needed to hash the first block that
 * generated tokens complete). Built either from token ids or from a
 * Mooncake trace line's hash_ids, without materialising the tokens.
 */
import { localBlockHash, localBlockHashes, nextSequenceHash, sequenceHashes } from '@vantage/hashing';

export interface PromptBlocks {
  /** Prompt tokens. */
  readonly isl: number;
  readonly blockSize: number;
  /** Local hash of each full block (floor(isl / blockSize) of them). */
  readonly local: BigUint64Array;
  /** Sequence hash of each full block; the engine's block id (`block_hash`). */
  readonly sequence: BigUint64Array;
  /** The isl % blockSize tokens after the last full block. */
  readonly tail: Uint32Array;
}

/** Hash a prompt given as token ids. */
export function promptFromTokens(tokens: ArrayLike<number>, blockSize: number): PromptBlocks {
  const u32 = tokens instanceof Uint32Array ? tokens : Uint32Array.from(tokens as ArrayLike<number>);
  const local = localBlockHashes(u32, blockSize);
  const full = local.length * blockSize;
  return { isl: u32.length, blockSize, local, sequence: sequenceHashes(local), tail: u32.slice(full) };
}

/** Tokens per Mooncake hash_id. */
export const MOONCAKE_CHUNK_TOKENS = 512;

/** The chunk cache's key for "no parent": outside the u64 range, so no sequence hash can equal it. */
const ROOT = -1n;

/**
 * Turns Mooncake `hash_ids` into engine prompts by the replay convention (README.md, "Prompts").
 * Fast path (block size dividing 512): a chunk's 512/bs blocks share one local hash (the id's
 * alone); their sequence hashes depend on the parent sequence hash, so chunks are cached by
 * (parent, id) and a prefix shared by many requests is hashed once. A chunk cut by input_length
 * uses the first floor(rest / bs) entries of the cached chunk: a block's hash does not depend on
 * what follows it.
 */
export class MooncakePromptHasher {
  readonly blockSize: number;
  private readonly perChunk: number;
  private readonly localById = new Map<number, bigint>();
  /** parent sequence hash (ROOT for the first chunk) → id → sequence hashes of the chunk's blocks. */
  private readonly chunks = new Map<bigint, Map<number, BigUint64Array>>();
  private chunkCount = 0;
  constructor(blockSize: number) {
    if (!Number.isInteger(blockSize) || blockSize <= 0) throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
    this.blockSize = blockSize;
    this.perChunk = MOONCAKE_CHUNK_TOKENS % blockSize === 0 ? MOONCAKE_CHUNK_TOKENS / blockSize : 0;
  }

  /** Materialise the prompt tokens (slow path and tests). */
  static tokens(hashIds: ArrayLike<number>, inputLength: number): Uint32Array {
    const out = new Uint32Array(inputLength);
    for (let i = 0; i < inputLength; i++) out[i] = hashIds[Math.floor(i / MOONCAKE_CHUNK_TOKENS)]!;
    return out;
  }

  private localOf(id: number): bigint {
    let h = this.localById.get(id);
    if (h === undefined) {
      h = localBlockHash(new Uint32Array(this.blockSize).fill(id));
      this.localById.set(id, h);
    }
    return h;
  }

  private chunk(parent: bigint | null, id: number): BigUint64Array {
    const key = parent ?? ROOT;
    let byId = this.chunks.get(key);
    if (byId === undefined) this.chunks.set(key, (byId = new Map()));
    let seqs = byId.get(id);
    if (seqs === undefined) {
      const local = this.localOf(id);
      seqs = new BigUint64Array(this.perChunk);
      let prev = parent;
      for (let j = 0; j < this.perChunk; j++) {
        prev = prev === null ? local : nextSequenceHash(prev, local);
        seqs[j] = prev;
      }
      // Bound on cached chunks: the cache is dropped wholesale past it (it is only a cache).
      if (++this.chunkCount > 1_000_000) {
        this.chunks.clear();
        this.chunkCount = 1;
        this.chunks.set(key, (byId = new Map()));
      }
      byId.set(id, seqs);
    }
    return seqs;
  }

  prompt(hashIds: ArrayLike<number>, inputLength: number): PromptBlocks {
    const bs = this.blockSize;
    if (!Number.isInteger(inputLength) || inputLength <= 0) throw new RangeError(`input_length must be a positive integer, got ${inputLength}`);
    if (hashIds.length !== Math.ceil(inputLength / MOONCAKE_CHUNK_TOKENS)) {
      throw new RangeError(`hash_ids has ${hashIds.length} entries; input_length ${inputLength} needs ${Math.ceil(inputLength / MOONCAKE_CHUNK_TOKENS)}`);
    }
    // Block size does not divide 512: blocks straddle chunks, hash the tokens.
    if (this.perChunk === 0) return promptFromTokens(MooncakePromptHasher.tokens(hashIds, inputLength), bs);
    const nFull = Math.floor(inputLength / bs);
    // Blocks do not straddle chunks, so the partial last block lies in the last chunk.
    const tail = new Uint32Array(inputLength - nFull * bs).fill(hashIds[hashIds.length - 1]!);
    const local = new BigUint64Array(nFull);
    const sequence = new BigUint64Array(nFull);
    let parent: bigint | null = null;
    for (let c = 0, b = 0; b < nFull; c++) {
      const id = hashIds[c]!;
      const seqs = this.chunk(parent, id);
      const take = Math.min(this.perChunk, nFull - b);
      const l = this.localOf(id);
      for (let j = 0; j < take; j++) {
        local[b + j] = l;
        sequence[b + j] = seqs[j]!;
      }
      b += take;
      parent = seqs[this.perChunk - 1]!;
    }
    return { isl: inputLength, blockSize: bs, local, sequence, tail };
  }
}
