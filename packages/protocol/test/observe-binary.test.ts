import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  bookingEventCodec,
  encodeObserveReplyBinary,
  isObserveReplyBinary,
  observeReplyCodec,
  observeRequestCodec,
  type DecodeResult,
  type ObserveReply,
} from '@vantage/protocol';
import { bookingEvent, observeReply, observeRequest } from './fixtures';
import { writeMetaJson } from '../src/observe-binary';

const enc = new TextEncoder();
const emptyReply: ObserveReply = { ...observeReply, workers: [], pending: null, dynamoChoice: null, snapshotRestoredAtMs: null };
/** Every nullable fact null, a suspect flag, a reported load with nulls inside. */
const sparseReply: ObserveReply = {
  ...observeReply,
  snapshotRestoredAtMs: null,
  workers: [
    ...observeReply.workers,
    {
      ...observeReply.workers[0]!,
      workerId: 7n as never,
      dpRank: 0xffff_ffff,
      schedulable: false,
      hostOverlapBlocks: null,
      diskOverlapBlocks: null,
      anyTierOverlapBlocks: null,
      P: null,
      maxNumBatchedTokens: null,
      totalKvBlocks: null,
      reported: { activeDecodeBlocks: null, activePrefillTokens: 3, kvUsedBlocks: null },
      suspect: { reason: 'unknown_parent', sinceMs: 5 },
      ages: { indexMs: null, loadMs: 0.5, bookingMs: null },
      dynamoCost: null,
    },
  ],
};

/** Reply k with 64 workers (R tells them apart); `suspect`: each with a distinct long suspect reason. */
function replyOf64(k: number, suspect: boolean): ObserveReply {
  return {
    ...observeReply,
    atMs: k,
    workers: Array.from({ length: 64 }, (_, i) => ({
      ...observeReply.workers[0]!,
      dpRank: i,
      R: k * 1000 + i,
      suspect: suspect ? { reason: `r_${i}_${'x'.repeat(55)}`, sinceMs: k } : null,
    })),
  };
}

describe('binary observe reply', () => {
  it.each([
    ['full', observeReply],
    ['empty', emptyReply],
    ['sparse', sparseReply],
  ] as const)('%s: decodes to exactly what the JSON encoding decodes to', (_n, reply) => {
    const bin = encodeObserveReplyBinary(reply);
    expect(isObserveReplyBinary(bin)).toBe(true);
    expect(isObserveReplyBinary(observeReplyCodec.encode(reply))).toBe(false);
    const fromBin = observeReplyCodec.decode(bin);
    expect(fromBin).toEqual({ ok: true, value: reply });
    expect(fromBin).toEqual(observeReplyCodec.decode(observeReplyCodec.encode(reply)));
    // From an unaligned view (message buffers rarely start on an 8-byte boundary).
    const shifted = new Uint8Array(bin.length + 3);
    shifted.set(bin, 3);
    expect(observeReplyCodec.decode(shifted.subarray(3))).toEqual(fromBin);
    // A Node Buffer at an odd offset, as NATS delivers message data.
    const pooled = Buffer.alloc(bin.length + 5);
    pooled.set(bin, 5);
    expect(observeReplyCodec.decode(pooled.subarray(5))).toEqual(fromBin);
  });

  it('keeps every reply intact while later ones are written (each is its own copy), and with a long trailing JSON', () => {
    // Every 50th reply: 64 distinct long suspect reasons, a trailing JSON over the scratch's reserve.
    const replies: ObserveReply[] = Array.from({ length: 300 }, (_, k) => replyOf64(k, k % 50 === 7));
    const bins = replies.map((r) => encodeObserveReplyBinary(r));
    expect(new Set(bins.map((b) => b.buffer)).size).toBeGreaterThan(1);
    bins.forEach((b, k) => {
      expect(b.byteOffset % 8).toBe(0);
      expect(observeReplyCodec.decode(b)).toEqual({ ok: true, value: replies[k] });
    });
  });

  it('grows its scratch for a trailing JSON longer than the scratch', () => {
    const params = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`term_${i}`, i / 4]));
    const reply: ObserveReply = { ...observeReply, dynamoChoice: { ...observeReply.dynamoChoice!, policy: { name: 'wide', params } } };
    const bin = encodeObserveReplyBinary(reply);
    expect(bin.length).toBeGreaterThan(128 * 1024);
    expect(observeReplyCodec.decode(bin)).toEqual({ ok: true, value: reply });
    expect(observeReplyCodec.decode(encodeObserveReplyBinary(observeReply))).toEqual({ ok: true, value: observeReply });
  });

  it('is smaller than the JSON for a pool of 64 workers', () => {
    const big: ObserveReply = { ...observeReply, workers: Array.from({ length: 64 }, (_, i) => ({ ...observeReply.workers[0]!, dpRank: i })) };
    expect(encodeObserveReplyBinary(big).length).toBeLessThan(observeReplyCodec.encode(big).length / 2);
  });

  it('refuses broken framing as malformed_binary and bad values as the schema does', () => {
    const bin = encodeObserveReplyBinary(observeReply);
    const code = (r: DecodeResult<unknown>): string => (r.ok ? 'ok' : r.code);
    expect(code(observeReplyCodec.decode(bin.subarray(0, bin.length - 1)))).toBe('malformed_binary');
    expect(code(observeReplyCodec.decode(bin.subarray(0, 40)))).toBe('malformed_binary');
    expect(code(observeReplyCodec.decode(Uint8Array.of(0x56, 0x4f, 0x52, 0x01)))).toBe('malformed_binary');
    expect(code(observeReplyCodec.decode(bin, 100))).toBe('payload_too_large');
    // A fractional K is the same schema violation as in JSON.
    const bad: ObserveReply = { ...observeReply, workers: [{ ...observeReply.workers[0]!, K: 1.5 }] };
    const r = observeReplyCodec.decode(encodeObserveReplyBinary(bad));
    expect(r.ok ? '' : `${r.code} ${r.reason}`).toContain('schema_violation /workers/0/K');
    expect(observeReplyCodec.decode(observeReplyCodec.encode(bad))).toEqual(r);
    // Garbage never throws.
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (tail) => {
        const bytes = new Uint8Array(4 + tail.length);
        bytes.set([0x56, 0x4f, 0x52, 0x01]);
        bytes.set(tail, 4);
        expect(observeReplyCodec.decode(bytes).ok).toBe(false);
      }),
      { seed: 7, numRuns: 300 },
    );
  });
});

