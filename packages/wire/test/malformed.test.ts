// Hostile and broken input: each gives the right rejection code, nothing throws.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvEvent, WorkerId } from '@vantage/types';
import {
  WIRE_ERROR_CODES,
  decodeActiveLoad,
  decodeActiveSequenceEvents,
  decodeEnvelope,
  decodeEventPlaneMessage,
  decodeRouterEventJson,
  decodeRouterEventMsgpack,
  encodeEnvelope,
  encodeRouterEventMsgpack,
  sniffMessage,
  type WireErrorCode,
} from '../src/index';
import { arr, hexBytes, map, NIL, s } from './helpers';

function code(r: { ok: boolean; code?: WireErrorCode }): WireErrorCode | 'ok' {
  return r.ok ? 'ok' : r.code!;
}

/** A valid removed event around the given block_hashes body (hex of one msgpack value). */
function removedWith(hashesHex: string, extra = ''): Uint8Array {
  return hexBytes(
    map(2),
    s('worker_id'), '01',
    s('event'), map(2), s('event_id'), '01',
    s('data'), map(1), s('removed'), map(1), s('block_hashes'), hashesHex, extra,
  );
}

const valid: KvEvent = {
  workerId: 12345678901234567890n as WorkerId,
  dpRank: 1,
  storageTier: 'device',
  eventId: 4n,
  data: { kind: 'stored', parentHash: null, startPosition: 3, blockHashes: BigUint64Array.of(1n, 2n), tokensHashes: BigUint64Array.of(3n, 4n) },
};

