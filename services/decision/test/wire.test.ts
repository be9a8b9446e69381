import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Le64Scratch, bookingEventCodec, decodeObserveRequestReusing, isObserveRequestBinary, observeRequestCodec, routeReplyCodec, type CandidateObservation, type RouteReply } from '@vantage/protocol';
import type { WorkerId } from '@vantage/types';
import { encodeBooking, encodeObserveQuery, encodeRouteReply, le64Base64 } from '../src/wire';

const dec = new TextDecoder();
const hashes = BigUint64Array.from([0n, 1n, (1n << 64n) - 1n, 0x0123_4567_89ab_cdefn]);
const W = ((1n << 64n) - 2n) as WorkerId;

describe('hand-written messages', () => {
  it('observe query: binary, decoded by the codec to the values its JSON form decodes to', () => {
    for (const id of ['r-1', 'quote " and \\ and é', 'x'.repeat(256)]) {
      const mine = encodeObserveQuery(id, hashes, 4096);
      expect(isObserveRequestBinary(mine)).toBe(true);
      const codec = observeRequestCodec.encode({ requestId: id, prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null }, promptTokens: 4096, workers: 'choice', replyEncoding: 'binary' });
      expect(mine.length).toBeLessThan(codec.length);
      const r = observeRequestCodec.decode(mine);
      expect(r).toEqual(observeRequestCodec.decode(codec));
      expect(r.ok && r.value).toEqual({ requestId: id, prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null }, promptTokens: 4096, workers: 'choice', replyEncoding: 'binary' });
      // The indexer's handler decodes it the same, and a printable ASCII id takes the protocol's fast
      // path (the hashes are a view of the handler's scratch), the others the general decoder.
      const scratch = new Le64Scratch();
      const t = decodeObserveRequestReusing(mine, scratch);
      expect(t.ok && t.value).toEqual(r.ok && r.value);
      const viaTemplate = t.ok && t.value.prompt.kind === 'local_hashes' && t.value.prompt.localHashes.buffer === scratch.hashes.buffer;
      expect(viaTemplate).toBe(/^[ -~]+$/.test(id));
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

describe('route reply writer', () => {
  const text = fc.string({ maxLength: 12 });
  const nullable = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });
  const count = fc.nat({ max: 1_000_000 });
  const real = fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }), fc.integer());
  const observation: fc.Arbitrary<CandidateObservation> = fc.record({
    model: fc.string({ minLength: 1, maxLength: 8 }),
    pool: fc.constantFrom('eff', 'cap-1'),
    promptTokens: count,
    workerId: nullable(fc.bigUint({ max: (1n << 64n) - 1n }).map((x) => x as WorkerId)),
    dpRank: nullable(fc.nat({ max: 64 })),
    schedulable: nullable(fc.boolean()),
    K: nullable(count),
    R: nullable(count),
    P: nullable(fc.double({ noNaN: true, noDefaultInfinity: true, min: 0, max: 100 })),
    effectivePrefillTokens: nullable(count),
    hostOverlapBlocks: nullable(count),
    diskOverlapBlocks: nullable(count),
    activeBlocks: nullable(count),
    totalKvBlocks: nullable(count),
    pending: nullable(fc.record({ requests: count, tokens: count })),
    ages: fc.record({ indexMs: nullable(real.map(Math.abs)), loadMs: nullable(real.map(Math.abs)), bookingMs: nullable(real.map(Math.abs)), collectedMs: real.map(Math.abs) }),
    queryDurationUs: nullable(count),
    error: nullable(fc.record({ code: fc.constantFrom('indexer_timeout', 'no_worker'), reason: nullable(text) })),
  });
  const reply: fc.Arbitrary<RouteReply> = fc.record({
    requestId: fc.string({ minLength: 1, maxLength: 12 }),
    sessionId: nullable(fc.string({ minLength: 1, maxLength: 12 })),
    stageProposal: fc.constantFrom('efficient' as const, 'capable' as const),
    model: fc.string({ minLength: 1, maxLength: 8 }),
    modelRole: fc.constantFrom('efficient' as const, 'capable' as const),
    pool: nullable(fc.constantFrom('eff', 'cap-1')),
    workerId: nullable(fc.bigUint({ max: (1n << 64n) - 1n }).map((x) => x as WorkerId)),
    dpRank: nullable(fc.nat({ max: 64 })),
    endpoint: nullable(text),
    reason: fc.constantFrom('kept' as const, 'overrode' as const, 'fallback' as const),
    fallback: nullable(fc.constantFrom('fallback_indexer_unavailable', 'fallback_local_limit')),
    detail: nullable(text),
    variant: fc.constantFrom('baseline', 'cache_aware'),
    observations: fc.record({ efficient: nullable(observation), capable: nullable(observation) }),
    predictions: fc.record({ estimator: fc.constantFrom('none' as const, 'blind' as const, 'cache' as const), efficientTtftMs: nullable(real), capableTtftMs: nullable(real), advantageMs: nullable(real), marginMs: nullable(real) }),
    parameterVersion: nullable(fc.string({ minLength: 1, maxLength: 12 })),
    queryDurationUs: count,
    decisionDurationUs: count,
  });

  it('writes what the codec writes (the same values after decoding, schema-valid)', () => {
    fc.assert(
      fc.property(reply, (r) => {
        const mine = routeReplyCodec.decode(encodeRouteReply(r));
        const codec = routeReplyCodec.decode(routeReplyCodec.encode(r));
        expect(mine).toEqual(codec);
      }),
      { seed: 11, numRuns: 1000 },
    );
  });

  it('writes the same bytes as the codec in the decision service member order', () => {
    const o: CandidateObservation = {
      model: 'm', pool: 'eff', promptTokens: 100, queryDurationUs: 250, workerId: W, dpRank: 1, schedulable: true, K: 64, R: 2, P: 0.25, effectivePrefillTokens: 36,
      hostOverlapBlocks: null, diskOverlapBlocks: 3, activeBlocks: 9, totalKvBlocks: 4096, pending: { requests: 1, tokens: 2 },
      ages: { indexMs: 1.5, loadMs: null, bookingMs: 0.25, collectedMs: 0.25 }, error: null,
    };
    const r: RouteReply = {
      requestId: 'r"1', sessionId: null, stageProposal: 'efficient', model: 'm', modelRole: 'efficient', pool: 'eff', workerId: W, dpRank: 1, endpoint: null, reason: 'fallback',
      fallback: 'fallback_local_limit', detail: 'x\ny', variant: 'cache_aware', observations: { efficient: o, capable: { ...o, workerId: null, error: { code: 'indexer_timeout', reason: 'slow' } } },
      predictions: { estimator: 'cache', efficientTtftMs: 1400.5, capableTtftMs: Number.NaN, advantageMs: null, marginMs: 200 }, parameterVersion: 'v1', queryDurationUs: 300, decisionDurationUs: 420,
    };
    expect(dec.decode(encodeRouteReply(r))).toBe(dec.decode(routeReplyCodec.encode(r)));
  });
});
