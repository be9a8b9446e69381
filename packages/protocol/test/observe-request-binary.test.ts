import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeObserveRequestBinary,
  isObserveRequestBinary,
  observeRequestCodec,
  type DecodeResult,
  type ObserveRequest,
} from '@vantage/protocol';
import { observeRequestBinaryToWire } from '../src/observe-request-binary';

// The binary observe request carries what the JSON one does. Whatever the bytes, decoding them
// must give what the JSON codec gives for the same request (value or rejection), and nothing may throw.

const show = (r: DecodeResult<unknown> | null): string =>
  JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof BigUint64Array || v instanceof Uint32Array ? [...v].map(String) : v));

/**
 * The JSON form's verdict: the wire object with the local hashes written into it as the JSON
 * request carries them (base64, which the schema then checks), through the schema and conversion.
 * The decoder instead leaves the list out of the schema's sight; this says that changes nothing.
 */
function asJson(data: Uint8Array): DecodeResult<ObserveRequest> {
  const w = observeRequestBinaryToWire(data);
  if (!w.ok) return { ok: false, code: 'malformed_binary', reason: w.reason };
  if (w.localHashes !== null) {
    const prompt = w.wire.prompt as Record<string, unknown>;
    expect(prompt.localHashesLe64).toBe('');
    prompt.localHashesLe64 = Buffer.from(w.localHashes.buffer, w.localHashes.byteOffset, w.localHashes.byteLength).toString('base64');
  }
  return observeRequestCodec.fromWire(w.wire);
}

const local = (...xs: bigint[]): ObserveRequest['prompt'] => ({ kind: 'local_hashes', localHashes: BigUint64Array.from(xs), loraName: null });

const samples: [string, ObserveRequest][] = [
  ['local hashes, every reply option', { requestId: 'route-1', prompt: local(0n, 1n, 0xffff_ffff_ffff_ffffn, 1n << 63n), promptTokens: 300, workers: 'choice', replyEncoding: 'binary' }],
  ['no request id, all workers, JSON reply', { requestId: null, prompt: local(5n), promptTokens: 64 }],
  ['an empty prompt', { requestId: null, prompt: local(), promptTokens: 0, replyEncoding: 'binary' }],
  ['a non-ASCII request id and a LoRA name', { requestId: 'réq-☃', prompt: { kind: 'local_hashes', localHashes: BigUint64Array.of(9n), loraName: 'adapter-ü' }, promptTokens: 16 }],
  ['an empty LoRA name', { requestId: 'x', prompt: { kind: 'local_hashes', localHashes: BigUint64Array.of(9n), loraName: '' }, promptTokens: 16 }],
  ['token ids', { requestId: 'r', prompt: { kind: 'token_ids', tokenIds: Uint32Array.of(0, 1, 4_294_967_295), loraName: null }, promptTokens: 3, workers: 'all', replyEncoding: 'json' }],
  ['token ids with a LoRA name', { requestId: null, prompt: { kind: 'token_ids', tokenIds: Uint32Array.of(7, 8), loraName: 'l' }, promptTokens: 2, replyEncoding: 'binary' }],
  ['the largest promptTokens', { requestId: null, prompt: local(1n), promptTokens: Number.MAX_SAFE_INTEGER }],
  ['a request id of 256 characters', { requestId: 'a'.repeat(256), prompt: local(1n), promptTokens: 1 }],
];

