import { describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import { applyActiveSequenceEvent, BookingLedger, type ActiveSequenceInput } from '@vantage/bookings';

const W = 0x8000_0000_0000_0001n as WorkerId;

function add(id: string, data: Partial<Extract<ActiveSequenceInput['data'], { kind: 'add_request' }>> = {}): ActiveSequenceInput {
  return {
    requestId: id,
    workerId: W,
    dpRank: 1,
    routerId: 42n,
    loraName: null,
    data: {
      kind: 'add_request',
      tokenSequence: BigUint64Array.from([5n, 6n]),
      trackPrefillTokens: true,
      expectedOutputTokens: 100,
      prefillLoadHint: null,
      ...data,
    },
  };
}

function ev(id: string, kind: 'free' | 'mark_prefill_completed'): ActiveSequenceInput {
  return { requestId: id, workerId: W, dpRank: 1, routerId: 42n, loraName: null, data: { kind } };
}

describe('Dynamo active-sequence events', () => {
  it('books AddRequest with the router prefill hint as competing traffic', () => {
    const l = new BookingLedger({ blockSize: 64 });
    const r = applyActiveSequenceEvent(
      l,
      add('a', { prefillLoadHint: { initialEffectivePrefillTokens: 300 } }),
      10,
    );
    expect(r).toMatchObject({ kind: 'booked' });
    const load = l.load(W, 1);
    expect(load.requests).toBe(1);
    expect(load.trackedPrefillTokens).toBe(300);
    expect(load.activeBlocks).toBe(2);
    expect(load.expectedOutputTokens).toBe(100);
    expect(l.get('a')?.source).toBe('dynamo_router');
  });

  it('tracks no prefill when the router does not, or when no figure was sent', () => {
    const l = new BookingLedger({ blockSize: 64 });
    applyActiveSequenceEvent(
      l,
      add('a', { trackPrefillTokens: false, prefillLoadHint: { initialEffectivePrefillTokens: 300 } }),
      10,
    );
    applyActiveSequenceEvent(l, add('b'), 10);
    expect(l.load(W, 1).trackedPrefillTokens).toBe(0);
    expect(l.load(W, 1).requests).toBe(2);
  });

  it('books no blocks when token_sequence is null', () => {
    const l = new BookingLedger({ blockSize: 64 });
    applyActiveSequenceEvent(l, add('a', { tokenSequence: null }), 10);
    expect(l.load(W, 1).activeBlocks).toBe(0);
    expect(l.load(W, 1).requests).toBe(1);
  });

  it('maps MarkPrefillCompleted and Free onto the ledger', () => {
    const l = new BookingLedger({ blockSize: 64 });
    applyActiveSequenceEvent(l, add('a', { prefillLoadHint: { initialEffectivePrefillTokens: 640 } }), 10);
    expect(l.load(W, 1).trackedPrefillTokens).toBe(640);
    const m = applyActiveSequenceEvent(l, ev('a', 'mark_prefill_completed'), 11);
    expect(m).toBe('marked');
    expect(l.load(W, 1).trackedPrefillTokens).toBe(0);
    const f = applyActiveSequenceEvent(l, ev('a', 'free'), 12);
    expect(f).toBe('released');
    expect(l.load(W, 1).requests).toBe(0);
    expect(applyActiveSequenceEvent(l, ev('a', 'free'), 13)).toBe('already_released');
  });

  it('does not resurrect a request whose Free overtook its AddRequest', () => {
    const l = new BookingLedger({ blockSize: 64 });
    applyActiveSequenceEvent(l, ev('a', 'free'), 10);
    const r = applyActiveSequenceEvent(l, add('a'), 11);
    expect(r).toEqual({ kind: 'already_released' });
    expect(l.size).toBe(0);
  });
});
