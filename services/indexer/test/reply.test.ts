import { describe, expect, it } from 'vitest';
import { hashPrompt } from '@vantage/hashing';
import { PoolState } from '@vantage/observation';
import { observeReplyOf } from '@vantage/decision-core';
import { encodeObserveRequestBinary, observeReplyCodec, observeRequestCodec, type ObserveReply, type ObserveRequest } from '@vantage/protocol';
import { VantageError } from '@vantage/runtime';
import type { KvEvent, WorkerId } from '@vantage/types';
import { handleObserve } from '../src/service';

const BS = 4;
const cap = { blockSize: BS, totalKvBlocks: 100, maxNumBatchedTokens: 16, maxNumSeqs: 8, dpStartRank: 0, dpSize: 2, schedulable: true };

function scenario(selection: ConstructorParameters<typeof PoolState>[0]['selection'] = { kind: 'kv_router', formula: 'prefill_load_scale' }): PoolState {
  const p = new PoolState({ pool: 'p-1', blockSize: BS, selection, bookingTtlMs: 300_000, workerTtlMs: 60_000 });
  const toks = Array.from({ length: 32 }, (_, i) => i * 3 + 1);
  const { local, sequence } = hashPrompt(toks, BS);
  const ws = [2n ** 64n - 1n, 2n ** 63n, 5n] as WorkerId[];
  p.register(ws[0]!, cap, null, 0);
  p.register(ws[1]!, { ...cap, schedulable: false, maxNumBatchedTokens: null }, 10_000, 0);
  ws.forEach((w, i) => {
    const ev: KvEvent = {
      workerId: w,
      dpRank: 0,
      storageTier: i === 2 ? 'host_pinned' : 'device',
      eventId: 1n,
      data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: sequence.slice(0, 3 + i), tokensHashes: local.slice(0, 3 + i) },
    };
    p.applyKvEvent(ev, 5);
  });
  // A gap makes worker 5 suspect; a load report and a booking give the other facts values.
  p.applyKvEvent({ workerId: ws[2]!, dpRank: 0, storageTier: 'device', eventId: 9n, data: { kind: 'removed', blockHashes: BigUint64Array.of(12345n) } }, 6);
  p.applyLoad({ workerId: ws[0]!, dpRank: 1, activeDecodeBlocks: 3, activePrefillTokens: null, kvUsedBlocks: 40, schedulerLoadScope: null }, 7);
  p.ledger.book({ requestId: 'r', workerId: ws[0]!, dpRank: 0, promptTokens: 32, overlapBlocks: 3, sequenceHashes: sequence, source: 'local', nowMs: 8 });
  return p;
}

const PROMPT = Array.from({ length: 32 }, (_, i) => i * 3 + 1);

/** The handler's reply to `request` from pool `state`, decoded. */
function ask(state: PoolState, request: Uint8Array, restoredAtMs: number | null = null): { bytes: Uint8Array; reply: ObserveReply } {
  const bytes = handleObserve({ state, restoredAtMs }, request, process.hrtime.bigint());
  const r = observeReplyCodec.decode(bytes);
  if (!r.ok) throw new Error(`bad observe reply: ${r.reason}`);
  return { bytes, reply: r.value };
}