describe('msgpack rejections', () => {
  it('every strict prefix of a valid message is truncated, never partial', () => {
    const bytes = encodeRouterEventMsgpack(valid);
    for (let n = 0; n < bytes.length; n++) {
      const r = decodeRouterEventMsgpack(bytes.subarray(0, n));
      expect(r.ok, `prefix of ${n} bytes`).toBe(false);
      expect(code(r), `prefix of ${n} bytes`).toBe('truncated');
    }
    expect(decodeRouterEventMsgpack(bytes).ok).toBe(true);
  });

  it('trailing bytes after a complete message are malformed', () => {
    const bytes = encodeRouterEventMsgpack(valid);
    expect(code(decodeRouterEventMsgpack(Uint8Array.from([...bytes, 0x00])))).toBe('malformed');
  });

  it('wrong types', () => {
    expect(code(decodeRouterEventMsgpack(removedWith(s('12'))))).toBe('wrong_type');
    expect(code(decodeRouterEventMsgpack(removedWith(`${arr(1)}${s('12')}`)))).toBe('wrong_type');
    // float64 1.5 where a u64 hash belongs
    expect(code(decodeRouterEventMsgpack(removedWith(`${arr(1)}cb3ff8000000000000`)))).toBe('wrong_type');
    // non-map payloads
    expect(code(decodeRouterEventMsgpack(hexBytes(arr(2), '01', '02')))).toBe('wrong_type');
    expect(code(decodeRouterEventMsgpack(hexBytes('2a')))).toBe('wrong_type');
    expect(code(decodeActiveLoad(hexBytes(s('hello'))))).toBe('wrong_type');
    expect(code(decodeEnvelope(hexBytes(NIL)))).toBe('wrong_type');
    // an extension value (msgpack timestamp) where a map belongs
    expect(code(decodeRouterEventMsgpack(hexBytes('d6ff00000001')))).toBe('wrong_type');
  });

  it('float64 carrying an integer past 2^53 is refused as out of range (bits already lost)', () => {
    expect(code(decodeRouterEventMsgpack(removedWith(`${arr(1)}cb43f0000000000000`)))).toBe('out_of_range');
  });

  it('negative numbers below i64 are impossible in msgpack; negative counts and dp ranks are out of range', () => {
    const negDp = hexBytes(map(2), s('worker_id'), '01', s('event'), map(3), s('event_id'), '01', s('data'), s('cleared'), s('dp_rank'), 'ff');
    expect(code(decodeRouterEventMsgpack(negDp))).toBe('out_of_range');
    const bigDp = hexBytes(map(2), s('worker_id'), '01', s('event'), map(3), s('event_id'), '01', s('data'), s('cleared'), s('dp_rank'), 'cf0000000100000000');
    expect(code(decodeRouterEventMsgpack(bigDp))).toBe('out_of_range');
    const negLoad = hexBytes(map(2), s('worker_id'), '01', s('kv_used_blocks'), 'd0 f0');
    expect(code(decodeActiveLoad(negLoad))).toBe('out_of_range');
    const hugeLoad = hexBytes(map(2), s('worker_id'), '01', s('kv_used_blocks'), 'cf 0020000000000000');
    expect(code(decodeActiveLoad(hugeLoad))).toBe('out_of_range');
  });

  it('missing required fields', () => {
    expect(code(decodeRouterEventMsgpack(hexBytes(map(1), s('worker_id'), '01')))).toBe('missing_field');
    expect(code(decodeActiveLoad(hexBytes(map(1), s('dp_rank'), '01')))).toBe('missing_field');
    expect(code(decodeEnvelope(hexBytes(map(1), s('topic'), s('kv-events'))))).toBe('missing_field');
  });

  it('huge arrays: a lying header is truncated, a real one over the limit is too_large', () => {
    expect(code(decodeRouterEventMsgpack(removedWith('dd ffffffff')))).toBe('truncated');
    expect(code(decodeRouterEventMsgpack(hexBytes('df ffffffff')))).toBe('truncated');
    expect(code(decodeRouterEventMsgpack(hexBytes('c6 ffffffff 00')))).toBe('truncated');
    const many = `dc 0100${'01'.repeat(256)}`;
    expect(code(decodeRouterEventMsgpack(removedWith(many), { limits: { maxBlocksPerEvent: 255 } }))).toBe('too_large');
    expect(code(decodeRouterEventMsgpack(removedWith(many), { limits: { maxBlocksPerEvent: 256 } }))).toBe('ok');
    expect(code(decodeRouterEventMsgpack(encodeRouterEventMsgpack(valid), { limits: { maxMessageBytes: 8 } }))).toBe('too_large');
  });

  it('deep nesting is too_large, not a crash', () => {
    expect(code(decodeRouterEventMsgpack(new Uint8Array(500_000).fill(0x91)))).toBe('too_large');
    // Nesting inside an opaque field is bounded by maxDepth.
    const deep = hexBytes(
      map(2), s('worker_id'), '01',
      s('event'), map(2), s('event_id'), '01', s('data'), map(1), s('stored'), map(1),
      s('blocks'), arr(1), map(3), s('block_hash'), '01', s('tokens_hash'), '01', s('mm_extra_info'), '91'.repeat(100), '01',
    );
    expect(code(decodeRouterEventMsgpack(deep))).toBe('too_large');
    expect(code(decodeRouterEventMsgpack(deep, { limits: { maxDepth: 200 } }))).toBe('ok');
  });

  it('unknown variant tags and storage tiers', () => {
    const tagged = (tag: string) =>
      hexBytes(map(2), s('worker_id'), '01', s('event'), map(2), s('event_id'), '01', s('data'), map(1), s(tag), map(0));
    expect(code(decodeRouterEventMsgpack(tagged('evicted')))).toBe('unknown_variant');
    expect(code(decodeRouterEventMsgpack(tagged('Stored')))).toBe('unknown_variant');
    const tier = hexBytes(map(3), s('worker_id'), '01', s('storage_tier'), s('nvme'), s('event'), map(2), s('event_id'), '01', s('data'), s('cleared'));
    expect(code(decodeRouterEventMsgpack(tier))).toBe('unknown_variant');
    const twoKeys = hexBytes(map(2), s('worker_id'), '01', s('event'), map(2), s('event_id'), '01', s('data'), map(2), s('cleared'), NIL, s('removed'), NIL);
    expect(code(decodeRouterEventMsgpack(twoKeys))).toBe('malformed');
    const seq = hexBytes(map(4), s('request_id'), s('r'), s('worker'), map(2), s('worker_id'), '01', s('dp_rank'), '00', s('data'), s('Evict'), s('router_id'), '01');
    expect(code(decodeActiveSequenceEvents(seq))).toBe('unknown_variant');
  });

  it('a cache-owner residency event is refused as unsupported; worker and absent are accepted', () => {
    const withDomain = (d: string) =>
      hexBytes(map(3), s('worker_id'), '01', s('residency_domain'), d, s('event'), map(2), s('event_id'), '01', s('data'), s('cleared'));
    expect(code(decodeRouterEventMsgpack(withDomain(s('worker'))))).toBe('ok');
    expect(code(decodeRouterEventMsgpack(withDomain(s('cache_owner'))))).toBe('unsupported');
    expect(code(decodeRouterEventMsgpack(withDomain(NIL)))).toBe('unsupported');
  });

  it('an envelope with an unknown topic, or a bad payload, is rejected with the payload reason', () => {
    const env = (topic: string, payload: Uint8Array) => encodeEnvelope({ topic, publisherId: 1n, sequence: 1n, publishedAtMs: 1n, payload });
    const good = encodeRouterEventMsgpack(valid);
    expect(code(decodeEventPlaneMessage(env('kv-events', good)))).toBe('ok');
    expect(code(decodeEventPlaneMessage(env('kv-eventz', good)))).toBe('unknown_variant');
    const bad = decodeEventPlaneMessage(env('kv-events', good.subarray(0, 10)));
    expect(code(bad)).toBe('truncated');
    expect(bad.ok ? '' : bad.reason).toMatch(/^payload \(kv-events\)/);
    expect(code(decodeActiveSequenceEvents(hexBytes(map(1), s('events'), arr(0))))).toBe('ok');
  });

  it('inputs of the wrong JS type are rejected, not thrown', () => {
    expect(code(decodeRouterEventMsgpack('{}' as unknown as Uint8Array))).toBe('wrong_type');
    expect(code(decodeRouterEventJson(42 as unknown as string))).toBe('wrong_type');
    expect(code(decodeRouterEventMsgpack(new Uint8Array(0)))).toBe('truncated');
    expect(code(decodeEventPlaneMessage(new Uint8Array(1), { topic: 5 as unknown as string }))).toBe('wrong_type');
    expect(code(decodeEnvelope(null as unknown as Uint8Array))).toBe('wrong_type');
    expect(sniffMessage(undefined as unknown as Uint8Array)).toBeUndefined();
  });
});

