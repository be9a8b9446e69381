import { describe, expect, it } from 'vitest';
import { seededRng } from '@vantage/selection';
import { BlockPool } from '../src/block-pool';
import { checkPoolInvariants } from './helpers';

describe('block pool hash table', () => {
  it('finds every cached block through heavy probe collisions while blocks are evicted in LRU order', () => {
    const rng = seededRng(3);
    for (let round = 0; round < 20; round++) {
      const cap = 8 + Math.floor(rng.next() * 40);
      const pool = new BlockPool(cap);
      const live = new Map<string, number>();
      const model: Array<[number, number]> = []; // LRU order of unreferenced blocks
      for (let op = 0; op < 400; op++) {
        // Low words drawn from a handful of values: most inserts collide in the table.
        const lo = Math.floor(rng.next() * 6) * 64 + (rng.next() < 0.5 ? 0 : 1);
        const hi = Math.floor(rng.next() * 1000);
        const key = `${lo}:${hi}`;
        if (live.has(key)) continue;
        if (!pool.allocPrivate(1)) break;
        const slot = pool.promote(lo, hi);
        expect(pool.lastPromoteWasNew).toBe(true);
        live.set(key, slot);
        // Release right away: every block becomes evictable, so later allocations evict the oldest.
        pool.release(slot);
        model.push([lo, hi]);
        const evicted = pool.evicted.splice(0);
        for (let i = 0; i < evicted.length; i += 2) {
          const [elo, ehi] = model.shift()!;
          expect([evicted[i], evicted[i + 1]]).toEqual([elo, ehi]);
          live.delete(`${elo}:${ehi}`);
        }
        checkPoolInvariants(pool);
        for (const [k, s] of live) {
          const [l, h] = k.split(':').map(Number) as [number, number];
          if (pool.find(l, h) !== s) throw new Error(`block ${k} lost after ${op} operations`);
        }
      }
      expect(pool.cachedBlocks).toBe(live.size);
    }
  });

  it('refuses an allocation it cannot satisfy without evicting anything', () => {
    const pool = new BlockPool(4);
    expect(pool.allocPrivate(3)).toBe(true);
    const a = pool.promote(1, 0); // 2 private, 1 cached
    pool.release(a); // evictable
    expect(pool.allocPrivate(3)).toBe(false); // 1 free + 1 evictable < 3
    expect(pool.evicted).toEqual([]);
    expect(pool.allocPrivate(2)).toBe(true);
    expect(pool.evicted).toEqual([1, 0]);
    expect(() => pool.release(a)).toThrow(); // evicted slot has no references left to drop
  });
});
