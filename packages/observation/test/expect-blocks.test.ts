import { describe, expect, it } from 'vitest';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { PoolState } from '../src/index';

const W = 18_446_744_073_709_551_557n as WorkerId;

function pool(): PoolState {
  return new PoolState({ pool: 'p', blockSize: 4, selection: { kind: 'kv_router', formula: 'overlap_weight' }, bookingTtlMs: 300_000, workerTtlMs: 60_000 });
}

/** One stored event of block k of a chain (engine id = local hash = a spread-out function of k). */
function block(k: number): KvEvent {
  const h = (i: number): bigint => BigInt(i + 1) * 0x9e37_79b9_7f4a_7c15n;
  return {
    workerId: W,
    dpRank: 0,
    storageTier: 'device',
    eventId: BigInt(k + 1),
    data: { kind: 'stored', parentHash: k === 0 ? null : (h(k - 1) as ExternalHash), startPosition: k, blockHashes: BigUint64Array.of(h(k)), tokensHashes: BigUint64Array.of(h(k)) },
  };
}

describe('registration capacity sizes the index', () => {
  it("a registered worker's total_kv_blocks reaches the index: its block-id table does not grow while it fills", () => {
    const cap = (totalKvBlocks: number | null) => ({ blockSize: 4, totalKvBlocks, maxNumBatchedTokens: 16, maxNumSeqs: 8, dpStartRank: 0, dpSize: 1, schedulable: true });
    const fill = (p: PoolState): { first: number; last: number } => {
      p.applyKvEvent(block(0), 1);
      const first = p.index.stats().arrayBytes;
      for (let k = 1; k < 900; k++) p.applyKvEvent(block(k), 1);
      return { first, last: p.index.stats().arrayBytes };
    };
    const sized = pool();
    sized.register(W, cap(1000), null, 0);
    const unknown = pool();
    unknown.register(W, cap(null), null, 0);
    const s = fill(sized);
    const u = fill(unknown);
    expect(s.last).toBe(s.first);
    expect(u.last).toBeGreaterThan(u.first);
    // Same answers either way.
    expect(sized.index.stats().totalBlocks).toBe(900);
    expect(unknown.index.stats().totalBlocks).toBe(900);
  });
});
