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
