// Decoders checked against msgpack and JSON written by hand from the spec,
// and the encoder checked against the bytes rmp_serde's narrowest-form rule gives.
import { describe, expect, it } from 'vitest';
import {
  decodeActiveLoad,
  decodeActiveSequenceEvents,
  decodeEventPlaneMessage,
  decodeRouterEventJson,
  decodeRouterEventMsgpack,
  encodeActiveLoad,
  encodeRouterEventMsgpack,
  type ActiveLoad,
} from '../src/index';
import type { KvEvent, WorkerId } from '@vantage/types';
import { arr, hexBytes, map, NIL, s } from './helpers';

const TWO_63 = 1n << 63n;
const U64_MAX = (1n << 64n) - 1n;

function must<T>(r: { ok: true; value: T } | { ok: false; code: string; reason: string }): T {
  if (!r.ok) throw new Error(`unexpected rejection ${r.code}: ${r.reason}`);
  return r.value;
}

describe('RouterEvent msgpack fixtures', () => {
  it('oldest generation: no dp_rank, storage_tier, start_position or mm_extra_info; mixed integer widths', () => {
    const bytes = hexBytes(
      map(2),
      s('worker_id'), 'cf 8000000000000001',
      s('event'), map(2),
      s('event_id'), '01',
      s('data'), map(1), s('stored'), map(2),
      s('parent_hash'), 'cc ff',
      s('blocks'), arr(1), map(2),
      s('block_hash'), 'cd 0102',
      s('tokens_hash'), 'ce 01020304',
    );
    const e = must(decodeRouterEventMsgpack(bytes));
    expect(e.workerId).toBe(TWO_63 + 1n);
    expect(e.eventId).toBe(1n);
    expect(e.dpRank).toBe(0);
    expect(e.storageTier).toBe('device');
    expect(e.data.kind).toBe('stored');
    if (e.data.kind !== 'stored') return;
    expect(e.data.parentHash).toBe(255n);
    expect(e.data.startPosition).toBeNull();
    expect(Array.from(e.data.blockHashes)).toEqual([0x0102n]);
    expect(Array.from(e.data.tokensHashes)).toEqual([0x01020304n]);
    expect(e.data.mmExtraInfo).toBeUndefined();
  });

  it('signed i64 encodings of hashes are reinterpreted as the same u64 bits', () => {
    const bytes = hexBytes(
      map(2),
      s('worker_id'), 'd3 ffffffffffffffff',
      s('event'), map(3),
      s('event_id'), 'cf 0000000000000002',
      s('data'), map(1), s('removed'), map(1),
      s('block_hashes'), arr(4), 'ff', 'd0 80', 'd1 8000', 'd3 8000000000000000',
      s('dp_rank'), '03',
    );
    const e = must(decodeRouterEventMsgpack(bytes));
    expect(e.workerId).toBe(U64_MAX);
    expect(e.dpRank).toBe(3);
    expect(e.data.kind).toBe('removed');
    if (e.data.kind !== 'removed') return;
    expect(Array.from(e.data.blockHashes)).toEqual([U64_MAX, (1n << 64n) - 128n, (1n << 64n) - 32768n, TWO_63]);
  });

  it('"cleared" as a bare string, current fields, unknown fields ignored', () => {
    const bytes = hexBytes(
      map(5),
      s('worker_id'), '07',
      s('storage_tier'), s('host_pinned'),
      s('residency_domain'), s('worker'),
      s('event'), map(3), s('event_id'), '09', s('data'), s('cleared'), s('dp_rank'), '01',
      s('some_future_field'), arr(2), '01', NIL,
    );
    const e = must(decodeRouterEventMsgpack(bytes));
    expect(e).toEqual({ workerId: 7n, dpRank: 1, storageTier: 'host_pinned', eventId: 9n, data: { kind: 'cleared' } });
  });

  it('mm_extra_info and start_position are kept', () => {
    const bytes = hexBytes(
      map(2),
      s('worker_id'), '01',
      s('event'), map(2), s('event_id'), '01',
      s('data'), map(1), s('stored'), map(3),
      s('parent_hash'), NIL,
      s('start_position'), 'cd 1000',
      s('blocks'), arr(2),
      map(3), s('block_hash'), '0a', s('tokens_hash'), '0b',
      s('mm_extra_info'), map(1), s('mm_objects'), arr(1), map(2), s('mm_hash'), 'cf ffffffffffffffff', s('offsets'), arr(1), arr(2), '00', '04',
      map(3), s('block_hash'), '0c', s('tokens_hash'), '0d', s('mm_extra_info'), NIL,
    );
    const e = must(decodeRouterEventMsgpack(bytes));
    if (e.data.kind !== 'stored') throw new Error('stored expected');
    expect(e.data.startPosition).toBe(0x1000);
    expect(e.data.parentHash).toBeNull();
    expect(e.data.mmExtraInfo).toEqual([{ mm_objects: [{ mm_hash: U64_MAX, offsets: [[0n, 4n]] }] }, null]);
  });

  it('encoder emits the narrowest forms, field order as declared (current generation)', () => {
    const event: KvEvent = {
      workerId: 5n as WorkerId,
      dpRank: 0,
      storageTier: 'device',
      eventId: 300n,
      data: { kind: 'removed', blockHashes: BigUint64Array.of(1n << 32n, 127n, 128n) },
    };
    const expected = hexBytes(
      map(4),
      s('worker_id'), '05',
      s('storage_tier'), s('device'),
      s('residency_domain'), s('worker'),
      s('event'), map(3),
      s('event_id'), 'cd 012c',
      s('data'), map(1), s('removed'), map(1), s('block_hashes'), arr(3), 'cf 0000000100000000', '7f', 'cc 80',
      s('dp_rank'), '00',
    );
    expect(Buffer.from(encodeRouterEventMsgpack(event)).toString('hex')).toBe(Buffer.from(expected).toString('hex'));
  });
});

