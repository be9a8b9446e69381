/**
 * The index's compaction (an allocation stays whole while any of its blocks lives, so a workload
 * can strand room) and the field list a compaction swaps, checked against the reference model.
 */
import { describe, expect, it } from 'vitest';
import { PrefixIndex } from '@vantage/prefix-index';
import type { KvEvent } from '@vantage/types';
import { KEPT_FIELDS, TREE_FIELDS } from '../src/prefix-index';
import { locals, removed, stored } from './events';
import { ReferenceIndex } from './reference-model';
import { normApply, normImpl } from './streams';

describe('PrefixIndex compaction', () => {
  it('every field is either part of the tree (swapped by a compaction) or kept, and none is both', () => {
    const x = new PrefixIndex(16);
    x.apply(stored(1, 1, null, [[1, 1]]), 0);
    const keys = Object.keys(x).sort();
    const listed = [...TREE_FIELDS, ...KEPT_FIELDS].sort();
    expect(keys).toEqual(listed);
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('bounds the room stranded by chains whose heads outlive their tails, answering as before', () => {
    const CHAINS = 3000;
    const LEN = 64;
    const run = new PrefixIndex(16);
    const ref = new ReferenceIndex();
    const both = (e: KvEvent): void => {
      expect(normApply(run.apply(e, 0))).toEqual(ref.apply(e, 0));
    };
    let id = 1;
    let maxPositions = 0;
    const queries: BigUint64Array[] = [];
    for (let c = 0; c < CHAINS; c++) {
      // One stored event of LEN blocks (one allocation of LEN positions), then its tail evicted:
      // the head keeps the whole allocation alive.
      const ext = (k: number): number => c * LEN + k + 1;
      const loc = (k: number): number => (c % 50) * 1000 + c * LEN + k + 1;
      both(stored(1, id++, null, Array.from({ length: LEN }, (_, k) => [ext(k), loc(k)] as const)));
      both(removed(1, id++, Array.from({ length: LEN - 1 }, (_, k) => ext(k + 1))));
      maxPositions = Math.max(maxPositions, run.room.positions);
      if (c % 300 === 0) queries.push(locals(...Array.from({ length: 3 }, (_, k) => loc(k))));
    }
    const room = run.room;
    expect(room.inTree).toBe(CHAINS);
    expect(room.compactions).toBeGreaterThan(0);
    // Without compaction the room would be CHAINS * LEN = 192,000 positions.
    expect(maxPositions).toBeLessThan(2 * (4 * CHAINS + (1 << 16)));
    expect(run.totalBlocks).toBe(CHAINS);
    for (const q of queries) expect(normImpl(run.match(q))).toEqual(ref.match([...q]));
    // Later events on the compacted tree: the heads' chains grow again.
    both(stored(1, id++, 1, [[900_001, 77]]));
    const q = locals(1, 77);
    expect(run.match(q).workers[0]!.deviceBlocks).toBe(2);
    expect(normImpl(run.match(q))).toEqual(ref.match([...q]));
  });
});
