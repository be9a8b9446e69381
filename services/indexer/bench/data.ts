/**
 * The indexer benchmarks' data (bench:indexer and the in-process hot-path profile share it, so
 * their figures are about the same prompts and workers): 8 shared system prompts (128..352
 * blocks) × 8 continuations = 64 prompts of 512 blocks (32k tokens at 64 per block), and 64
 * worker ids. Seeded: every run builds the same data.
 */
import { sequenceHashes } from '@vantage/hashing';
import type { BookingEvent } from '@vantage/protocol';
import type { WorkerId } from '@vantage/types';

export const PROMPT_BLOCKS = 512; // 32k tokens
export const WORKERS = 64;

let seed = 0x12345678n;
/** splitmix64; the stream continues past the prompts for callers that need more random ids. */
export function rand64(): bigint {
  seed = (seed + 0x9e3779b97f4a7c15n) & 0xffff_ffff_ffff_ffffn;
  let z = seed;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffff_ffff_ffff_ffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffff_ffff_ffff_ffffn;
  return z ^ (z >> 31n);
}

export const prompts: { local: BigUint64Array; seq: BigUint64Array }[] = [];
for (let g = 0; g < 8; g++) {
  const shared = Array.from({ length: 128 + g * 32 }, rand64);
  for (let k = 0; k < 8; k++) {
    const local = BigUint64Array.from([...shared, ...Array.from({ length: PROMPT_BLOCKS - shared.length }, rand64)]);
    prompts.push({ local, seq: sequenceHashes(local) });
  }
}

export const workerIds = Array.from({ length: WORKERS }, (_, i) => (0x8000_0000_0000_0000n + BigInt(i) * 7919n) as WorkerId);

/**
 * Bookings as the decision service publishes them (local hashes), `perWorker` per worker: worker i
 * holds prompts i+16j (mod 64), so every observed prompt is fully active on some workers and
 * shares only its system prompt, or nothing, with the rest.
 */
export function benchBookings(pool: string, perWorker: number, blockSize: number): BookingEvent[] {
  const out: BookingEvent[] = [];
  for (let i = 0; i < WORKERS; i++) {
    for (let j = 0; j < perWorker; j++) {
      const p = (i + 16 * j) % prompts.length;
      out.push({
        requestId: `bench-${i}-${j}`,
        sessionId: `bench-${p}`,
        pool,
        workerId: workerIds[i]!,
        dpRank: 0,
        promptTokens: PROMPT_BLOCKS * blockSize,
        overlapBlocks: 0,
        sequenceHashes: null,
        localHashes: prompts[p]!.local,
        expectedOutputTokens: 256,
        prefillTokens: null,
        atMs: Date.now(),
      });
    }
  }
  return out;
}
