import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Le64Scratch,
  decodeObserveRequestReusing,
  encodeObserveRequestBinary,
  isObserveRequestBinary,
  observeRequestCodec,
  type DecodeResult,
  type ObserveRequest,
} from '@vantage/protocol';
import { ObserveRequestHot, decodeObserveRequestHot, observeRequestBinaryFast, observeRequestBinaryToWire } from '../src/observe-request-binary';

// The binary observe request carries what the JSON one does. Whatever the bytes, decoding them
// must give what the JSON codec gives for the same request (value or rejection), the fast path
// must agree with the general one, and nothing may throw.

const show = (r: DecodeResult<unknown> | null): string =>
  JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof BigUint64Array || v instanceof Uint32Array ? [...v].map(String) : v));

/** The general path: wire object, then the JSON codec's schema validation and conversion. */
function general(data: Uint8Array): DecodeResult<ObserveRequest> {
  const w = observeRequestBinaryToWire(data);
  return w.ok ? observeRequestCodec.fromWire(w.wire) : { ok: false, code: 'malformed_binary', reason: w.reason };
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
    expect(show(decodeObserveRequestReusing(bin, new Le64Scratch()))).toBe(show(json));
    expect(show(general(bin))).toBe(show(json));
  });

  it('is smaller than the JSON request for a 32k-token prompt', () => {
    const r: ObserveRequest = { requestId: 'route-1', prompt: local(...Array.from({ length: 512 }, (_, i) => BigInt(i) * 0x9e37_79b9_7f4a_7c15n)), promptTokens: 32_768, replyEncoding: 'binary' };
    expect(encodeObserveRequestBinary(r).length).toBe(24 + 512 * 8 + 7);
    expect(observeRequestCodec.encode(r).length).toBeGreaterThan(5_400);
  });

  it('takes the common shape into the scratch buffer without allocating the hashes', () => {
    const scratch = new Le64Scratch();
    const a = decodeObserveRequestReusing(encodeObserveRequestBinary(samples[0]![1]), scratch);
    expect(a.ok && a.value.prompt.kind === 'local_hashes' && a.value.prompt.localHashes.buffer).toBe(scratch.hashes.buffer);
    // A second request overwrites the first one's hashes in place.
    const b = decodeObserveRequestReusing(encodeObserveRequestBinary({ requestId: null, prompt: local(42n, 43n), promptTokens: 128 }), scratch);
    expect(b.ok && b.value.prompt.kind === 'local_hashes' && [...b.value.prompt.localHashes]).toEqual([42n, 43n]);
    expect(b.ok && b.value.prompt.kind === 'local_hashes' && b.value.prompt.localHashes.buffer).toBe(scratch.hashes.buffer);
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
      expect(show(decodeObserveRequestReusing(bytes, new Le64Scratch()))).toBe(show(r));
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

  it('fast path and general path agree on mutated requests (property)', () => {
    const seeds = samples.map(([, r]) => encodeObserveRequestBinary(r));
    // Mutations that leave the common shape intact must reach the fast path, or its agreement is not tested.
    let fastHits = 0;
    fc.assert(
      fc.property(fc.nat(seeds.length - 1), fc.array(fc.tuple(fc.nat(), fc.nat(255)), { minLength: 1, maxLength: 4 }), (k, edits) => {
        const b = Buffer.from(seeds[k]!);
        for (const [at, v] of edits) b[4 + (at % (b.length - 4))] = v;
        const fast = observeRequestBinaryFast(b, new Le64Scratch());
        const slow = general(b);
        if (fast !== null) {
          fastHits++;
          expect(show(fast)).toBe(show(slow));
        }
        expect(show(observeRequestCodec.decode(b))).toBe(show(slow));
        expect(show(decodeObserveRequestReusing(b, new Le64Scratch()))).toBe(show(slow));
      }),
      { numRuns: 3000 },
    );
    expect(fastHits).toBeGreaterThan(100);
  });

  it('the hot decoder takes exactly what the fast path takes, with the same values, aligned or not (property)', () => {
    const seeds = samples.map(([, r]) => encodeObserveRequestBinary(r));
    const hot = new ObserveRequestHot();
    const taken = [0, 0];
    fc.assert(
      fc.property(fc.nat(seeds.length - 1), fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 3 }), fc.nat(7), (k, edits, shift) => {
        // The message at every offset mod 8 of its buffer: views in place when aligned, copies otherwise.
        const seed = seeds[k]!;
        const b = new Uint8Array(new ArrayBuffer(seed.length + 8), shift, seed.length);
        b.set(seed);
        for (const [at, v] of edits) b[4 + (at % (b.length - 4))] = v;
        const fast = observeRequestBinaryFast(b, new Le64Scratch());
        const took = decodeObserveRequestHot(b, hot, 8 * 1024 * 1024);
        expect(took).toBe(fast !== null);
        if (fast === null || fast.value.prompt.kind !== 'local_hashes') return;
        taken[(b.byteOffset + 24) % 8 === 0 ? 0 : 1]!++;
        expect([...hot.localHashes]).toEqual([...fast.value.prompt.localHashes]);
        expect(hot.promptTokens).toBe(fast.value.promptTokens);
        expect(hot.workers).toBe(fast.value.workers ?? 'all');
        expect(hot.replyEncoding).toBe(fast.value.replyEncoding ?? 'json');
        expect(decodeObserveRequestHot(b, hot, b.length - 1)).toBe(false);
      }),
      { numRuns: 3000 },
    );
    expect(Math.min(...taken)).toBeGreaterThan(30);
    // The request id's bytes at the edges of printable ASCII (random edits seldom land there).
    const withId = encodeObserveRequestBinary(samples[0]![1]);
    const idAt = withId.length - 'route-1'.length;
    for (const v of [0x00, 0x1f, 0x20, 0x7e, 0x7f, 0x80, 0xff]) {
      const b = Buffer.from(withId);
      b[idAt + 3] = v;
      expect([v, decodeObserveRequestHot(b, hot, 1 << 20)]).toEqual([v, observeRequestBinaryFast(b, new Le64Scratch()) !== null]);
    }
  });
});
