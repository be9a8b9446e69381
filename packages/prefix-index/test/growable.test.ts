import { describe, expect, it } from 'vitest';
import { PrefixIndex } from '@vantage/prefix-index';
import { growableTable, growTable } from '../src/growable';
import { locals, removed, stored } from './events';

describe('growable tables', () => {
  it('grow in place within their reservation: same memory, contents kept, the rest zero', () => {
    const a = growableTable(4, 64);
    a.set([1, 2, 3, -4]);
    const b = growTable(a, 16, 64);
    expect(b.buffer).toBe(a.buffer);
    expect(b.length).toBe(16);
    expect(Array.from(b)).toEqual([1, 2, 3, -4, ...new Array<number>(12).fill(0)]);
    b[15] = 7;
    expect(growTable(b, 64, 64)[15]).toBe(7);
  });

  it('are copied into a larger reservation once they outgrow theirs', () => {
    const a = growableTable(4, 4);
    a.set([9, 8, 7, 6]);
    const b = growTable(a, 8, 32);
    expect(b.buffer).not.toBe(a.buffer);
    expect(Array.from(b)).toEqual([9, 8, 7, 6, 0, 0, 0, 0]);
    expect(growTable(b, 32, 32).buffer).toBe(b.buffer);
  });

  it('clamp a reservation to what V8 allows (4 GiB) instead of failing', () => {
    const a = growableTable(8, 2 ** 40);
    expect(a.length).toBe(8);
    expect((a.buffer as SharedArrayBuffer & { maxByteLength: number }).maxByteLength).toBe(2 ** 32);
  });

  it('grow a view of part of a table by copying it: what lies past the view is not kept', () => {
    const a = growableTable(4, 64);
    a.set([1, 2, 3, 4]);
    for (const part of [a.subarray(0, 2), a.subarray(1, 3)]) {
      const b = growTable(part, 8, 64);
      expect(b.buffer).not.toBe(a.buffer);
      expect(Array.from(b)).toEqual([...Array.from(part), 0, 0, 0, 0, 0, 0]);
    }
    expect(Array.from(a)).toEqual([1, 2, 3, 4]);
  });

  it('grow an ordinary Int32Array by copying it', () => {
    const a = Int32Array.from([5, 6]);
    const b = growTable(a, 4, 4);
    expect(Array.from(b)).toEqual([5, 6, 0, 0]);
    expect(b.buffer).toBeInstanceOf(SharedArrayBuffer);
  });
});

describe('block table growth in a PrefixIndex', () => {
  const CHAIN = 16;
  const blocksOf = (k: number): Array<[number, number]> =>
    Array.from({ length: CHAIN }, (_, i): [number, number] => [k * CHAIN + i + 1, k * CHAIN + i + 1]);
  /** Chain k: 16 new nodes under the root, stored by one of `workers` publishers from `firstWorker`; every 5th on host_pinned, every 10th loses its last 4 blocks. */
  function load(idx: PrefixIndex, ids: Map<number, number>, from: number, to: number, firstWorker: number, workers: number): void {
    for (let k = from; k < to; k++) {
      const w = firstWorker + (k % workers);
      const next = (): number => {
        const id = (ids.get(w) ?? 0) + 1;
        ids.set(w, id);
        return id;
      };
      const blocks = blocksOf(k);
      idx.apply(stored(w, next(), null, blocks, { tier: k % 5 === 0 ? 'host_pinned' : 'device' }), 0);
      if (k % 10 === 0) idx.apply(removed(w, next(), blocks.slice(CHAIN - 4).map((b) => b[0]), { tier: 'host_pinned' }), 0);
    }
  }
  const held = (k: number): number => (k % 10 === 0 ? CHAIN - 4 : CHAIN);

  it('grows its block tables past their reservation and widens past 32 publishers, answering as it was filled', () => {
    // From 1,024 positions: copied once into a reservation of 16,384, grown in place to it, copied
    // into larger ones, with the match scratch widened past 32 publishers (40) on the way.
    const grown = new PrefixIndex(16);
    const before = grown.stats().arrayBytes;
    const ids = new Map<number, number>();
    load(grown, ids, 0, 2500, 0, 4);
    expect(grown.stats().nodes).toBeGreaterThan(1 << 15);
    load(grown, ids, 2500, 4800, 4, 36);
    expect(grown.stats().nodes).toBeGreaterThan(1 << 16);
    expect(grown.stats().publishers.length).toBe(40);
    expect(grown.stats().arrayBytes).toBeGreaterThan(before);
    const restored = PrefixIndex.restore(grown.snapshot());
    for (let k = 0; k < 4800; k += 97) {
      const q = locals(...blocksOf(k).map((b) => b[1]));
      const m = grown.match(q);
      expect(restored.match(q)).toEqual(m);
      const owner = m.workers.find((x) => x.workerId === BigInt(k < 2500 ? k % 4 : 4 + (k % 36)))!;
      expect(owner.anyBlocks, `chain ${k}`).toBe(held(k));
      expect(owner.deviceBlocks, `chain ${k}`).toBe(k % 5 === 0 ? 0 : held(k));
    }
    // The restored index grows from its own tables and keeps answering as the original.
    const ids2 = new Map(ids);
    load(grown, ids, 4800, 9000, 4, 36);
    load(restored, ids2, 4800, 9000, 4, 36);
    expect(restored.stats().nodes).toBeGreaterThan(1 << 17);
    expect({ ...restored.stats(), arrayBytes: 0 }).toEqual({ ...grown.stats(), arrayBytes: 0 });
    for (let k = 0; k < 9000; k += 211) {
      const q = locals(...blocksOf(k).map((b) => b[1]));
      expect(restored.match(q)).toEqual(grown.match(q));
    }
  });
});
