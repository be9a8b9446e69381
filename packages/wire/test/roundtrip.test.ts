// encode -> decode gives back the input, for every shape and field generation,
// in msgpack and in JSON, with u64 values across the whole range.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ExternalHash, KvEvent, KvEventData, StorageTier, WorkerId } from '@vantage/types';
import { decodeActiveLoad, decodeActiveSequenceEvents, decodeEnvelope, decodeEventPlaneMessage, decodeRouterEventJson, decodeRouterEventMsgpack, encodeEnvelope, type ActiveLoad, type ActiveSequenceEvent } from '../src/index';
import { ACTIVE_LOAD_GENERATIONS, ACTIVE_SEQUENCE_GENERATIONS, ROUTER_EVENT_GENERATIONS, encodeActiveLoad, encodeActiveSequenceBatch, encodeActiveSequenceEvent, encodeEventPlaneMessage, encodeRouterEventJson, encodeRouterEventMsgpack, type RouterEventGeneration } from './encode';

const U64_MAX = (1n << 64n) - 1n;
// Edges of every msgpack width plus the i64/u64 boundary.
const EDGES = [0n, 127n, 128n, 255n, 256n, 65535n, 65536n, 0xffff_ffffn, 1n << 32n, (1n << 53n) + 1n, (1n << 63n) - 1n, 1n << 63n, U64_MAX];

const u64 = fc.oneof(fc.constantFrom(...EDGES), fc.bigUintN(64));
const hashes = (max: number) => fc.array(u64, { maxLength: max }).map((a) => BigUint64Array.from(a));

function storedArb(gen: RouterEventGeneration): fc.Arbitrary<KvEventData> {
  const hasStart = ROUTER_EVENT_GENERATIONS.indexOf(gen) >= ROUTER_EVENT_GENERATIONS.indexOf('start_position');
  const hasMm = ROUTER_EVENT_GENERATIONS.indexOf(gen) >= ROUTER_EVENT_GENERATIONS.indexOf('mm_extra_info');
  return fc
    .record({
      parentHash: fc.option(u64, { nil: null }),
      startPosition: hasStart ? fc.option(fc.integer({ min: 0, max: 0xffff_ffff }), { nil: null }) : fc.constant(null),
      blocks: fc.array(fc.tuple(u64, u64), { maxLength: 12 }),
      mm: hasMm ? fc.boolean() : fc.constant(false),
    })
    .map(({ parentHash, startPosition, blocks, mm }) => {
      const base = {
        kind: 'stored' as const,
        parentHash: parentHash as ExternalHash | null,
        startPosition,
        blockHashes: BigUint64Array.from(blocks.map((b) => b[0])),
        tokensHashes: BigUint64Array.from(blocks.map((b) => b[1])),
      };
      if (!mm || blocks.length === 0) return base as KvEventData;
      const info = blocks.map((b, i) => (i % 2 === 0 ? { mm_objects: [{ mm_hash: b[0], offsets: [[0n, BigInt(i)]] }] } : null));
      return { ...base, mmExtraInfo: info } as KvEventData;
    });
}

function eventArb(gen: RouterEventGeneration): fc.Arbitrary<KvEvent> {
  const idx = ROUTER_EVENT_GENERATIONS.indexOf(gen);
  const data = fc.oneof(
    storedArb(gen),
    hashes(20).map((h): KvEventData => ({ kind: 'removed', blockHashes: h })),
    fc.constant<KvEventData>({ kind: 'cleared' }),
  );
  return fc.record({
    workerId: u64.map((w) => w as WorkerId),
    dpRank: idx >= 1 ? fc.integer({ min: 0, max: 0xffff_ffff }) : fc.constant(0),
    storageTier: idx >= 3 ? fc.constantFrom<StorageTier>('device', 'host_pinned', 'disk', 'external') : fc.constant<StorageTier>('device'),
    eventId: u64,
    data,
  });
}

