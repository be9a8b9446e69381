import { describe, expect, it } from 'vitest';
import { growableTable, growTable } from '../src/growable';

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

  it('grow an ordinary Int32Array by copying it', () => {
    const a = Int32Array.from([5, 6]);
    const b = growTable(a, 4, 4);
    expect(Array.from(b)).toEqual([5, 6, 0, 0]);
    expect(b.buffer).toBeInstanceOf(SharedArrayBuffer);
  });
});
