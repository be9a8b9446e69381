import { describe, expect, it } from 'vitest';
import { bookingEventCodec, observeRequestCodec } from '@vantage/protocol';
import type { WorkerId } from '@vantage/types';
import { encodeBooking, encodeObserveQuery, le64Base64 } from '../src/wire';

const dec = new TextDecoder();
const hashes = BigUint64Array.from([0n, 1n, (1n << 64n) - 1n, 0x0123_4567_89ab_cdefn]);
const W = ((1n << 64n) - 2n) as WorkerId;

describe('hand-written messages', () => {
  it('observe query: the codec writes the same bytes and decodes them to the same values', () => {
    for (const id of ['r-1', 'quote " and \\ and é', 'x'.repeat(256)]) {
      const mine = encodeObserveQuery(id, le64Base64(hashes), 4096);
      const codec = observeRequestCodec.encode({ requestId: id, prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null }, promptTokens: 4096, workers: 'choice' });
      expect(dec.decode(mine)).toBe(dec.decode(codec));
      const r = observeRequestCodec.decode(mine);
      expect(r.ok && r.value).toEqual({ requestId: id, prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null }, promptTokens: 4096, workers: 'choice' });
    }
  });

  it('booking: the codec writes the same bytes and decodes them to the same values', () => {
    for (const [expectedOutputTokens, prefillTokens] of [[null, null], [0, 0], [512, 1000]] as const) {
      const value = {
        requestId: 'r "1"',
        sessionId: 's\n1',
        pool: 'pool-a',
        workerId: W,
        dpRank: 3,
        promptTokens: 70_000,
        overlapBlocks: 12,
        sequenceHashes: null,
        localHashes: hashes,
        expectedOutputTokens,
        prefillTokens,
        atMs: 1_700_000_000_123,
      };
      const mine = encodeBooking({ ...value, localHashesLe64: le64Base64(hashes) });
      expect(dec.decode(mine)).toBe(dec.decode(bookingEventCodec.encode(value)));
      const r = bookingEventCodec.decode(mine);
      expect(r.ok && r.value).toEqual(value);
    }
  });
});
