import { describe, expect, it } from 'vitest';
import { PrefixIndex, type MatchResult, type WorkerMatch } from '@vantage/prefix-index';
import { W, cleared, locals, removed, stored } from './events';

describe('PrefixIndex', () => {
  function of(r: MatchResult, worker: bigint | number, dp = 0): WorkerMatch {
    const m = r.workers.find((x) => x.workerId === BigInt(worker) && x.dpRank === dp);
    if (!m) throw new Error(`no match entry for ${worker}:${dp}`);
    return m;
  }
  const dev = (idx: PrefixIndex, q: BigUint64Array, worker: bigint | number, dp = 0): number =>
    of(idx.match(q), worker, dp).deviceBlocks;

  describe('stored', () => {
    it('matches leading blocks from the root and reports tokens with the pool block size', () => {
      const idx = new PrefixIndex(64);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2], [102, 3]]), 10);
      const m = of(idx.match(locals(1, 2, 3, 4)), 1);
      expect(m.deviceBlocks).toBe(3);
      expect(m.deviceTokens).toBe(192);
      expect(m.anyBlocks).toBe(3);
      expect(m.treeSize).toBe(3);
      expect(dev(idx, locals(2, 3), 1)).toBe(0); // must start at block 0
      expect(dev(idx, locals(1, 9, 3), 1)).toBe(1);
      expect(dev(idx, locals(), 1)).toBe(0);
    });

    it("finds the parent through the worker's own block ids, not another worker's", () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      idx.apply(stored(1, 2, 100, [[101, 2]]), 0); // parent by ext id 100
      expect(dev(idx, locals(1, 2), 1)).toBe(2);
      // Worker 2 names ext 100 as parent but never stored it: unknown parent, nothing reachable.
      const r = idx.apply(stored(2, 1, 100, [[201, 2]]), 5);
      expect(r.unknownParent).toBe(true);
      expect(r.suspect).toEqual({ reason: 'unknown_parent', sinceMs: 5, incidents: 1 });
      expect(of(idx.match(locals(1, 2)), 2).anyBlocks).toBe(0);
    });

    it('keys children by local hash: different engine ids with the same tokens share the path', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]]), 0);
      idx.apply(stored(2, 1, null, [[900, 1], [901, 2]]), 0);
      expect(idx.stats().nodes).toBe(2);
      const r = idx.match(locals(1, 2));
      expect(of(r, 1).deviceBlocks).toBe(2);
      expect(of(r, 2).deviceBlocks).toBe(2);
      // Same local hash under different parents is a different block.
      idx.apply(stored(3, 1, null, [[300, 2], [301, 1]]), 0);
      expect(dev(idx, locals(1, 2), 3)).toBe(0);
      expect(dev(idx, locals(2, 1), 3)).toBe(2);
    });

    it('keeps full u64 hashes and worker ids exact (values above 2^53 differing in low bits)', () => {
      const idx = new PrefixIndex(16);
      const big = 0xffff_ffff_ffff_ffffn;
      const w1 = big;
      const w2 = big - 1n;
      idx.apply(stored(w1, 1, null, [[big, big - 2n], [big - 1n, big - 3n]]), 0);
      idx.apply(stored(w2, 1, null, [[1n << 60n, big - 2n]]), 0);
      const r = idx.match(locals(big - 2n, big - 3n));
      expect(of(r, w1).deviceBlocks).toBe(2);
      expect(of(r, w2).deviceBlocks).toBe(1);
      expect(dev(idx, locals(big - 2n, big - 4n), w1)).toBe(1);
      // Parent lookup on a u64 id above 2^53.
      idx.apply(stored(w1, 2, big - 1n, [[5n, 7n]]), 0);
      expect(dev(idx, locals(big - 2n, big - 3n, 7n), w1)).toBe(3);
      expect(idx.match(locals(big - 2n)).workers.map((m) => m.workerId).sort()).toEqual([w2, w1]);
    });
  });

  describe('removed', () => {
    it('drops only the named worker from each block', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]]), 0);
      idx.apply(stored(2, 1, null, [[200, 1], [201, 2]]), 0);
      idx.apply(removed(1, 2, [101]), 0);
      const r = idx.match(locals(1, 2));
      expect(of(r, 1).deviceBlocks).toBe(1);
      expect(of(r, 2).deviceBlocks).toBe(2);
      expect(of(r, 1).treeSize).toBe(1);
      // Leading blocks only: worker 1 still holds block 1 but not block 0.
      idx.apply(removed(1, 3, [100]), 0);
      idx.apply(stored(1, 4, null, [[100, 1]]), 0);
      idx.apply(removed(1, 5, [100]), 0);
      expect(dev(idx, locals(1, 2), 1)).toBe(0);
    });

    it('a block no worker holds loses its children (they stay held but unreachable)', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2], [102, 3]]), 0);
      idx.apply(removed(1, 2, [101]), 0);
      expect(dev(idx, locals(1, 2, 3), 1)).toBe(1);
      // Re-storing block 1 creates a fresh node: block 2 was cut and is not re-attached.
      idx.apply(stored(1, 3, 100, [[101, 2]]), 0);
      expect(dev(idx, locals(1, 2, 3), 1)).toBe(2);
      expect(of(idx.match(locals(1)), 1).treeSize).toBe(3);
      // The cut block is still known: removing it is not an unknown removal.
      const r = idx.apply(removed(1, 4, [102]), 0);
      expect(r.unknownRemovals.length).toBe(0);
      expect(idx.stats().nodes).toBe(2);
    });

    it('keeps children while another worker still holds the block', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]]), 0);
      idx.apply(stored(2, 1, null, [[200, 1]]), 0);
      idx.apply(removed(1, 2, [100]), 0);
      idx.apply(stored(1, 3, null, [[100, 1]]), 0);
      // Node for local 1 survived (worker 2), so worker 1's block 2 is reachable again.
      expect(dev(idx, locals(1, 2), 1)).toBe(2);
    });

    it('reports unknown hashes and still applies the rest', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]]), 0);
      const r = idx.apply(removed(1, 2, [555, 101, 0xffff_ffff_ffff_fff0n]), 0);
      expect([...r.unknownRemovals]).toEqual([555n, 0xffff_ffff_ffff_fff0n]);
      expect(r.blockOps).toBe(3);
      expect(r.suspect).toBeNull(); // an unknown removal under-states at worst: not suspect
      expect(dev(idx, locals(1, 2), 1)).toBe(1);
      const c = idx.stats().counters;
      expect(c.unknownRemovals).toBe(2);
      expect(c.blocksRemoved).toBe(1);
    });
  });

  describe('cleared, dp ranks and worker removal', () => {
    it('cleared drops only the emitting dp rank', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]], { dp: 0 }), 0);
      idx.apply(stored(1, 1, null, [[100, 1]], { dp: 1 }), 0);
      idx.apply(cleared(1, 2, { dp: 0 }), 0);
      const r = idx.match(locals(1));
      expect(of(r, 1, 0).deviceBlocks).toBe(0);
      expect(of(r, 1, 0).treeSize).toBe(0);
      expect(of(r, 1, 1).deviceBlocks).toBe(1);
    });

    it('removeDpRank and removeWorker forget publishers and free their nodes', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]], { dp: 0 }), 0);
      idx.apply(stored(1, 1, null, [[100, 1]], { dp: 3 }), 0);
      idx.apply(stored(2, 1, null, [[200, 1], [201, 9]]), 0);
      expect(idx.removeDpRank(W(1), 3)).toBe(1);
      expect(idx.match(locals(1)).workers.length).toBe(2);
      expect(idx.removeWorker(W(1))).toBe(2);
      expect(idx.match(locals(1)).workers.map((w) => w.workerId)).toEqual([2n]);
      idx.removeWorker(W(2));
      expect(idx.stats().nodes).toBe(0);
      expect(idx.totalBlocks).toBe(0);
      expect(idx.match(locals(1)).workers).toEqual([]);
    });
  });

  describe('event ids', () => {
    it('ignores and counts duplicate and older ids', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      idx.apply(removed(1, 2, [100]), 0);
      const dup = idx.apply(stored(1, 2, null, [[100, 1]]), 0);
      const old = idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      expect(dup.status).toBe('duplicate');
      expect(old.status).toBe('duplicate');
      expect(dev(idx, locals(1), 1)).toBe(0);
      expect(idx.stats().counters.duplicates).toBe(2);
      expect(idx.stats().counters.eventsApplied).toBe(2);
    });

    it('marks a gap suspect with reason and time, still applies the event, and cleared repairs it', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      const r = idx.apply(stored(1, 5, 100, [[101, 2]]), 1234);
      expect(r.missedEvents).toBe(3n);
      expect(r.suspect).toEqual({ reason: 'event_gap', sinceMs: 1234, incidents: 1 });
      const m = of(idx.match(locals(1, 2)), 1);
      expect(m.deviceBlocks).toBe(2);
      expect(m.suspect?.reason).toBe('event_gap');
      expect(m.lastEventId).toBe(5n);
      expect(m.lastEventMs).toBe(1234);
      // A second incident keeps the first reason and time.
      idx.apply(stored(1, 6, 999, [[102, 3]]), 2000);
      expect(idx.suspectOf(W(1), 0)).toEqual({ reason: 'event_gap', sinceMs: 1234, incidents: 2 });
      const c = idx.stats().counters;
      expect([c.gaps, c.missedEvents, c.unknownParents]).toEqual([1, 3n, 1]);
      idx.apply(cleared(1, 9), 3000);
      expect(idx.suspectOf(W(1), 0)).toBeNull();
      expect(dev(idx, locals(1), 1)).toBe(0);
    });

    it('gap state is per (worker, dp rank)', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]], { dp: 0 }), 0);
      idx.apply(stored(1, 1, null, [[100, 1]], { dp: 1 }), 0);
      idx.apply(stored(1, 3, null, [[101, 2]], { dp: 1 }), 0);
      expect(idx.suspectOf(W(1), 0)).toBeNull();
      expect(idx.suspectOf(W(1), 1)?.reason).toBe('event_gap');
    });

    it('flags a first id above 1 as missed_start; 0 and 1 are clean starts', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 0, null, [[100, 1]]), 0);
      idx.apply(stored(2, 1, null, [[100, 1]]), 0);
      idx.apply(stored(3, 7, null, [[100, 1]]), 42);
      expect(idx.suspectOf(W(1), 0)).toBeNull();
      expect(idx.suspectOf(W(2), 0)).toBeNull();
      expect(idx.suspectOf(W(3), 0)).toEqual({ reason: 'missed_start', sinceMs: 42, incidents: 1 });
    });

    it('resync clears state and suspicion and sets the expected next id', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      idx.apply(stored(1, 3, 100, [[101, 2]]), 0);
      idx.resync(W(1), 0, 50, 10n);
      expect(idx.suspectOf(W(1), 0)).toBeNull();
      expect(dev(idx, locals(1), 1)).toBe(0);
      expect(idx.apply(stored(1, 10, null, [[100, 1]]), 0).status).toBe('duplicate');
      expect(idx.apply(stored(1, 11, null, [[100, 1]]), 0).suspect).toBeNull();
      // Without an id, the next event sets the baseline, whatever it is.
      idx.resync(W(1), 0, 60);
      expect(idx.apply(stored(1, 500, null, [[100, 1]]), 0).suspect).toBeNull();
      expect(dev(idx, locals(1), 1)).toBe(1);
    });

    it('removeWorker repairs: a returning worker starts fresh', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      idx.apply(stored(1, 4, null, [[100, 1]]), 0);
      idx.removeWorker(W(1));
      expect(idx.suspectOf(W(1), 0)).toBeNull();
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      expect(idx.suspectOf(W(1), 0)).toBeNull();
    });
  });

  describe('unknown parent', () => {
    it('keeps the blocks as a detached chain: never matched, removable, extendable', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      // Parent 150 was lost; the chain below it must not be matched from the root, even though
      // a root node with local 1 exists.
      const r = idx.apply(stored(1, 2, 150, [[151, 1], [152, 2]]), 7);
      expect(r.unknownParent).toBe(true);
      expect(r.blockOps).toBe(2);
      expect(dev(idx, locals(1, 2), 1)).toBe(1);
      expect(of(idx.match(locals(1)), 1).treeSize).toBe(3);
      // A store under the detached chain is accepted silently (parent known) and stays unreachable.
      const r2 = idx.apply(stored(1, 3, 152, [[153, 3]]), 8);
      expect(r2.unknownParent).toBe(false);
      expect(idx.stats().counters.unknownParents).toBe(1);
      expect(dev(idx, locals(1, 1, 2, 3), 1)).toBe(1);
      // Its blocks are known to removals.
      expect(idx.apply(removed(1, 4, [151, 152, 153]), 9).unknownRemovals.length).toBe(0);
      expect(idx.stats().nodes).toBe(1);
    });
  });

  describe('self-referencing stored events (a block id named twice, the parent counted)', () => {
    // Everything but the event-id position (which the refused event takes).
    const snapshotOf = (idx: PrefixIndex) => {
      const st = idx.stats();
      return { ...st, arrayBytes: 0, publishers: st.publishers.map((p) => ({ ...p, lastEventId: null })) };
    };

    for (const [name, parent, blocks] of [
      ['a block id repeated within the event', 100, [[101, 2], [102, 3], [101, 4]]],
      ['a block id equal to its parent', 100, [[101, 2], [100, 3]]],
      ['a block id repeated in an event from the root', null, [[200, 1], [200, 2]]],
    ] as const) {
      it(`${name}: refused whole, index unchanged, id taken, not suspect`, () => {
        const idx = new PrefixIndex(16);
        idx.apply(stored(1, 1, null, [[100, 1]]), 0);
        idx.apply(stored(2, 1, null, [[100, 1], [300, 2]]), 0);
        const before = snapshotOf(idx);
        const q = locals(1, 2, 3, 4);
        const matchBefore = idx.match(q).workers.map((w) => [w.workerId, w.deviceBlocks]);
        const r = idx.apply(stored(1, 2, parent, blocks), 5);
        expect(r).toMatchObject({ status: 'rejected', rejection: 'self_referencing', blockOps: 0, missedEvents: 0n, unknownParent: false, suspect: null });
        expect(snapshotOf(idx)).toEqual(before);
        expect(idx.match(q).workers.map((w) => [w.workerId, w.deviceBlocks])).toEqual(matchBefore);
        expect(idx.lastEventIdOf(W(1), 0)).toBe(2n);
        // The id was taken: the next one is no gap, the same one is a duplicate.
        expect(idx.apply(stored(1, 2, 100, [[101, 2]]), 6).status).toBe('duplicate');
        expect(idx.apply(stored(1, 3, 100, [[101, 2]]), 7)).toMatchObject({ status: 'applied', rejection: null, missedEvents: 0n, suspect: null });
        expect(dev(idx, locals(1, 2), 1)).toBe(2);
      });
    }

    it('a block id equal to an ancestor further up is not self-referencing (Dynamo checks the parent only)', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]]), 0);
      expect(idx.apply(stored(1, 2, 101, [[100, 3]]), 0)).toMatchObject({ status: 'applied', rejection: null });
    });

    it('ids equal in their low or high 32 bits only are distinct, short and long events alike', () => {
      for (const n of [3, 40]) {
        const idx = new PrefixIndex(16);
        const lo = (1n << 32n) + 7n;
        const hi = (7n << 32n) + 1n;
        const blocks: Array<[bigint, number]> = [[lo, 1], [hi, 2], [7n, 3]];
        for (let i = 3; i < n; i++) blocks.push([(1n << 63n) + BigInt(i), 10 + i]);
        const r = idx.apply(stored(1, 1, (1n << 33n) + 7n, blocks), 0);
        expect(r.status, `${n} blocks`).not.toBe('rejected');
        // The same event with its last id repeated at the front is refused.
        const dup = blocks.map((b) => [...b] as [bigint, number]);
        dup[0]![0] = blocks[n - 1]![0];
        expect(idx.apply(stored(1, 2, (1n << 33n) + 7n, dup), 0).rejection, `${n} blocks, repeated`).toBe('self_referencing');
        // And one whose last id is its parent.
        const withParent = blocks.map((b) => [...b] as [bigint, number]);
        withParent[n - 1]![0] = (1n << 33n) + 7n;
        expect(idx.apply(stored(1, 3, (1n << 33n) + 7n, withParent), 0).rejection, `${n} blocks, parent`).toBe('self_referencing');
      }
    });

    it('a gap revealed by a refused event still marks the publisher suspect', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]]), 0);
      const r = idx.apply(stored(1, 4, 100, [[101, 2], [101, 3]]), 9);
      expect(r).toMatchObject({ status: 'rejected', missedEvents: 2n, suspect: { reason: 'event_gap', sinceMs: 9 } });
    });

    it('recover skips a self-referencing dump event and counts it', () => {
      const idx = new PrefixIndex(16);
      const r = idx.recover(W(1), 0, [stored(1, 1, null, [[100, 1], [101, 2]]), stored(1, 2, 101, [[102, 3], [101, 4]])], 7n, 0);
      expect(r).toMatchObject({ blocks: 2, rejected: 1, unknownParents: 0, suspect: null });
      expect(dev(idx, locals(1, 2, 3), 1)).toBe(2);
    });
  });

  describe('storage tiers', () => {
    it('counts tiers cumulatively, never adding them', () => {
      const idx = new PrefixIndex(10);
      idx.apply(stored(1, 1, null, [[100, 1]], { tier: 'device' }), 0);
      idx.apply(stored(1, 2, 100, [[101, 2]], { tier: 'host_pinned' }), 0);
      idx.apply(stored(1, 3, 101, [[102, 3]], { tier: 'disk' }), 0);
      idx.apply(stored(1, 4, 102, [[103, 4]], { tier: 'external' }), 0);
      idx.apply(stored(1, 5, 103, [[104, 5]], { tier: 'device' }), 0);
      const m = of(idx.match(locals(1, 2, 3, 4, 5, 6)), 1);
      expect([m.deviceBlocks, m.hostBlocks, m.diskBlocks, m.anyBlocks]).toEqual([1, 2, 3, 5]);
      expect([m.deviceTokens, m.hostTokens, m.diskTokens, m.anyTokens]).toEqual([10, 20, 30, 50]);
    });

    it('a block on two tiers counts once; removing one tier keeps the other', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1], [101, 2]], { tier: 'device' }), 0);
      idx.apply(stored(1, 2, null, [[100, 1], [101, 2]], { tier: 'host_pinned' }), 0);
      let m = of(idx.match(locals(1, 2)), 1);
      expect([m.deviceBlocks, m.hostBlocks, m.anyBlocks, m.treeSize]).toEqual([2, 2, 2, 2]);
      idx.apply(removed(1, 3, [101], { tier: 'device' }), 0);
      m = of(idx.match(locals(1, 2)), 1);
      expect([m.deviceBlocks, m.hostBlocks, m.anyBlocks, m.treeSize]).toEqual([1, 2, 2, 2]);
      // Removing from a tier that does not hold the block is an unknown removal.
      expect(idx.apply(removed(1, 4, [101], { tier: 'disk' }), 0).unknownRemovals.length).toBe(1);
      const s = idx.stats().publishers[0]!;
      expect(s.blocksByTier).toEqual({ device: 1, host_pinned: 2, disk: 0, external: 0 });
      expect(s.blocks).toBe(2);
    });

    it('a lower-tier block may hang from a device parent', () => {
      const idx = new PrefixIndex(16);
      idx.apply(stored(1, 1, null, [[100, 1]], { tier: 'device' }), 0);
      idx.apply(stored(1, 2, 100, [[101, 2]], { tier: 'disk' }), 0);
      const m = of(idx.match(locals(1, 2)), 1);
      expect([m.deviceBlocks, m.hostBlocks, m.diskBlocks]).toEqual([1, 1, 2]);
    });
  });

  describe('scale of the publisher set', () => {
    it('handles more publishers than one bitset word, and reuses freed slots', () => {
      const idx = new PrefixIndex(16);
      for (let w = 0; w < 100; w++) {
        // Worker w holds the first (w % 7) + 1 blocks of a shared chain.
        const blocks: Array<[number, number]> = [];
        for (let i = 0; i <= w % 7; i++) blocks.push([1000 * w + i, i + 1]);
        idx.apply(stored(w, 1, null, blocks, { dp: w % 3 }), 0);
      }
      const r = idx.match(locals(1, 2, 3, 4, 5, 6, 7, 8));
      expect(r.workers.length).toBe(100);
      for (let w = 0; w < 100; w++) expect(of(r, w, w % 3).deviceBlocks).toBe((w % 7) + 1);
      for (let w = 0; w < 100; w += 2) idx.removeWorker(W(w));
      idx.apply(stored(5000, 1, null, [[1, 1], [2, 2]]), 0);
      const r2 = idx.match(locals(1, 2, 3));
      expect(r2.workers.length).toBe(51);
      expect(of(r2, 5000).deviceBlocks).toBe(2);
      expect(of(r2, 99, 0).deviceBlocks).toBe(Math.min(3, (99 % 7) + 1));
    });
  });

  describe('bitset widths', () => {
    it.each([5, 40, 100])('matches %i publishers exactly, including holes in their prefixes', (pubs) => {
      const idx = new PrefixIndex(16);
      const expected = new Map<number, number>();
      for (let w = 0; w < pubs; w++) {
        // Publisher w stores a 12-block chain, then evicts block (w % 13) (13 = none): it then holds
        // exactly the leading min(w % 13, 12) blocks; every publisher shares the same path.
        const blocks: Array<[number, number]> = [];
        for (let i = 0; i < 12; i++) blocks.push([100 * w + i + 1, i + 1]);
        idx.apply(stored(w, 1, null, blocks), 0);
        const hole = w % 13;
        if (hole < 12) idx.apply(removed(w, 2, [100 * w + hole + 1]), 0);
        expected.set(w, Math.min(hole, 12));
      }
      const r = idx.match(locals(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13));
      expect(r.workers.length).toBe(pubs);
      for (let w = 0; w < pubs; w++) {
        const m = of(r, w);
        expect(m.deviceBlocks, `publisher ${w}`).toBe(expected.get(w));
        expect(m.anyBlocks).toBe(expected.get(w));
      }
      // The same after a host-tier block enters (the four-tier walk).
      idx.apply(stored(pubs, 1, null, [[1, 1]], { tier: 'host_pinned' }), 0);
      const r2 = idx.match(locals(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13));
      for (let w = 0; w < pubs; w++) expect(of(r2, w).deviceBlocks, `publisher ${w}`).toBe(expected.get(w));
      expect(of(r2, pubs).hostBlocks).toBe(1);
    });
  });

  describe('wide nodes', () => {
    it('tells apart children of a wide node whose local hashes share their low 32 bits', () => {
      const idx = new PrefixIndex(16);
      const twin = (1n << 32n) | 100n; // the same low half as local 100
      let id = 1;
      for (let i = 0; i < 12; i++) idx.apply(stored(1, id++, null, [[1000 + i, 100 + i]]), 0);
      idx.apply(stored(2, 1, null, [[5000, twin]]), 0);
      expect(dev(idx, locals(100), 1)).toBe(1);
      expect(dev(idx, locals(twin), 2)).toBe(1);
      expect(dev(idx, locals(twin), 1)).toBe(0);
      // The first child with that low half leaves: the other is still found, and back again.
      idx.apply(removed(1, id++, [1000]), 0);
      expect(dev(idx, locals(twin), 2)).toBe(1);
      expect(dev(idx, locals(100), 1)).toBe(0);
      idx.apply(stored(1, id++, null, [[1000, 100]]), 0);
      idx.apply(removed(2, 2, [5000]), 0);
      expect(dev(idx, locals(100), 1)).toBe(1);
      expect(dev(idx, locals(twin), 2)).toBe(0);
      idx.apply(stored(2, 3, null, [[5001, twin]]), 0);
      expect(dev(idx, locals(twin), 2)).toBe(1);
      expect(dev(idx, locals(100), 1)).toBe(1);
    });

    it('finds children of nodes past the scan fan-out, through cuts, removals and re-stores', () => {
      const idx = new PrefixIndex(16);
      // 300 children under the root and 300 under block (1): both switch to hashed lookup.
      for (let i = 0; i < 300; i++) {
        idx.apply(stored(1, 2 * i + 1, null, [[10_000 + i, 1000 + i]]), 0);
        idx.apply(stored(2, 2 * i + 1, null, [[1, 1]]), 0);
        idx.apply(stored(1, 2 * i + 2, null, [[1, 1], [20_000 + i, 5000 + i]]), 0);
        idx.apply(stored(2, 2 * i + 2, 1, [[30_000 + i, 5000 + i]]), 0);
      }
      for (let i = 0; i < 300; i += 7) {
        expect(dev(idx, locals(1000 + i), 1)).toBe(1);
        expect(dev(idx, locals(1, 5000 + i), 1)).toBe(2);
        expect(dev(idx, locals(1, 5000 + i), 2)).toBe(2);
      }
      // Remove every other child, then look the rest up again.
      let id = 10_000n;
      for (let i = 0; i < 300; i += 2) {
        idx.apply(removed(1, id++, [10_000 + i]), 0);
        idx.apply(removed(2, id++, [30_000 + i]), 0);
      }
      for (let i = 0; i < 300; i++) {
        expect(dev(idx, locals(1000 + i), 1)).toBe(i % 2 === 0 ? 0 : 1);
        expect(dev(idx, locals(1, 5000 + i), 2)).toBe(i % 2 === 0 ? 1 : 2);
        expect(dev(idx, locals(1, 5000 + i), 1)).toBe(2);
      }
      // Snapshot round trip keeps hashed children findable.
      const back = PrefixIndex.restore(idx.snapshot());
      for (let i = 0; i < 300; i += 3) expect(dev(back, locals(1, 5000 + i), 1)).toBe(2);
      // Cut the wide node (1): every holder leaves it.
      back.apply(removed(1, 1_000_000, [1]), 0);
      back.apply(removed(2, 1_000_000, [1]), 0);
      expect(dev(back, locals(1, 5001), 1)).toBe(0);
      back.apply(stored(1, 1_000_001, null, [[1, 1], [777, 5001]]), 0);
      expect(dev(back, locals(1, 5001), 1)).toBe(2);
      expect(dev(back, locals(1, 5003), 1)).toBe(1);
    });
  });
});