describe('RouterEvent JSON fixtures', () => {
  it('keeps u64 exact where JSON.parse would round, and reinterprets negative i64', () => {
    const text =
      '{"worker_id":18446744073709551615,"event":{"event_id":7,"data":{"removed":{"block_hashes":[-1,9223372036854775808,14643705804678351452]}}}}';
    // The point of the hand-written reader: JSON.parse loses the low bits.
    expect(BigInt((JSON.parse(text) as { worker_id: number }).worker_id)).not.toBe(U64_MAX);
    const e = must(decodeRouterEventJson(text));
    expect(e.workerId).toBe(U64_MAX);
    expect(e.eventId).toBe(7n);
    if (e.data.kind !== 'removed') throw new Error('removed expected');
    expect(Array.from(e.data.blockHashes)).toEqual([U64_MAX, TWO_63, 14643705804678351452n]);
  });

  it('reads the Aug 2025 stored shape and the bare "cleared" string', () => {
    const stored = must(
      decodeRouterEventJson(
        '{"worker_id":1,"event":{"event_id":2,"data":{"stored":{"parent_hash":null,"blocks":[{"block_hash":3,"tokens_hash":4}]}}}}',
      ),
    );
    expect(stored.data).toEqual({
      kind: 'stored',
      parentHash: null,
      startPosition: null,
      blockHashes: BigUint64Array.of(3n),
      tokensHashes: BigUint64Array.of(4n),
    });
    const cleared = must(decodeRouterEventJson(Buffer.from('{"worker_id":1,"event":{"event_id":3,"data":"cleared","dp_rank":2}}')));
    expect(cleared).toMatchObject({ dpRank: 2, data: { kind: 'cleared' } });
  });
});

