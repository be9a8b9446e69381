import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockRefs, halves } from '../src/block-refs';

/** Apply (key, add|release) operations to the table and to a Map reference; they must agree throughout. */
function differential(ops: readonly { key: bigint; add: boolean }[]): void {
  const t = new BlockRefs();
  const ref = new Map<bigint, number>();
  const buf = new BigUint64Array(1);
  const hv = halves(buf);
  for (const { key, add } of ops) {
    buf[0] = key;
    const n = ref.get(key) ?? 0;
    if (add) {
      t.add(hv[0]!, hv[1]!);
      ref.set(key, n + 1);
    } else {
      expect(t.release(hv[0]!, hv[1]!)).toBe(n > 0);
      if (n > 1) ref.set(key, n - 1);
      else ref.delete(key);
    }
    expect(t.size).toBe(ref.size);
  }
  for (const [k, n] of ref) {
    buf[0] = k;
    expect(t.count(hv[0]!, hv[1]!)).toBe(n);
  }
}

describe('BlockRefs (u64 → reference count, open addressing)', () => {
  it('agrees with a Map under random adds and releases, with growth, shrinking and probe-run deletions', () => {
    // A small key space forces repeats, releases of held keys and long probe runs.
    const key = fc.oneof(fc.bigUintN(64), fc.integer({ min: 0, max: 300 }).map(BigInt), fc.integer({ min: 0, max: 40 }).map((i) => BigInt(i) << 32n));
    fc.assert(
      fc.property(fc.array(fc.record({ key, add: fc.boolean() }), { maxLength: 3000 }), (ops) => differential(ops)),
      { seed: 1234, numRuns: 150 },
    );
  });
  it('grows to thousands of keys and shrinks back to empty', () => {
    const keys = Array.from({ length: 5000 }, (_, i) => BigInt(i) * 0x9e37_79b9_7f4a_7c15n & 0xffff_ffff_ffff_ffffn);
    differential([...keys.map((k) => ({ key: k, add: true })), ...keys.map((k) => ({ key: k, add: false }))]);
  });
});
