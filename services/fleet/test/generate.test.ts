/** The serving protocol's codec and the worker-id scheme. */
import { describe, expect, it } from 'vitest';
import { allWorkerIds, type FleetConfig } from '../src/config';
import { decodeGenerateRequest, encodeGenerateRequest, generateSubject } from '../src/generate';

const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));

describe('generate requests', () => {
  it('round-trips token prompts (base64) and Mooncake prompts', () => {
    const tokens = Uint32Array.from([0, 1, 0xffff_ffff, 150_000]);
    const out = Uint32Array.from([7, 8]);
    const a = decodeGenerateRequest(encodeGenerateRequest({ requestId: 'r1', sessionId: 's', osl: 3, prompt: { kind: 'token_ids', tokens }, outputTokens: out }));
    expect(a).toMatchObject({ ok: true, value: { requestId: 'r1', sessionId: 's', osl: 3, prompt: { kind: 'token_ids', tokens }, outputTokens: out } });
    const b = decodeGenerateRequest(enc({ v: 1, requestId: 'r2', osl: 0, prompt: { kind: 'mooncake', hashIds: [4, 5], inputLength: 600 } }));
    expect(b).toMatchObject({ ok: true, value: { sessionId: null, outputTokens: null, prompt: { kind: 'mooncake', hashIds: Uint32Array.from([4, 5]), inputLength: 600 } } });
    const c = decodeGenerateRequest(enc({ v: 1, requestId: 'r3', osl: 1, prompt: { kind: 'token_ids', tokenIds: [1, 2, 3] } }));
    expect(c.ok && c.value.prompt.kind === 'token_ids' && [...c.value.prompt.tokens]).toEqual([1, 2, 3]);
  });

  it('rejects malformed requests with a code, a reason and the request id when there is one', () => {
    expect(decodeGenerateRequest(new Uint8Array([0xff]))).toMatchObject({ ok: false, code: 'malformed_json', requestId: null });
    const bad = [
      [{ v: 2, requestId: 'x', osl: 1, prompt: { kind: 'token_ids', tokenIds: [1] } }, 'v must be 1'],
      [{ v: 1, requestId: 'x', osl: -1, prompt: { kind: 'token_ids', tokenIds: [1] } }, 'osl'],
      [{ v: 1, requestId: 'x', osl: 1, prompt: { kind: 'token_ids', tokenIds: [1.5] } }, 'tokenIds[0]'],
      [{ v: 1, requestId: 'x', osl: 1, prompt: { kind: 'token_ids', tokenIds: [] } }, 'empty'],
      [{ v: 1, requestId: 'x', osl: 1, prompt: { kind: 'mooncake', hashIds: [1], inputLength: 600 } }, 'needs 2'],
      [{ v: 1, requestId: 'x', osl: 1, prompt: { kind: 'token_ids_b64', data: 'AAA' } }, 'u32'],
      [{ v: 1, requestId: 'x', osl: 1, prompt: { kind: 'text' } }, 'kind'],
      [{ v: 1, requestId: 'x', sessionId: '', osl: 1, prompt: { kind: 'token_ids', tokenIds: [1] } }, 'sessionId'],
      [{ v: 1, requestId: 'x', sessionId: 's'.repeat(257), osl: 1, prompt: { kind: 'token_ids', tokenIds: [1] } }, 'sessionId'],
      [{ v: 1, requestId: 'x', sessionId: 7, osl: 1, prompt: { kind: 'token_ids', tokenIds: [1] } }, 'sessionId'],
    ] as const;
    // A request id outside the protocol's rule (@vantage/protocol's isValidId) is refused without one.
    for (const requestId of ['', 'r'.repeat(257), 12]) {
      const r = decodeGenerateRequest(enc({ v: 1, requestId, osl: 1, prompt: { kind: 'token_ids', tokenIds: [1] } }));
      expect(r).toMatchObject({ ok: false, code: 'invalid_request', requestId: null });
    }
    expect(decodeGenerateRequest(enc({ v: 1, requestId: 'r'.repeat(256), sessionId: 's'.repeat(256), osl: 1, prompt: { kind: 'token_ids', tokenIds: [1] } })).ok).toBe(true);
    for (const [msg, why] of bad) {
      const r = decodeGenerateRequest(enc(msg));
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r).toMatchObject({ code: 'invalid_request', requestId: 'x' });
        expect(r.reason).toContain(why);
      }
    }
  });

  it('names one subject per worker with the exact u64 id', () => {
    expect(generateSubject('efficient', 18446744073709551615n)).toBe('vantage.v1.fleet.generate.efficient.18446744073709551615');
  });
});

describe('worker ids', () => {
  const pool = (name: string, workers: number, workerIds: string[] = []) =>
    ({ name, workers, namespace: 'dynamo', component: 'backend', model: '', blockSize: 64, speed: 1, numGpuBlocks: 16384, maxNumBatchedTokens: 8192, maxNumSeqs: 256, workerIds }) as const;
  const fleet = (pools: ReturnType<typeof pool>[]) => ({ pools }) as unknown as FleetConfig['fleet'];

  it('are distinct across pools and half of them at or above 2^63', () => {
    const ids = allWorkerIds(fleet([pool('a', 4), pool('b', 4)])).flat();
    expect(new Set(ids).size).toBe(8);
    expect(ids.filter((x) => x >= 1n << 63n)).toHaveLength(4);
    expect(ids.every((x) => x > 0n && x < 1n << 64n)).toBe(true);
  });

  it('differ between incarnations, so a restarted fleet never reuses an id', () => {
    const a = allWorkerIds(fleet([pool('a', 4), pool('b', 4)]), 1).flat();
    const b = allWorkerIds(fleet([pool('a', 4), pool('b', 4)]), 2).flat();
    expect(a.filter((x) => b.includes(x))).toEqual([]);
    expect(() => allWorkerIds(fleet([pool('a', 1)]), 0x10000)).toThrow(RangeError);
  });

  it('can be configured, and duplicates are refused', () => {
    expect(allWorkerIds(fleet([pool('a', 1, ['18446744073709551615'])]))[0]).toEqual([18446744073709551615n]);
    expect(() => allWorkerIds(fleet([pool('a', 1, ['5']), pool('b', 1, ['5'])]))).toThrow(/twice/);
    expect(() => allWorkerIds(fleet([pool('a', 2, ['5'])]))).toThrow(/workerIds/);
    expect(() => allWorkerIds(fleet([pool('a', 1, ['99999999999999999999'])]))).toThrow(/2\^64/);
  });
});
