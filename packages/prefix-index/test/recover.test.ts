import { describe, expect, it } from 'vitest';
import { PrefixIndex as Index, type MatchResult } from '@vantage/prefix-index';
import { W, locals, removed, stored } from './events';

const W1 = W(1);

/** `recover`: a publisher's state replaced by its worker's own dump (Dynamo's TreeDump recovery). */
describe('PrefixIndex recover', () => {
  const dev = (r: MatchResult, w: bigint | number, dp = 0): number => r.workers.find((x) => x.workerId === BigInt(w) && x.dpRank === dp)?.deviceBlocks ?? -1;

  it("replaces only that publisher's blocks, ends its suspicion and continues from the dump's last id", () => {
    const idx = new Index(16);
    idx.apply(stored(1, 1, null, [[100, 1], [101, 2], [102, 3]]), 0);
    idx.apply(stored(2, 1, null, [[200, 1], [201, 2]]), 0);
    idx.apply(stored(1, 5, null, [[110, 7]]), 3); // 2..4 lost
    expect(idx.suspectOf(W1, 0)?.reason).toBe('event_gap');
    // The worker's own index: chain 1-2 (3 was evicted) and 7-8; synthetic ids from 0.
    const r = idx.recover(W1, 0, [stored(1, 0, null, [[100, 1], [101, 2]]), stored(1, 1, null, [[110, 7], [111, 8]])], 9n, 20);
    expect(r).toMatchObject({ blocksDropped: 4, blocks: 4, unknownParents: 0, suspect: null });
    expect(idx.suspectOf(W1, 0)).toBeNull();
    expect(dev(idx.match(locals(1, 2, 3)), 1)).toBe(2);
    expect(dev(idx.match(locals(7, 8)), 1)).toBe(2);
    expect(dev(idx.match(locals(1, 2, 3)), 2)).toBe(2); // the other worker untouched
    expect(idx.lastEventIdOf(W1, 0)).toBe(9n);
    expect(idx.lastEventIdOf(W1, 3)).toBeNull();
    const m = idx.match(locals(1)).workers.find((x) => x.workerId === W1)!;
    expect(m.lastEventId).toBe(9n);
    expect(m.lastEventMs).toBe(20);
    // Live events continue at 10; 9 and below are already in the dump.
    expect(idx.apply(removed(1, 9, [101]), 21).status).toBe('duplicate');
    const next = idx.apply(removed(1, 10, [101]), 21);
    expect(next.status).toBe('applied');
    expect(next.suspect).toBeNull();
    expect(dev(idx.match(locals(1, 2)), 1)).toBe(1);
  });

  it('a dump event with an unknown parent leaves the publisher suspect; an invalid dump changes nothing', () => {
    const idx = new Index(16);
    idx.apply(stored(1, 1, null, [[100, 1]]), 0);
    const r = idx.recover(W1, 0, [stored(1, 0, 999, [[101, 2]])], 4n, 5);
    expect(r.unknownParents).toBe(1);
    expect(idx.suspectOf(W1, 0)?.reason).toBe('unknown_parent');
    const before = JSON.stringify(idx.stats(), (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
    expect(() => idx.recover(W1, 0, [stored(1, 0, null, [[100, 1]]), stored(2, 1, null, [[200, 1]])], 5n, 6)).toThrow(RangeError);
    expect(() => idx.recover(W1, 1, [stored(1, 0, null, [[100, 1]])], 5n, 6)).toThrow(RangeError); // another dp rank's event
    expect(JSON.stringify(idx.stats(), (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).toBe(before);
  });

  it('survives a snapshot with its position', () => {
    const idx = new Index(16);
    idx.recover(W1, 0, [stored(1, 0, null, [[100, 1], [101, 2]])], 2n ** 64n - 2n, 7);
    const back = Index.restore(idx.snapshot());
    expect(dev(back.match(locals(1, 2)), 1)).toBe(2);
    expect(back.apply(stored(1, 2n ** 64n - 2n, null, [[300, 5]]), 8).status).toBe('duplicate');
    expect(back.apply(stored(1, 2n ** 64n - 1n, null, [[300, 5]]), 8).status).toBe('applied');
  });
});