describe('binary observe request', () => {
  it.each(samples)('%s: decodes to what the JSON form decodes to', (_name, r) => {
    const bin = encodeObserveRequestBinary(r);
    expect(isObserveRequestBinary(bin)).toBe(true);
    const json = observeRequestCodec.decode(observeRequestCodec.encode(r));
    expect(json.ok).toBe(true);
    expect(show(observeRequestCodec.decode(bin))).toBe(show(json));
    expect(show(asJson(bin))).toBe(show(json));
  });

  it('is smaller than the JSON request for a 32k-token prompt', () => {
    const r: ObserveRequest = { requestId: 'route-1', prompt: local(...Array.from({ length: 512 }, (_, i) => BigInt(i) * 0x9e37_79b9_7f4a_7c15n)), promptTokens: 32_768, replyEncoding: 'binary' };
    expect(encodeObserveRequestBinary(r).length).toBe(24 + 512 * 8 + 7);
    expect(observeRequestCodec.encode(r).length).toBeGreaterThan(5_400);
  });

  it('reads a message at any byte offset (NATS hands out views of its read buffer)', () => {
    const bin = encodeObserveRequestBinary(samples[0]![1]);
    for (let off = 1; off < 8; off++) {
      const host = new Uint8Array(bin.length + off);
      host.set(bin, off);
      expect(show(observeRequestCodec.decode(host.subarray(off)))).toBe(show(observeRequestCodec.decode(bin)));
    }
  });

  it('refuses to write an empty request id (its length 0 means absent)', () => {
    expect(() => encodeObserveRequestBinary({ requestId: '', prompt: local(1n), promptTokens: 1 })).toThrow(/must not be empty/);
  });

  describe('rejections', () => {
    const base = encodeObserveRequestBinary({ requestId: 'abc', prompt: local(1n, 2n), promptTokens: 128, replyEncoding: 'binary' });
    const edit = (f: (b: Buffer) => void, bytes: Uint8Array = base): Buffer => {
      const b = Buffer.from(bytes);
      f(b);
      return b;
    };
    const cases: [string, Uint8Array, string, RegExp][] = [
      ['an unknown flag', edit((b) => b.writeUInt32LE(0x12, 4)), 'malformed_binary', /unknown flags 0x10/],
      ['LoRA bytes without the flag', edit((b) => b.writeUInt16LE(1, 22), Buffer.concat([base, Buffer.from('x')])), 'malformed_binary', /without the loraName flag/],
      ['a count past the end', edit((b) => b.writeUInt32LE(3, 16)), 'malformed_binary', /header describes/],
      ['a trailing byte', Buffer.concat([base, Buffer.of(0)]), 'malformed_binary', /header describes/],
      ['a request id that is not UTF-8', edit((b) => (b[b.length - 1] = 0xff)), 'malformed_binary', /not valid UTF-8/],
      ['promptTokens NaN', edit((b) => b.writeDoubleLE(NaN, 8)), 'schema_violation', /promptTokens/],
      ['promptTokens negative', edit((b) => b.writeDoubleLE(-1, 8)), 'schema_violation', /promptTokens/],
      ['promptTokens with a fraction', edit((b) => b.writeDoubleLE(1.5, 8)), 'schema_violation', /promptTokens/],
      ['promptTokens above 2^53-1', edit((b) => b.writeDoubleLE(2 ** 53, 8)), 'schema_violation', /promptTokens/],
      ['a request id of 257 characters', encodeObserveRequestBinary({ requestId: 'a'.repeat(257), prompt: local(1n), promptTokens: 1 }), 'schema_violation', /requestId/],
      ['a LoRA name of 257 characters', encodeObserveRequestBinary({ requestId: null, prompt: { kind: 'local_hashes', localHashes: BigUint64Array.of(1n), loraName: 'é'.repeat(257) }, promptTokens: 1 }), 'schema_violation', /loraName/],
    ];
    it.each(cases)('%s', (_name, bytes, code, reason) => {
      const r = observeRequestCodec.decode(bytes);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.code).toBe(code);
        expect(r.reason).toMatch(reason);
      }
      expect(show(asJson(bytes))).toBe(show(r));
    });

    it('more hashes than the JSON form may carry', () => {
      const n = 131_073;
      const bytes = encodeObserveRequestBinary({ requestId: null, prompt: { kind: 'local_hashes', localHashes: new BigUint64Array(n), loraName: null }, promptTokens: n * 16 });
      const r = observeRequestCodec.decode(bytes);
      expect(r.ok === false && r.code).toBe('schema_violation');
      const ok = observeRequestCodec.decode(encodeObserveRequestBinary({ requestId: null, prompt: { kind: 'local_hashes', localHashes: new BigUint64Array(n - 1), loraName: null }, promptTokens: n * 16 }));
      expect(ok.ok).toBe(true);
    });

    it('larger than the payload limit', () => {
      const r = observeRequestCodec.decode(base, base.length - 1);
      expect(r.ok === false && r.code).toBe('payload_too_large');
    });

    it('every truncation is rejected, never thrown', () => {
      for (let n = 0; n < base.length; n++) {
        const r = observeRequestCodec.decode(base.subarray(0, n));
        expect(r.ok).toBe(false);
        // Under four bytes there is no magic: those go to the JSON decoder.
        if (!r.ok) expect(r.code).toBe(n < 4 ? 'malformed_json' : 'malformed_binary');
      }
    });
  });

  it('decodes mutated requests as their JSON form is decoded, and never throws (property)', () => {
    const seeds = samples.map(([, r]) => encodeObserveRequestBinary(r));
    // Mutations must leave some requests acceptable, or the agreement on accepted values is not tested.
    let accepted = 0;
    fc.assert(
      fc.property(fc.nat(seeds.length - 1), fc.array(fc.tuple(fc.nat(), fc.nat(255)), { minLength: 1, maxLength: 4 }), fc.nat(7), (k, edits, shift) => {
        // At every offset mod 8 of its buffer (NATS hands out views of its read buffer).
        const seed = seeds[k]!;
        const b = new Uint8Array(new ArrayBuffer(seed.length + 8), shift, seed.length);
        b.set(seed);
        for (const [at, v] of edits) b[4 + (at % (b.length - 4))] = v;
        const r = observeRequestCodec.decode(b);
        if (r.ok) accepted++;
        expect(show(r)).toBe(show(asJson(b)));
      }),
      { numRuns: 3000 },
    );
    expect(accepted).toBeGreaterThan(100);
  });
});
