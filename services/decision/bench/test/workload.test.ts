import { describe, expect, it } from 'vitest';
import { localBlockHashes } from '@vantage/hashing';
import { BLOCK, SESSION_TOKENS, SESSIONS, WORKERS, heldBlocks, sessionOf, storedPrefixEvent, tokensFor } from '../workload';
import type { WorkerId } from '@vantage/types';

describe('decision benchmark workload', () => {
  const hashes = Array.from({ length: SESSIONS }, (_, s) => localBlockHashes(tokensFor(s, SESSION_TOKENS), BLOCK));

  it('repeats no block within a session, and shares none across sessions', () => {
    const all = new Set<bigint>();
    for (const h of hashes) {
      expect(new Set(h).size).toBe(h.length);
      for (const x of h) all.add(x);
    }
    expect(all.size).toBe(SESSIONS * (SESSION_TOKENS / BLOCK));
  });

  it('gives each worker one stored prefix of its session, 1/8 to 7/8 of it, engine ids distinct', () => {
    const sizes = new Set<number>();
    for (let w = 0; w < WORKERS; w++) {
      const e = storedPrefixEvent(BigInt(1000 + w) as WorkerId, w, hashes);
      if (e.data.kind !== 'stored') throw new Error('stored expected');
      const h = hashes[sessionOf(w)]!;
      expect(e.data.tokensHashes).toEqual(h.slice(0, heldBlocks(w, h.length)));
      expect(new Set(e.data.blockHashes).size).toBe(e.data.blockHashes.length);
      expect(e.data.parentHash).toBeNull();
      sizes.add(e.data.tokensHashes.length);
    }
    expect([...sizes].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7].map((k) => (k * 2048) / 8));
  });

  it('is the same stream on every call (a prompt is a prefix of its session)', () => {
    expect(tokensFor(2, 1000)).toEqual(tokensFor(2, SESSION_TOKENS).subarray(0, 1000));
    expect(tokensFor(2, 64)).not.toEqual(tokensFor(3, 64));
  });
});
