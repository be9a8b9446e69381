import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { routeRequestCodec, type DecodeResult, type RouteRequest } from '@vantage/protocol';

// The route request's byte decoder takes the bulk fast path (token-id arrays and `*Le64` hash lists
// cut out of the bytes, the rest parsed alone); a string input takes the plain codec. Both must
// agree: the same value when accepted, the same rejection otherwise.
const utf8 = new TextDecoder('utf-8', { fatal: true });
const decodeRouteRequest = (data: Uint8Array, maxBytes?: number): DecodeResult<RouteRequest> => routeRequestCodec.decode(data, maxBytes);

const enc = new TextEncoder();
const tokens = (n: number, seed = 1): Uint32Array => {
  const t = new Uint32Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    t[i] = i % 17 === 0 ? 0xffff_ffff : x;
  }
  return t;
};
const hashes = (n: number, seed = 3n): BigUint64Array => {
  const h = new BigUint64Array(n);
  for (let i = 0; i < n; i++) h[i] = (BigInt(i) * 0x9e3779b97f4a7c15n + seed) & 0xffff_ffff_ffff_ffffn;
  return h;
};

function req(over: Partial<RouteRequest> = {}): RouteRequest {
  return {
    requestId: 'r-1',
    sessionId: 's-1',
    stageProposal: 'efficient',
    candidates: {
      efficient: { model: 'm-8b', pool: 'eff', prompt: { kind: 'token_ids', tokenIds: tokens(300), loraName: null }, promptTokens: 300 },
      capable: { model: 'm-70b', pool: null, prompt: { kind: 'local_hashes', localHashes: hashes(18), loraName: 'lora-a' }, promptTokens: 300 },
    },
    deadlineMs: 20,
    ...over,
  };
}

/** The plain codec's answer for these bytes: their text decoded by the codec alone. */
function plain(data: Uint8Array): DecodeResult<RouteRequest> {
  let text: string;
  try {
    text = utf8.decode(data);
  } catch {
    return routeRequestCodec.decode(data); // invalid UTF-8: the fast path declines non-ASCII bytes
  }
  return routeRequestCodec.decode(text);
}

/** The fast decoder must agree with the codec: same value when accepted, same code when rejected. */
function agrees(bytes: Uint8Array | string): void {
  const data = typeof bytes === 'string' ? enc.encode(bytes) : bytes;
  const want = plain(data);
  const got = decodeRouteRequest(data);
  if (want.ok) {
    expect(got.ok).toBe(true);
    if (got.ok) expect(got.value).toEqual(want.value);
  } else {
    expect(got).toEqual(want);
  }
}

const wire = (r: RouteRequest): Record<string, any> => routeRequestCodec.toWire(r) as Record<string, any>;