describe('JSON rejections', () => {
  const ok = '{"worker_id":1,"event":{"event_id":1,"data":{"removed":{"block_hashes":[HASH]}}}}';
  const withHash = (h: string) => ok.replace('HASH', h);

  it('accepts exactly [-2^63, 2^64) for u64 fields', () => {
    expect(code(decodeRouterEventJson(withHash('18446744073709551615')))).toBe('ok');
    expect(code(decodeRouterEventJson(withHash('-9223372036854775808')))).toBe('ok');
    expect(code(decodeRouterEventJson(withHash('18446744073709551616')))).toBe('out_of_range');
    expect(code(decodeRouterEventJson(withHash('-9223372036854775809')))).toBe('out_of_range');
    expect(code(decodeRouterEventJson(withHash('1'.repeat(5000))))).toBe('out_of_range');
  });

  it('floats, strings and nulls where a hash belongs are wrong_type', () => {
    expect(code(decodeRouterEventJson(withHash('1.0')))).toBe('wrong_type');
    expect(code(decodeRouterEventJson(withHash('1e3')))).toBe('wrong_type');
    expect(code(decodeRouterEventJson(withHash('"1"')))).toBe('wrong_type');
    expect(code(decodeRouterEventJson(withHash('null')))).toBe('wrong_type');
  });

  it('syntax errors, truncation, duplicates, depth', () => {
    expect(code(decodeRouterEventJson(ok.replace('HASH', '1').slice(0, 30)))).toBe('truncated');
    expect(code(decodeRouterEventJson('{"worker_id":1,}'))).toBe('malformed');
    expect(code(decodeRouterEventJson('{"worker_id":01}'))).toBe('malformed');
    expect(code(decodeRouterEventJson('{"worker_id":1,"worker_id":2}'))).toBe('malformed');
    expect(code(decodeRouterEventJson(`${withHash('1')} x`))).toBe('malformed');
    expect(code(decodeRouterEventJson(Uint8Array.of(0x7b, 0xff, 0x7d)))).toBe('malformed');
    expect(code(decodeRouterEventJson('['.repeat(10_000)))).toBe('too_large');
    expect(code(decodeRouterEventJson('"cleared"'))).toBe('wrong_type');
    expect(code(decodeRouterEventJson(''))).toBe('truncated');
  });

  it('a __proto__ key is plain data, not a prototype', () => {
    const r = decodeRouterEventJson('{"__proto__":{"event":1},"worker_id":1,"event":{"event_id":1,"data":"cleared"}}');
    expect(code(r)).toBe('ok');
    expect(({} as Record<string, unknown>).event).toBeUndefined();
  });
});

describe('random input never throws', () => {
  const decoders = [
    (b: Uint8Array) => decodeRouterEventMsgpack(b),
    (b: Uint8Array) => decodeRouterEventJson(b),
    (b: Uint8Array) => decodeActiveLoad(b),
    (b: Uint8Array) => decodeActiveSequenceEvents(b),
    (b: Uint8Array) => decodeEnvelope(b),
    (b: Uint8Array) => decodeEventPlaneMessage(b),
  ];

  it('random bytes give a Result with a known code', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        for (const d of decoders) {
          const r = d(bytes);
          if (!r.ok) expect(WIRE_ERROR_CODES).toContain(r.code);
        }
        expect(() => sniffMessage(bytes)).not.toThrow();
      }),
      { seed: 1234, numRuns: 1500 },
    );
  });

  it('random mutations of valid messages give a Result, and the decoder still works afterwards', () => {
    const base = encodeRouterEventMsgpack(valid);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(base.length - 1), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 }), (edits) => {
        const b = Uint8Array.from(base);
        for (const [i, v] of edits) b[i] = v;
        const r = decodeRouterEventMsgpack(b);
        if (!r.ok) expect(WIRE_ERROR_CODES).toContain(r.code);
        expect(decodeRouterEventMsgpack(base)).toEqual({ ok: true, value: valid });
      }),
      { seed: 4321, numRuns: 1000 },
    );
  });

  it('random JSON-ish text gives a Result', () => {
    const alphabet = fc.constantFrom(...'{}[]":,0123456789-.eE truefalsn\\u'.split(''));
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 120 }).map((a) => a.join('')), (text) => {
        const r = decodeRouterEventJson(text);
        if (!r.ok) expect(WIRE_ERROR_CODES).toContain(r.code);
      }),
      { seed: 99, numRuns: 1500 },
    );
  });
});
