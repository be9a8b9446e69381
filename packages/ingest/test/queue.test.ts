import { describe, expect, it } from 'vitest';
import { WriterQueue } from '../src/queue';

describe('WriterQueue', () => {
  it('applies in order, bounded, in batches, and survives a throwing apply', async () => {
    const seen: number[] = [];
    const errors: number[] = [];
    const q = new WriterQueue<number>(
      4,
      2,
      (n) => {
        if (n === 3) throw new Error('boom');
        seen.push(n);
      },
      (_e, n) => errors.push(n),
    );
    expect([1, 2, 3, 4].map((n) => q.push(n))).toEqual([true, true, true, true]);
    expect(q.push(5)).toBe(false); // full: refused, caller counts the drop
    expect(q.depth).toBe(4);
    await q.idle();
    expect(seen).toEqual([1, 2, 4]);
    expect(errors).toEqual([3]);
    expect(q.highWater).toBe(4);
    expect(q.push(6)).toBe(true);
    await q.idle();
    expect(seen).toEqual([1, 2, 4, 6]);
    q.stop();
    expect(q.push(7)).toBe(false);
  });
});