describe('writeMetaJson (the trailing JSON written as bytes)', () => {
  // Dyadic fractions (Dynamo's cost terms are mostly such: tokens over a power-of-two block size,
  // quarter weights) take a fast path that must agree with JSON.stringify, on both sides of its limits.
  const dyadic = fc.tuple(fc.integer({ min: -(2 ** 50), max: 2 ** 50 }), fc.integer({ min: 0, max: 14 })).map(([m, k]) => m / 2 ** k);
  const num = fc.oneof(
    fc.double(),
    fc.integer(),
    fc.maxSafeInteger(),
    dyadic,
    dyadic,
    fc.constantFrom(0, -0, NaN, Infinity, -Infinity, 1e21, 1e-7, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53 + 2, 10, 100, 999, 2 ** -10, -(2 ** -10), 2 ** 40 - 2 ** -10, 2 ** 40 + 0.5, 123456.0009765625, 99999.75, 0.1),
  );
  const meta = fc.tuple(fc.string(), fc.option(fc.record({ name: fc.string(), params: fc.dictionary(fc.string(), num) })), fc.array(fc.string(), { maxLength: 3 }));

  it('writes the UTF-8 bytes of JSON.stringify, and nothing outside them', () => {
    fc.assert(
      fc.property(meta, fc.nat(16), ([pool, policy, reasons], at) => {
        const want = Buffer.from(JSON.stringify({ pool, policy, reasons }), 'utf8');
        const out = new Uint8Array(at + want.length + 64).fill(0xee);
        const n = writeMetaJson(out, at, out.length, pool, policy, reasons);
        expect(n).toBe(want.length);
        expect(Buffer.from(out.subarray(at, at + n)).equals(want)).toBe(true);
        expect(out.subarray(0, at).every((b) => b === 0xee)).toBe(true);
        expect(out.subarray(at + n).every((b) => b === 0xee)).toBe(true);
      }),
      { numRuns: 2000 },
    );
    // The same parts again (from its tables now), and integer-like keys first as JSON.stringify orders them.
    const policy = { name: 'kv_router:"lowest"\u2028é', params: { b: 1.5, 2: 3, a: NaN, '1': -0, c: 1234567890123 } };
    for (let k = 0; k < 2; k++) {
      const out = new Uint8Array(512);
      const n = writeMetaJson(out, 0, out.length, 'p\n"ü', policy, ['event_gap', 'x"y']);
      expect(Buffer.from(out.subarray(0, n)).toString('utf8')).toBe(JSON.stringify({ pool: 'p\n"ü', policy, reasons: ['event_gap', 'x"y'] }));
    }
  });

  it('answers -1 when the bytes do not fit before the end, and writes nothing past it', () => {
    fc.assert(
      fc.property(meta, fc.nat(200), ([pool, policy, reasons], short) => {
        const want = Buffer.byteLength(JSON.stringify({ pool, policy, reasons }), 'utf8');
        const end = Math.max(0, want - 1 - short);
        const out = new Uint8Array(want + 64).fill(0xee);
        expect(writeMetaJson(out, 0, end, pool, policy, reasons)).toBe(-1);
        expect(out.subarray(end).every((b) => b === 0xee)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('hash-list fast path (canonical *Le64 strings are not scanned by the schema)', () => {
  /** The codec's own verdict: fromWire on the parsed JSON, which validates the bulk with the schema. */
  const slow = <T>(codec: { fromWire(j: unknown): DecodeResult<T> }, text: string): DecodeResult<T> => codec.fromWire(JSON.parse(text));

  it('accepts and rejects observe requests exactly as the schema path does', () => {
    const base = JSON.parse(new TextDecoder().decode(observeRequestCodec.encode(observeRequest))) as { prompt: Record<string, unknown> };
    const variants: unknown[] = [
      base,
      { ...base, prompt: { ...base.prompt, localHashesLe64: '' } },
      { ...base, prompt: { ...base.prompt, localHashesLe64: 'AAAAAAAAAAA' } }, // 8 bytes, unpadded: not canonical, still pattern-valid
      { ...base, prompt: { ...base.prompt, localHashesLe64: 'AAAAAAAAAAA=' } }, // canonical: 8 zero bytes
      { ...base, prompt: { ...base.prompt, localHashesLe64: 'AAAA*AAAAAA=' } },
      { ...base, prompt: { ...base.prompt, localHashesLe64: Buffer.alloc(7).toString('base64') } },
      { ...base, prompt: { ...base.prompt, localHashesLe64: 5 } },
      { ...base, prompt: { ...base.prompt, tokenIds: [1] } },
      { ...base, prompt: 'x' },
      { ...base, promptTokens: -1 },
      { ...base, v: 2 },
      { ...base, requestId: 'é' },
      { ...base, replyEncoding: 'binary' },
      { ...base, replyEncoding: 'xml' },
    ];
    for (const v of variants) {
      const text = JSON.stringify(v);
      expect(observeRequestCodec.decode(enc.encode(text)), text).toEqual(slow(observeRequestCodec, text));
    }
  });

  it('accepts and rejects bookings exactly as the schema path does', () => {
    const base = JSON.parse(new TextDecoder().decode(bookingEventCodec.encode(bookingEvent))) as Record<string, unknown>;
    const { sequenceHashesLe64: seq, ...noSeq } = base;
    const variants: unknown[] = [
      base,
      noSeq,
      { ...noSeq, localHashesLe64: seq },
      { ...base, localHashesLe64: seq }, // both: refused
      { ...base, sequenceHashesLe64: 'AA==' },
      { ...base, sequenceHashesLe64: '!!!!' },
      { ...noSeq, localHashes: ['1', '2'] },
    ];
    for (const v of variants) {
      const text = JSON.stringify(v);
      expect(bookingEventCodec.decode(enc.encode(text)), text).toEqual(slow(bookingEventCodec, text));
    }
  });

  it('round-trips random hash lists', () => {
    fc.assert(
      fc.property(fc.array(fc.bigUintN(64), { maxLength: 600 }), (xs) => {
        const localHashes = BigUint64Array.from(xs);
        const r = observeRequestCodec.decode(observeRequestCodec.encode({ ...observeRequest, prompt: { kind: 'local_hashes', localHashes, loraName: null } }));
        expect(r.ok && r.value.prompt.kind === 'local_hashes' ? r.value.prompt.localHashes : null).toEqual(localHashes);
      }),
      { seed: 11, numRuns: 200 },
    );
  });
});
