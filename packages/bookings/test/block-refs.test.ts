import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockRefs, HolderTable, halves } from '../src/block-refs';

/**
 * Apply (key, add|drop) operations to the table and to a Map reference; they must agree throughout.
 * `tidy` 0 settles the table after the operation (shrinking it when mostly empty), 1 reserves room
 * for as many more keys as the key's low bits say (growing it), anything else neither.
 */
function differential(ops: readonly { key: bigint; add: boolean; tidy?: number }[]): BlockRefs {
  const t = new BlockRefs();
  const ref = new Map<bigint, number>();
  const buf = new BigUint64Array(1);
  const hv = halves(buf);
  for (const { key, add, tidy } of ops) {
    buf[0] = key;
    const n = ref.get(key) ?? 0;
    if (tidy === 1) t.reserve(Number(key & 1023n));
    if (add) {
      t.add(hv[0]!, hv[1]!);
      ref.set(key, n + 1);
    } else {
      expect(t.drop(hv[0]!, hv[1]!) >= 0).toBe(n > 0);
      if (n > 1) ref.set(key, n - 1);
      else ref.delete(key);
    }
    if (tidy === 0) t.settle();
    expect(t.size).toBe(ref.size);
    expect(t.size * 2).toBeLessThanOrEqual(t.capacity);
  }
  for (const [k, n] of ref) {
    buf[0] = k;
    expect(t.count(hv[0]!, hv[1]!)).toBe(n);
  }
  return t;
}

describe('BlockRefs (u64 → reference count, open addressing)', () => {
  it('agrees with a Map under random adds and releases, with growth, shrinking and probe-run deletions', () => {
    // A small key space forces repeats, releases of held keys and long probe runs.
    const key = fc.oneof(fc.bigUintN(64), fc.integer({ min: 0, max: 300 }).map(BigInt), fc.integer({ min: 0, max: 40 }).map((i) => BigInt(i) << 32n));
    fc.assert(
      fc.property(fc.array(fc.record({ key, add: fc.boolean(), tidy: fc.integer({ min: 0, max: 12 }) }), { maxLength: 3000 }), (ops) => void differential(ops)),
      { seed: 1234, numRuns: 150 },
    );
  });
  it('grows to thousands of keys and, settled once emptied, shrinks back to its smallest table', () => {
    const keys = Array.from({ length: 5000 }, (_, i) => BigInt(i) * 0x9e37_79b9_7f4a_7c15n & 0xffff_ffff_ffff_ffffn);
    const t = differential([...keys.map((k) => ({ key: k, add: true })), ...keys.map((k) => ({ key: k, add: false }))]);
    expect(t.capacity).toBeGreaterThanOrEqual(8192);
    t.settle();
    expect(t.capacity).toBe(16);
  });
  it('reserve makes room for a whole booking in one resize', () => {
    const t = new BlockRefs();
    t.reserve(512);
    const cap = t.capacity;
    expect(cap).toBe(1024);
    const hv = halves(BigUint64Array.from({ length: 512 }, (_, i) => BigInt(i + 1) * 0x9e37_79b9_7f4a_7c15n & 0xffff_ffff_ffff_ffffn));
    for (let i = 0; i < hv.length; i += 2) t.add(hv[i]!, hv[i + 1]!);
    expect(t.capacity).toBe(cap);
  });
});

describe('HolderTable (u64 → holder count and the named holders)', () => {
  it('agrees with a reference of per-key holder sets under any add/drop sequence, through growth and shrinking', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ key: fc.bigInt({ min: 0n, max: 300n }), bit: fc.integer({ min: -1, max: 63 }), add: fc.boolean(), tidy: fc.integer({ min: 0, max: 12 }) }), { maxLength: 3000 }),
        (ops) => {
          const t = new HolderTable();
          // Per key: the named holders (bits) and the unnamed ones (a count), as the ledger adds and drops them.
          const ref = new Map<bigint, { bits: Set<number>; unnamed: number }>();
          const buf = new BigUint64Array(1);
          const hv = halves(buf);
          for (const { key, bit, add, tidy } of ops) {
            buf[0] = key * 0x9e37_79b9_7f4a_7c15n;
            if (tidy === 1) t.reserve(Number(key));
            const e = ref.get(key) ?? { bits: new Set<number>(), unnamed: 0 };
            const holds = bit >= 0 ? e.bits.has(bit) : e.unnamed > 0;
            if (add && !holds) {
              t.add(hv[0]!, hv[1]!, bit);
              if (bit >= 0) e.bits.add(bit);
              else e.unnamed++;
              ref.set(key, e);
            } else if (!add && holds) {
              if (bit >= 0) e.bits.delete(bit);
              else e.unnamed--;
              expect(t.drop(hv[0]!, hv[1]!, bit)).toBe(e.bits.size + e.unnamed);
              if (e.bits.size + e.unnamed === 0) ref.delete(key);
            } else if (!add && !ref.has(key)) expect(t.drop(hv[0]!, hv[1]!, bit)).toBe(-1);
            if (tidy === 0) t.settle();
          }
          expect(t.size).toBe(ref.size);
          for (const [key, e] of ref) {
            buf[0] = key * 0x9e37_79b9_7f4a_7c15n;
            const b = t.find(hv[0]!, hv[1]!);
            expect(t.countAt(b)).toBe(e.bits.size + e.unnamed);
            let m0 = 0;
            let m1 = 0;
            for (const x of e.bits) if (x < 32) m0 |= 1 << x;
            else m1 |= 1 << (x - 32);
            expect([t.mask0At(b), t.mask1At(b)]).toEqual([m0, m1]);
          }
        },
      ),
      { seed: 0x401d, numRuns: 200 },
    );
  });
});