describe('RouterEvent round trips', () => {
  for (const gen of ROUTER_EVENT_GENERATIONS) {
    it(`msgpack and JSON, generation ${gen}`, () => {
      fc.assert(
        fc.property(eventArb(gen), (e) => {
          const m = decodeRouterEventMsgpack(encodeRouterEventMsgpack(e, { generation: gen }));
          expect(m).toEqual({ ok: true, value: e });
          const j = decodeRouterEventJson(encodeRouterEventJson(e, { generation: gen }));
          expect(j).toEqual({ ok: true, value: e });
        }),
        { seed: 0x5eed + gen.length, numRuns: 150 },
      );
    });
  }

  it('older generations omit the newer fields on the wire', () => {
    const e: KvEvent = { workerId: 1n as WorkerId, dpRank: 0, storageTier: 'device', eventId: 1n, data: { kind: 'cleared' } };
    expect(encodeRouterEventJson(e, { generation: 'base' })).toBe('{"worker_id":1,"event":{"event_id":1,"data":"cleared"}}');
    expect(encodeRouterEventJson(e, { generation: 'storage_tier' })).toBe(
      '{"worker_id":1,"storage_tier":"device","event":{"event_id":1,"data":"cleared","dp_rank":0}}',
    );
    expect(() => encodeRouterEventJson({ ...e, dpRank: 2 }, { generation: 'base' })).toThrow(RangeError);
  });
});

const loadArb = (gen: string): fc.Arbitrary<ActiveLoad> =>
  fc.record({
    workerId: u64.map((w) => w as WorkerId),
    dpRank: fc.integer({ min: 0, max: 0xffff_ffff }),
    activeDecodeBlocks: fc.option(fc.maxSafeNat(), { nil: null }),
    activePrefillTokens: fc.option(fc.maxSafeNat(), { nil: null }),
    schedulerLoadScope: gen === 'scheduler_load_scope' ? fc.constantFrom('local' as const, 'replica_synchronized' as const, null) : fc.constant(null),
    kvUsedBlocks: fc.option(fc.maxSafeNat(), { nil: null }),
  });

describe('ActiveLoad round trips', () => {
  for (const gen of ACTIVE_LOAD_GENERATIONS) {
    it(`generation ${gen}, msgpack and JSON`, () => {
      fc.assert(
        fc.property(loadArb(gen), (l) => {
          expect(decodeActiveLoad(encodeActiveLoad(l, { generation: gen }))).toEqual({ ok: true, value: l });
          expect(decodeActiveLoad(encodeActiveLoad(l, { generation: gen, format: 'json' }), { format: 'json' })).toEqual({ ok: true, value: l });
        }),
        { seed: 77, numRuns: 100 },
      );
    });
  }
});

function seqArb(gen: string): fc.Arbitrary<ActiveSequenceEvent> {
  const add = fc.record({
    kind: fc.constant('add_request' as const),
    tokenSequence: fc.option(hashes(30), { nil: null }),
    trackPrefillTokens: gen === 'base' ? fc.constant(true) : fc.boolean(),
    expectedOutputTokens: fc.option(fc.integer({ min: 0, max: 0xffff_ffff }), { nil: null }),
    prefillLoadHint:
      gen === 'prefill_load_hint'
        ? fc.option(
            fc.record({
              initialEffectivePrefillTokens: fc.maxSafeNat(),
              expectedPrefillDuration: fc.option(fc.record({ secs: u64, nanos: fc.integer({ min: 0, max: 999_999_999 }) }), { nil: null }),
            }),
            { nil: null },
          )
        : fc.constant(null),
  });
  return fc.record({
    requestId: fc.string({ maxLength: 40 }),
    workerId: u64.map((w) => w as WorkerId),
    dpRank: fc.integer({ min: 0, max: 0xffff_ffff }),
    routerId: u64,
    loraName: fc.option(fc.string({ maxLength: 20 }), { nil: null }),
    data: fc.oneof(add, fc.constant({ kind: 'free' as const }), fc.constant({ kind: 'mark_prefill_completed' as const })),
  });
}

