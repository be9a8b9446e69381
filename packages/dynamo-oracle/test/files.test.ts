import { describe, expect, it } from 'vitest';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { decodeAnswers, encodeEvents, encodeQueries } from '../src/index';

// The files exchanged with the Dynamo oracle (rust/src/main.rs reads and
// writes the same layouts): every id and hash must cross as the exact u64, top bit included.
const W = 0xfedc_ba98_7654_3210n as WorkerId;
const H = (x: bigint): BigUint64Array => BigUint64Array.of(x);

describe('Dynamo oracle files', () => {
  it('encodes events field by field, 64-bit values exact', () => {
    const events: KvEvent[] = [
      {
        workerId: W,
        dpRank: 3,
        storageTier: 'host_pinned',
        eventId: 0xffff_ffff_ffff_fffen,
        data: {
          kind: 'stored',
          parentHash: 0x8000_0000_0000_0001n as ExternalHash,
          startPosition: 0,
          blockHashes: BigUint64Array.of(0xffff_ffff_ffff_ffffn, 2n),
          tokensHashes: BigUint64Array.of(0x9e37_79b9_7f4a_7c15n, 4n),
        },
      },
      { workerId: 1n as WorkerId, dpRank: 0, storageTier: 'device', eventId: 2n, data: { kind: 'removed', blockHashes: H(0xdead_beef_0000_0001n) } } as KvEvent,
      { workerId: 1n as WorkerId, dpRank: 0, storageTier: 'disk', eventId: 3n, data: { kind: 'cleared' } } as KvEvent,
    ];
    const b = encodeEvents(events);
    const v = new DataView(b.buffer);
    expect(String.fromCharCode(...b.subarray(0, 4))).toBe('VEV1');
    expect(v.getUint32(4, true)).toBe(3);
    // Event 1: stored, tier 1, with parent.
    expect([b[8], b[9], b[10], b[11]]).toEqual([1, 1, 1, 0]);
    expect(v.getUint32(12, true)).toBe(3);
    expect(v.getBigUint64(16, true)).toBe(W);
    expect(v.getBigUint64(24, true)).toBe(0xffff_ffff_ffff_fffen);
    expect(v.getBigUint64(32, true)).toBe(0x8000_0000_0000_0001n);
    expect(v.getUint32(40, true)).toBe(2);
    expect(v.getBigUint64(44, true)).toBe(0xffff_ffff_ffff_ffffn);
    expect(v.getBigUint64(52, true)).toBe(0x9e37_79b9_7f4a_7c15n);
    expect(v.getBigUint64(60, true)).toBe(2n);
    expect(v.getBigUint64(68, true)).toBe(4n);
    // Event 2: removed, device, no parent; one hash.
    expect([b[76], b[77], b[78]]).toEqual([2, 0, 0]);
    expect(v.getUint32(108, true)).toBe(1);
    expect(v.getBigUint64(112, true)).toBe(0xdead_beef_0000_0001n);
    // Event 3: cleared on disk, no blocks; and nothing after it.
    expect([b[120], b[121]]).toEqual([3, 2]);
    expect(v.getUint32(152, true)).toBe(0);
    expect(b.length).toBe(156);
  });

  it('encodes workers and dp ranks leaving as records of their own, ids exact', () => {
    const b = encodeEvents([
      { leave: 'worker', workerId: W },
      { leave: 'dp_rank', workerId: 0x8000_0000_0000_0001n as WorkerId, dpRank: 7 },
    ]);
    const v = new DataView(b.buffer);
    expect(v.getUint32(4, true)).toBe(2);
    // Kind 4 (worker), no blocks; kind 5 (dp rank) with its rank.
    expect([b[8], v.getUint32(12, true), v.getBigUint64(16, true), v.getUint32(40, true)]).toEqual([4, 0, W, 0]);
    expect([b[44], v.getUint32(48, true), v.getBigUint64(52, true), v.getUint32(76, true)]).toEqual([5, 7, 0x8000_0000_0000_0001n, 0]);
    expect(b.length).toBe(80);
  });

  it('encodes queries and decodes answers without losing a bit', () => {
    const q = encodeQueries([BigUint64Array.of(0xffff_ffff_ffff_ffffn, 1n), new BigUint64Array(0)]);
    const qv = new DataView(q.buffer);
    expect(String.fromCharCode(...q.subarray(0, 4))).toBe('VEQ1');
    expect([qv.getUint32(4, true), qv.getUint32(8, true)]).toEqual([2, 2]);
    expect(qv.getBigUint64(12, true)).toBe(0xffff_ffff_ffff_ffffn);
    expect(qv.getUint32(28, true)).toBe(0);
    expect(q.length).toBe(32);

    const a = new Uint8Array(8 + 4 + 2 * 16 + 4);
    const av = new DataView(a.buffer);
    a.set([0x56, 0x45, 0x41, 0x31]);
    av.setUint32(4, 2, true);
    av.setUint32(8, 2, true);
    av.setBigUint64(12, W, true);
    av.setUint32(20, 1, true);
    av.setUint32(24, 512, true);
    av.setBigUint64(28, 7n, true);
    av.setUint32(36, 0, true);
    av.setUint32(40, 3, true);
    av.setUint32(44, 0, true);
    expect(decodeAnswers(a)).toEqual([[`${W}:1:512`, '7:0:3'].sort(), []]);
    expect(() => decodeAnswers(a.subarray(0, a.length - 1))).toThrow();
    expect(() => decodeAnswers(new Uint8Array([1, 2, 3, 4, 0, 0, 0, 0]))).toThrow(/magic/);
  });
});