describe('route request decoder', () => {
  it('decodes token ids and base64 hashes exactly', () => {
    const r = req();
    const data = routeRequestCodec.encode(r);
    const got = decodeRouteRequest(data);
    expect(got.ok).toBe(true);
    if (!got.ok) return;
    expect(got.value).toEqual(plain(data).ok && r);
  });

  it('parses identical token arrays once (same values for both candidates)', () => {
    const t = tokens(1000, 9);
    const r = req({
      candidates: {
        efficient: { model: 'a', pool: null, prompt: { kind: 'token_ids', tokenIds: t, loraName: null }, promptTokens: 1000 },
        capable: { model: 'b', pool: null, prompt: { kind: 'token_ids', tokenIds: t, loraName: null }, promptTokens: 1000 },
      },
    });
    const got = decodeRouteRequest(routeRequestCodec.encode(r));
    expect(got.ok && got.value).toEqual(r);
    if (got.ok) expect(got.value.candidates.efficient.prompt).toMatchObject({ tokenIds: t });
    // The fast path parsed them once: both candidates carry the same array (the plain codec makes two).
    const [e, c] = got.ok ? [got.value.candidates.efficient.prompt, got.value.candidates.capable.prompt] : [];
    expect(e?.kind === 'token_ids' && c?.kind === 'token_ids' && e.tokenIds === c.tokenIds).toBe(true);
  });

  it('decodes identical hash lists once (same values for both candidates)', () => {
    const h = hashes(512, 11n);
    const r = req({
      candidates: {
        efficient: { model: 'a', pool: null, prompt: { kind: 'local_hashes', localHashes: h, loraName: null }, promptTokens: 32768 },
        capable: { model: 'b', pool: null, prompt: { kind: 'local_hashes', localHashes: h, loraName: null }, promptTokens: 32768 },
      },
    });
    const got = decodeRouteRequest(routeRequestCodec.encode(r));
    expect(got.ok && got.value).toEqual(r);
    const [e, c] = got.ok ? [got.value.candidates.efficient.prompt, got.value.candidates.capable.prompt] : [];
    expect(e?.kind === 'local_hashes' && c?.kind === 'local_hashes' && e.localHashes === c.localHashes).toBe(true);
  });

  it('agrees with the codec on hand-written edge cases', () => {
    const base = wire(req());
    const text = JSON.stringify(base);
    /** The request with one candidate's prompt replaced (written as JSON). */
    const withPrompt = (role: 'efficient' | 'capable', prompt: object): string =>
      JSON.stringify({ ...base, candidates: { ...base['candidates'], [role]: { ...base['candidates'][role], prompt } } });
    const cases: string[] = [
      text,
      // whitespace everywhere the grammar allows it
      JSON.stringify(base, null, 2),
      text.replace('"tokenIds":[', '"tokenIds" :\n [ '),
      // empty token array, single zero, max u32
      withPrompt('efficient', { tokenIds: [] }),
      withPrompt('efficient', { tokenIds: [0, 4294967295] }),
      // numbers the scanner leaves to the codec: over u32, negative, fraction, exponent, leading zero
      text.replace('"tokenIds":[', '"tokenIds":[4294967296,'),
      text.replace('"tokenIds":[', '"tokenIds":[-1,'),
      text.replace('"tokenIds":[', '"tokenIds":[1.0,'),
      text.replace('"tokenIds":[', '"tokenIds":[1e3,'),
      text.replace('"tokenIds":[', '"tokenIds":[01,'),
      text.replace('"tokenIds":[', '"tokenIds":[12345678901,'),
      text.replace('"tokenIds":[', '"tokenIds":["1",'),
      text.replace('"tokenIds":[', '"tokenIds":[[1],'),
      text.replace('"tokenIds":[', '"tokenIds":[1,,'),
      text.replace(/\]/, ',]'),
      // a truncated array, a truncated message
      text.slice(0, text.indexOf('"tokenIds":[') + 40),
      text.slice(0, -1),
      // the key spelled with an escape, a string value named like the key, the key inside a string
      text.replace('"tokenIds"', '"tok\\u0065nIds"'),
      text.replace('"model":"m-8b"', '"model":"tokenIds"'),
      text.replace('"model":"m-8b"', '"model":"x\\"tokenIds\\":[1,2]"'),
      text.replace('"model":"m-8b"', '"model":"x \\"tokenIds\\":[1,2]"'),
      text.replace('"model":"m-8b"', '"model":"é \\"tokenIds\\":[1,2]"'),
      // tokenIds elsewhere (unknown members are allowed), and twice in one prompt (the last wins)
      text.replace('"requestId":', '"extra":{"tokenIds":[7,8]},"requestId":'),
      text.replace('"tokenIds":[', '"tokenIds":[5,6],"tokenIds":['),
      // tokenIds not an array; both prompt forms at once
      text.replace(/"tokenIds":\[[^\]]*\]/, '"tokenIds":"abc"'),
      text.replace('"tokenIds":[', `"localHashesLe64":"${Buffer.alloc(8).toString('base64')}","tokenIds":[`),
      // base64: without padding, bad characters, not whole u64s, whitespace
      text.replace(/("localHashesLe64":"[^"]*?)=*"/, '$1"'),
      text.replace('"localHashesLe64":"', '"localHashesLe64":"-_'),
      text.replace('"localHashesLe64":"', '"localHashesLe64":"AAAA'),
      text.replace('"localHashesLe64":"', '"localHashesLe64":" '),
      text.replace(/"localHashesLe64":"[^"]*"/, '"localHashesLe64":""'),
      text.replace(/"localHashesLe64":"[^"]*"/, '"localHashesLe64":"AAAAAAAAAAE="'),
      // decimal hashes still work
      withPrompt('capable', { localHashes: ['1', '18446744073709551615'] }),
      withPrompt('capable', { localHashes: ['18446744073709551616'] }),
      // schema violations elsewhere, wrong version, not JSON, not an object
      text.replace('"stageProposal":"efficient"', '"stageProposal":"other"'),
      text.replace('"v":1', '"v":2'),
      'nope',
      '[]',
      'null',
      '{}',
      '{"candidates":null}',
    ];
    for (const c of cases) agrees(c);
    // invalid UTF-8
    const bad = enc.encode(text);
    bad[bad.length - 3] = 0xff;
    agrees(bad);
    // over the size bound
    expect(decodeRouteRequest(enc.encode(text), 10)).toEqual(routeRequestCodec.decode(text, 10));
  });

  it('agrees with the codec on generated requests and their corruptions', () => {
    const prompt = fc.oneof(
      fc.array(fc.integer({ min: 0, max: 0xffff_ffff }), { maxLength: 200 }).map((t) => ({ kind: 'token_ids' as const, tokenIds: Uint32Array.from(t), loraName: null })),
      fc.array(fc.bigUint({ max: (1n << 64n) - 1n }), { maxLength: 40 }).map((h) => ({ kind: 'local_hashes' as const, localHashes: BigUint64Array.from(h), loraName: null })),
    );
    const request = fc.record({
      requestId: fc.string({ minLength: 1, maxLength: 20 }),
      sessionId: fc.string({ minLength: 1, maxLength: 20 }),
      stageProposal: fc.constantFrom('efficient' as const, 'capable' as const),
      candidates: fc.record({
        efficient: fc.record({ model: fc.string({ minLength: 1, maxLength: 8 }), pool: fc.constant(null), prompt, promptTokens: fc.nat() }),
        capable: fc.record({ model: fc.string({ minLength: 1, maxLength: 8 }), pool: fc.constant(null), prompt, promptTokens: fc.nat() }),
      }),
      deadlineMs: fc.option(fc.nat()),
    });
    fc.assert(
      fc.property(request, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.boolean(), (r, at, byte, corrupt) => {
        const data = routeRequestCodec.encode(r);
        if (corrupt && data.length > 0) {
          const d = data.slice();
          d[at % d.length] = byte;
          agrees(d);
        } else {
          agrees(data);
        }
      }),
      { seed: 5, numRuns: 2000 },
    );
  });
});