describe('ActiveSequenceEvent round trips', () => {
  for (const gen of ACTIVE_SEQUENCE_GENERATIONS) {
    it(`single and batch, generation ${gen}`, () => {
      fc.assert(
        fc.property(fc.array(seqArb(gen), { minLength: 1, maxLength: 5 }), (events) => {
          const first = events[0]!;
          expect(decodeActiveSequenceEvents(encodeActiveSequenceEvent(first, { generation: gen }))).toEqual({ ok: true, value: [first] });
          expect(decodeActiveSequenceEvents(encodeActiveSequenceBatch(events, { generation: gen }))).toEqual({ ok: true, value: events });
          const json = encodeActiveSequenceEvent(first, { generation: gen, format: 'json' });
          expect(decodeActiveSequenceEvents(json, { format: 'json' })).toEqual({ ok: true, value: [first] });
        }),
        { seed: 99, numRuns: 100 },
      );
    });
  }
});

describe('envelope and event-plane messages', () => {
  it('envelope round trip with u64 header fields at the edges', () => {
    fc.assert(
      fc.property(u64, u64, u64, fc.uint8Array({ maxLength: 300 }), fc.option(u64, { nil: undefined }), (p, q, t, payload, ns) => {
        const env = ns === undefined ? { topic: 'kv-events', publisherId: p, sequence: q, publishedAtMs: t, payload } : { topic: 'kv-events', publisherId: p, sequence: q, publishedAtMs: t, payload, publishedAtNs: ns };
        expect(decodeEnvelope(encodeEnvelope(env))).toEqual({ ok: true, value: env });
      }),
      { seed: 5, numRuns: 100 },
    );
  });

  it('every payload kind survives envelope + dispatch', () => {
    const header = { publisherId: U64_MAX, sequence: 41n, publishedAtMs: 1_760_000_000_000n };
    const event: KvEvent = { workerId: (1n << 63n) as WorkerId, dpRank: 2, storageTier: 'disk', eventId: 9n, data: { kind: 'removed', blockHashes: BigUint64Array.of(U64_MAX) } };
    const kv = decodeEventPlaneMessage(encodeEventPlaneMessage(header, { kind: 'kv_event', event }));
    expect(kv).toMatchObject({ ok: true, value: { kind: 'kv_event', event, envelope: { ...header, topic: 'kv-events' } } });
    const load: ActiveLoad = { workerId: 3n as WorkerId, dpRank: 0, activeDecodeBlocks: 10, activePrefillTokens: null, schedulerLoadScope: 'local', kvUsedBlocks: null };
    expect(decodeEventPlaneMessage(encodeEventPlaneMessage(header, { kind: 'active_load', load }))).toMatchObject({ ok: true, value: { kind: 'active_load', load } });
    const seq: ActiveSequenceEvent = { requestId: 'r', workerId: 3n as WorkerId, dpRank: 0, routerId: 8n, loraName: null, data: { kind: 'free' } };
    for (const batch of [true, false]) {
      const bytes = encodeEventPlaneMessage(header, { kind: 'active_sequences', events: [seq] }, { batchActiveSequences: batch });
      expect(decodeEventPlaneMessage(bytes)).toMatchObject({ ok: true, value: { kind: 'active_sequences', events: [seq] } });
    }
  });

  it('dispatches on a full subject given by the caller', () => {
    const load: ActiveLoad = { workerId: 3n as WorkerId, dpRank: 0, activeDecodeBlocks: 1, activePrefillTokens: 2, schedulerLoadScope: null, kvUsedBlocks: 3 };
    const bytes = encodeEnvelope({ topic: 'something-else', publisherId: 1n, sequence: 0n, publishedAtMs: 0n, payload: encodeActiveLoad(load) });
    expect(decodeEventPlaneMessage(bytes).ok).toBe(false);
    expect(decodeEventPlaneMessage(bytes, { topic: 'namespace.dynamo.kv_metrics' })).toMatchObject({ ok: true, value: { kind: 'active_load', load } });
  });
});
