import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bookingEventCodec, observeRequestCodec, type DecodeResult } from '@vantage/protocol';

// The byte decoders take a fast path for `*Le64` lists (cut out of the bytes, the rest parsed
// alone); a string input takes the plain codec. Whatever the bytes, both must agree: same value,
// or the same rejection.

const enc = new TextEncoder();
const b64 = (xs: bigint[]): string => Buffer.from(BigUint64Array.from(xs).buffer).toString('base64');
const A = b64([1n, 2n, 0xffff_ffff_ffff_ffffn]);
const B = b64([7n, 1n << 63n]);

const show = (r: DecodeResult<unknown>): string =>
  JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof BigUint64Array || v instanceof Uint32Array ? [...v].map(String) : v));

function agree(codec: { decode(d: Uint8Array | string): DecodeResult<unknown> }, text: string): DecodeResult<unknown> {
  const fast = codec.decode(enc.encode(text));
  expect(show(fast)).toBe(show(codec.decode(text)));
  return fast;
}

describe('*Le64 fast path agrees with the plain codec', () => {
  const observe: [string, string][] = [
    ['as encoders write it', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"replyEncoding":"binary"}`],
    ['with spaces around the colon', `{"v":1,"prompt":{"localHashesLe64" : "${A}"},"promptTokens":48}`],
    ['the key name inside the request id', `{"v":1,"requestId":"localHashesLe64","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['an escaped quote and the key pattern inside the request id', `{"v":1,"requestId":"a\\"localHashesLe64\\":\\"${B}","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['an unknown top-level field of the same name first', `{"v":1,"localHashesLe64":"${B}","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['the same key twice in the prompt', `{"v":1,"prompt":{"localHashesLe64":"${A}","localHashesLe64":"${B}"},"promptTokens":48}`],
    ['the same key twice, the second spelled with an escape and empty', `{"v":1,"prompt":{"localHashesLe64":"${A}","\\u006cocalHashesLe64":""},"promptTokens":48}`],
    ['the same key twice, the second with spaces and empty', `{"v":1,"prompt":{"localHashesLe64":"${A}","localHashesLe64" : ""},"promptTokens":48}`],
    ['an escaped slash inside the list', `{"v":1,"prompt":{"localHashesLe64":"${A.replace('/', '\\/')}"},"promptTokens":48}`],
    ['non-canonical base64 (unused bits set)', `{"v":1,"prompt":{"localHashesLe64":"AQAAAAAAAAB="},"promptTokens":8}`],
    ['a list that is not whole u64s', `{"v":1,"prompt":{"localHashesLe64":"AAAA"},"promptTokens":8}`],
    ['an empty list', `{"v":1,"prompt":{"localHashesLe64":""},"promptTokens":0}`],
    ...['====', 'AA==', 'AAAAAAAAAAA=', 'AAAAAAAAAAB=', 'AAAAAAAAAA==', 'AAAAAAAA=AA=', 'AAAA AAAAAA=', 'AAAAAAAAAAA', '-_AAAAAAAAA=', 'AAAAAAAAAAAAAAAAAAAAAA=='].map(
      (v): [string, string] => [`the list ${v}`, `{"v":1,"prompt":{"localHashesLe64":"${v}"},"promptTokens":8}`],
    ),
    ['an unterminated list', `{"v":1,"prompt":{"localHashesLe64":"${A}`],
    ['token ids and a LoRA named like the key', `{"v":1,"prompt":{"tokenIds":[1,2,3],"loraName":"localHashesLe64"},"promptTokens":3}`],
    ['the key with a number value', `{"v":1,"prompt":{"localHashesLe64":5},"promptTokens":3}`],
    ['a schema violation elsewhere', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":-1}`],
    ['a newer version', `{"v":2,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
  ];
  it.each(observe)('observe request: %s', (_name, text) => {
    agree(observeRequestCodec, text);
  });
  it('decodes the encoder output exactly', () => {
    const r = agree(observeRequestCodec, observe[0]![1]);
    expect(r.ok && r.value).toMatchObject({ prompt: { kind: 'local_hashes', localHashes: BigUint64Array.from([1n, 2n, 0xffff_ffff_ffff_ffffn]) } });
  });

  const head = `"v":1,"requestId":"r","sessionId":"s","pool":"p","workerId":"18446744073709551615","dpRank":0,"promptTokens":48,"overlapBlocks":0,"atMs":1`;
  const booking: [string, string][] = [
    ['sequence hashes', `{${head},"sequenceHashesLe64":"${A}"}`],
    ['local hashes', `{${head},"localHashesLe64":"${B}"}`],
    ['both forms (refused by the schema)', `{${head},"sequenceHashesLe64":"${A}","localHashesLe64":"${B}"}`],
    ['sequence hashes twice', `{${head},"sequenceHashesLe64":"${A}","sequenceHashesLe64":"${B}"}`],
    ['no hashes', `{${head}}`],
  ];
  it.each(booking)('booking: %s', (_name, text) => {
    agree(bookingEventCodec, text);
  });
});

describe('observe requests in the encoders\' own bytes, and near misses of them', () => {
  const cases: [string, string][] = [
    ['promptTokens 0', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":0}`],
    ['promptTokens 2^53-1', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":9007199254740991}`],
    ['promptTokens 2^53', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":9007199254740992}`],
    ['promptTokens with 20 digits', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":12345678901234567890}`],
    ['promptTokens with a leading zero', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":048}`],
    ['promptTokens 48.0', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48.0}`],
    ['promptTokens 4.8e1', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":4.8e1}`],
    ['promptTokens missing', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":}`],
    ['workers choice, binary', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"workers":"choice","replyEncoding":"binary"}`],
    ['workers choice, JSON', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"workers":"choice"}`],
    ['workers all written out', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"workers":"all"}`],
    ['replyEncoding json written out', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"replyEncoding":"json"}`],
    ['trailing bytes', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48}}`],
    ['trailing space', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48} `],
    ['a truncated tail', `{"v":1,"prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"replyEncoding":"binary"`],
    ['a byte of the list not base64', `{"v":1,"prompt":{"localHashesLe64":"${A.slice(0, 3)}\u00e9${A.slice(4)}"},"promptTokens":48}`],
    // The decision service's query (encodeObserveQuery): a request id first.
    ['request id, workers choice, binary', `{"v":1,"requestId":"r-1","prompt":{"localHashesLe64":"${A}"},"promptTokens":48,"workers":"choice","replyEncoding":"binary"}`],
    ['request id of 256 characters', `{"v":1,"requestId":"${'x'.repeat(256)}","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['request id of 257 characters', `{"v":1,"requestId":"${'x'.repeat(257)}","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['empty request id', `{"v":1,"requestId":"","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['request id with an escaped quote', `{"v":1,"requestId":"a\\"b","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['request id with a tab', `{"v":1,"requestId":"a\tb","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['request id not ASCII', `{"v":1,"requestId":"é","prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
    ['request id not followed by a comma', `{"v":1,"requestId":"r""prompt":{"localHashesLe64":"${A}"},"promptTokens":48}`],
  ];
  it.each(cases)('%s', (_name, text) => {
    agree(observeRequestCodec, text);
  });

  it('agrees with the plain codec on encoder output and on every kind of mutation of it', () => {
    const msg = fc.record({
      hashes: fc.array(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), { maxLength: 40 }),
      promptTokens: fc.oneof(fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER)),
      workers: fc.constantFrom('all' as const, 'choice' as const),
      replyEncoding: fc.constantFrom('json' as const, 'binary' as const),
      requestId: fc.option(fc.oneof(fc.string({ minLength: 1, maxLength: 258 }), fc.stringMatching(/^[ -~]{1,256}$/)), { nil: null }),
    });
    const edit = fc.oneof(
      fc.record({ k: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
      fc.record({ k: fc.constant('insert' as const), at: fc.nat(), byte: fc.constantFrom(0x20, 0x22, 0x2c, 0x30, 0x31, 0x2e, 0x65, 0x7d, 0x3d, 0x41, 0x2b) }),
      fc.record({ k: fc.constant('delete' as const), at: fc.nat() }),
    );
    fc.assert(
      fc.property(msg, fc.array(edit, { maxLength: 2 }), (m, edits) => {
        const bytes = [
          ...observeRequestCodec.encode({
            requestId: m.requestId,
            prompt: { kind: 'local_hashes', localHashes: BigUint64Array.from(m.hashes), loraName: null },
            promptTokens: m.promptTokens,
            workers: m.workers,
            replyEncoding: m.replyEncoding,
          }),
        ];
        for (const e of edits) {
          const at = e.at % (bytes.length + 1);
          if (e.k === 'set') bytes[Math.min(at, bytes.length - 1)] = e.byte;
          else if (e.k === 'insert') bytes.splice(at, 0, e.byte);
          else bytes.splice(at, 1);
        }
        const data = Uint8Array.from(bytes);
        const text = Buffer.from(data).toString('utf8');
        // The plain codec's verdict on the same bytes (a string input skips every fast path; bytes that are not UTF-8 are malformed either way).
        const plain = Buffer.from(text, 'utf8').equals(data) ? show(observeRequestCodec.decode(text)) : null;
        const fast = show(observeRequestCodec.decode(data));
        if (plain !== null) expect(fast).toBe(plain);
        if (edits.length === 0) {
          const r = observeRequestCodec.decode(data);
          expect(r.ok && r.value.prompt.kind === 'local_hashes' ? [...r.value.prompt.localHashes] : null).toEqual(m.hashes);
        }
      }),
      { seed: 0x7e4, numRuns: 2000 },
    );
  });
});