describe('ActiveLoad and ActiveSequenceEvent fixtures', () => {
  const loadBytes = hexBytes(
    map(6),
    s('worker_id'), '05',
    s('dp_rank'), '00',
    s('active_decode_blocks'), NIL,
    s('active_prefill_tokens'), 'cd 012c',
    s('scheduler_load_scope'), NIL,
    s('kv_used_blocks'), 'cf 0000000100000000',
  );
  const load: ActiveLoad = {
    workerId: 5n as WorkerId,
    dpRank: 0,
    activeDecodeBlocks: null,
    activePrefillTokens: 300,
    schedulerLoadScope: null,
    kvUsedBlocks: 2 ** 32,
  };

  it('decodes a hand-built ActiveLoad and encodes the same bytes', () => {
    expect(must(decodeActiveLoad(loadBytes))).toEqual(load);
    expect(Buffer.from(encodeActiveLoad(load)).toString('hex')).toBe(Buffer.from(loadBytes).toString('hex'));
  });

  it('decodes a hand-built envelope around it and dispatches on the topic', () => {
    const payloadHex = Buffer.from(loadBytes).toString('hex');
    const env = hexBytes(
      map(5),
      s('topic'), s('kv_metrics'),
      s('publisher_id'), 'cf fffffffffffffffe',
      s('sequence'), '00',
      s('published_at'), 'cf 0000019a2b3c4d5e',
      s('payload'), 'c4', (loadBytes.length).toString(16).padStart(2, '0'), payloadHex,
    );
    const m = must(decodeEventPlaneMessage(env));
    expect(m.kind).toBe('active_load');
    expect(m.envelope.publisherId).toBe(U64_MAX - 1n);
    expect(m.envelope.sequence).toBe(0n);
    expect(m.envelope.publishedAtMs).toBe(0x19a2b3c4d5en);
    if (m.kind === 'active_load') expect(m.load).toEqual(load);
  });

  it('decodes AddRequest (map-form Duration), Free and MarkPrefillCompleted in a batch', () => {
    const worker = `${s('worker')}${map(2)}${s('worker_id')}cf8000000000000000${s('dp_rank')}01`;
    const add = [
      map(5),
      s('request_id'), s('req-1'),
      worker,
      s('data'), map(1), s('AddRequest'), map(4),
      s('token_sequence'), arr(2), 'cf ffffffffffffffff', '02',
      s('track_prefill_tokens'), 'c2',
      s('expected_output_tokens'), 'cd 0100',
      s('prefill_load_hint'), map(2), s('initial_effective_prefill_tokens'), 'cd 0800',
      s('expected_prefill_duration'), map(2), s('secs'), '01', s('nanos'), 'ce 1dcd6500',
      s('router_id'), '2a',
      s('lora_name'), s('adapter-a'),
    ].join('');
    const free = [map(4), s('request_id'), s('req-1'), worker, s('data'), s('Free'), s('router_id'), '2a'].join('');
    const done = [map(5), s('request_id'), s('req-2'), worker, s('data'), s('MarkPrefillCompleted'), s('router_id'), '2a', s('lora_name'), NIL].join('');
    const batch = hexBytes(map(1), s('events'), arr(3), add, free, done);
    const events = must(decodeActiveSequenceEvents(batch));
    expect(events).toHaveLength(3);
    expect(events[0]).toEqual({
      requestId: 'req-1',
      workerId: 1n << 63n,
      dpRank: 1,
      routerId: 42n,
      loraName: 'adapter-a',
      data: {
        kind: 'add_request',
        tokenSequence: BigUint64Array.of(U64_MAX, 2n),
        trackPrefillTokens: false,
        expectedOutputTokens: 256,
        prefillLoadHint: { initialEffectivePrefillTokens: 2048, expectedPrefillDuration: { secs: 1n, nanos: 500_000_000 } },
      },
    });
    expect(events[1]).toMatchObject({ loraName: null, data: { kind: 'free' } });
    expect(events[2]).toMatchObject({ requestId: 'req-2', data: { kind: 'mark_prefill_completed' } });
  });

  it('older AddRequest without track_prefill_tokens defaults it to true', () => {
    const one = hexBytes(
      map(4),
      s('request_id'), s('r'),
      s('worker'), map(2), s('worker_id'), '01', s('dp_rank'), '00',
      s('data'), map(1), s('AddRequest'), map(2), s('token_sequence'), NIL, s('expected_output_tokens'), NIL,
      s('router_id'), '01',
    );
    const [e] = must(decodeActiveSequenceEvents(one));
    expect(e?.data).toEqual({ kind: 'add_request', tokenSequence: null, trackPrefillTokens: true, expectedOutputTokens: null, prefillLoadHint: null });
  });
});