describe('the observe handler', () => {
  it('answers with the reply built from the pool\'s observation, for either request encoding and either reply encoding', () => {
    // Two pools fed alike, one answering through the handler, the other through observe: their
    // selection RNGs advance alike too.
    const a = scenario();
    const b = scenario();
    const { local } = hashPrompt(PROMPT, BS);
    const dec = new TextDecoder();
    for (const binaryRequest of [false, true]) {
      for (const [workers, restoredAtMs] of [
        ['all', null],
        ['all', 900],
        ['choice', null],
      ] as const) {
        const json: ObserveRequest = { requestId: 'r-1', prompt: { kind: 'local_hashes', localHashes: local, loraName: null }, promptTokens: 30, workers };
        const bin: ObserveRequest = { ...json, replyEncoding: 'binary' };
        const encode = (r: ObserveRequest): Uint8Array => (binaryRequest ? encodeObserveRequestBinary(r) : observeRequestCodec.encode(r));
        for (const req of [json, bin]) {
          const { bytes, reply } = ask(a, encode(req), restoredAtMs);
          const expected = observeReplyOf(b.observe(local, 30, reply.atMs), { nowMs: reply.atMs, queryDurationUs: reply.queryDurationUs, restoredAtMs, workers });
          expect(reply).toEqual(expected);
          expect(reply.queryDurationUs).toBeGreaterThanOrEqual(0);
          if (req.replyEncoding === 'binary') expect(bytes.length).toBeLessThan(observeReplyCodec.encode(expected).length);
          else expect(dec.decode(bytes)).toBe(dec.decode(observeReplyCodec.encode(expected)));
          // u64 worker ids survive exactly; suspect, capacity and load facts are where they belong.
          const choice = reply.dynamoChoice;
          expect(choice).not.toBeNull();
          if (workers === 'choice') {
            // Only Dynamo's choice is listed, and it is the full record of that worker.
            expect(reply.workers.map((w) => [w.workerId, w.dpRank])).toEqual([[choice!.workerId, choice!.dpRank]]);
            continue;
          }
          expect(reply.workers).toHaveLength(5);
          expect(reply.workers.map((w) => w.workerId)).toContain(2n ** 64n - 1n);
          expect(reply.workers.find((w) => w.workerId === 5n)?.suspect?.reason).toBe('event_gap');
          expect(reply.workers.find((w) => w.workerId === 2n ** 64n - 1n && w.dpRank === 0)?.R).toBe(1);
          expect(reply.snapshotRestoredAtMs).toBe(restoredAtMs);
        }
      }
    }
  });

  it('hashes a prompt given as token ids as the pool\'s blocks, and answers as for its local hashes', () => {
    const a = scenario();
    const { local } = hashPrompt(PROMPT, BS);
    const timeless = (r: ObserveReply): unknown => ({ ...r, atMs: 0, queryDurationUs: 0, workers: r.workers.map((w) => ({ ...w, ages: null })) });
    const byHashes = ask(a, observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes: local, loraName: null }, promptTokens: 32 })).reply;
    for (const encode of [observeRequestCodec.encode, encodeObserveRequestBinary]) {
      const byTokens = ask(a, encode({ requestId: null, prompt: { kind: 'token_ids', tokenIds: Uint32Array.from(PROMPT), loraName: null }, promptTokens: 32 })).reply;
      expect(timeless(byTokens)).toEqual(timeless(byHashes));
    }
    expect(byHashes.workers.find((w) => w.workerId === 2n ** 64n - 1n && w.dpRank === 0)?.deviceOverlapBlocks).toBe(3);
  });

  it('refuses a bad request as BAD_REQUEST with the protocol\'s code', () => {
    const a = scenario();
    for (const [bytes, code] of [
      [new TextEncoder().encode('{"v":1,"prompt":{"localHashesLe64":"AAAA"},"promptTokens":4}'), 'u64_out_of_range'],
      [new TextEncoder().encode('{"v":2,"prompt":{"localHashesLe64":""},"promptTokens":4}'), 'unsupported_version'],
      [Uint8Array.of(0x56, 0x4f, 0x51, 0x01, 0), 'malformed_binary'],
    ] as const) {
      let err: unknown = null;
      try {
        handleObserve({ state: a, restoredAtMs: null }, bytes, process.hrtime.bigint());
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(VantageError);
      expect([(err as VantageError).code, (err as VantageError).details]).toEqual(['BAD_REQUEST', { code }]);
    }
  });
});

describe('a worker recovered from its local index', () => {
  it('says when in JSON replies, and is trusted again', () => {
    const p = scenario();
    const { local, sequence } = hashPrompt(PROMPT, BS);
    const w5 = 5n as WorkerId;
    expect(p.index.suspectOf(w5, 0)?.reason).toBe('event_gap');
    const dump: KvEvent[] = [
      { workerId: w5, dpRank: 0, storageTier: 'device', eventId: 0n, data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: sequence.slice(0, 6), tokensHashes: local.slice(0, 6) } },
    ];
    p.applyRecovery(w5, 0, dump, 9n, 950);
    const { reply } = ask(p, observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes: local, loraName: null }, promptTokens: 30 }));
    const w = reply.workers.find((x) => x.workerId === w5)!;
    expect(w.recoveredAtMs).toBe(950);
    expect(w.suspect).toBeNull();
    expect(w.deviceOverlapBlocks).toBe(6);
    // Never recovered: no field at all.
    expect(reply.workers.filter((x) => x.workerId !== w5).every((x) => x.recoveredAtMs === undefined)).toBe(true);
  });
});
