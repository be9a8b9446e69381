import { describe, expect, it } from 'vitest';
import { hashPrompt } from '@vantage/hashing';
import { PoolState } from '@vantage/observation';
import { observeReplyCodec, observeRequestCodec } from '@vantage/protocol';
import type { KvEvent, WorkerId } from '@vantage/types';
import { ObserveReplyBinaryWriter } from '@vantage/protocol';
import { decodeObserve, decodeObserveTransient, encodeObserveReply, encodeObserveReplyBinary, encodeObserveReplyViaCodec, observeBinary } from '../src/messages';
import { pooledReplyWriter } from '../src/service';

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

describe('observe reply encoding', () => {
  it('the hand-written encoder writes exactly what the protocol codec writes, and it validates', () => {
    const p = scenario();
    const { local } = hashPrompt(Array.from({ length: 32 }, (_, i) => i * 3 + 1), BS);
    for (const meta of [
      { nowMs: 1_000, queryDurationUs: 12.6, restoredAtMs: null },
      { nowMs: 2_000, queryDurationUs: 0, restoredAtMs: 900 },
      { nowMs: 3_000, queryDurationUs: 4, restoredAtMs: null, workers: 'choice' as const },
    ]) {
      const o = p.observe(local, 30, meta.nowMs);
      const fast = encodeObserveReply(o, meta);
      const ref = encodeObserveReplyViaCodec(o, meta);
      expect(JSON.parse(new TextDecoder().decode(fast))).toEqual(JSON.parse(new TextDecoder().decode(ref)));
      const decoded = observeReplyCodec.decode(fast);
      expect(decoded.ok).toBe(true);
      // The binary encoding carries exactly the same reply.
      const bin = encodeObserveReplyBinary(o, meta);
      expect(bin.length).toBeLessThan(fast.length);
      expect(observeReplyCodec.decode(bin)).toEqual(decoded);
      if (decoded.ok) {
        // u64 worker ids survive exactly; suspect, capacity and load facts are where they belong.
        const choice = decoded.value.dynamoChoice;
        expect(choice).not.toBeNull();
        if (meta.workers === 'choice') {
          // Only Dynamo's choice is listed, and it is the full record of that worker.
          expect(decoded.value.workers.map((w) => [w.workerId, w.dpRank])).toEqual([[choice!.workerId, choice!.dpRank]]);
          continue;
        }
        expect(decoded.value.workers).toHaveLength(o.workers.length);
        expect(decoded.value.workers.map((w) => w.workerId)).toContain(2n ** 64n - 1n);
        expect(decoded.value.workers.find((w) => w.workerId === 5n)?.suspect?.reason).toBe('event_gap');
        expect(decoded.value.workers.find((w) => w.workerId === 2n ** 64n - 1n && w.dpRank === 0)?.R).toBe(1);
      }
    }
  });
});

describe('a worker recovered from its local index', () => {
  it('says when in JSON replies (the hand-written encoder as the codec), and is trusted again', () => {
    const p = scenario();
    const { local, sequence } = hashPrompt(Array.from({ length: 32 }, (_, i) => i * 3 + 1), BS);
    const w5 = 5n as WorkerId;
    expect(p.index.suspectOf(w5, 0)?.reason).toBe('event_gap');
    const dump: KvEvent[] = [
      { workerId: w5, dpRank: 0, storageTier: 'device', eventId: 0n, data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: sequence.slice(0, 6), tokensHashes: local.slice(0, 6) } },
    ];
    p.applyRecovery(w5, 0, dump, 9n, 950);
    const meta = { nowMs: 1_000, queryDurationUs: 3, restoredAtMs: null };
    const o = p.observe(local, 30, meta.nowMs);
    const fast = encodeObserveReply(o, meta);
    expect(JSON.parse(new TextDecoder().decode(fast))).toEqual(JSON.parse(new TextDecoder().decode(encodeObserveReplyViaCodec(o, meta))));
    const decoded = observeReplyCodec.decode(fast);
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    const w = decoded.value.workers.find((x) => x.workerId === w5)!;
    expect(w.recoveredAtMs).toBe(950);
    expect(w.suspect).toBeNull();
    expect(w.deviceOverlapBlocks).toBe(6);
    // Never recovered: no field at all.
    expect(decoded.value.workers.filter((x) => x.workerId !== w5).every((x) => x.recoveredAtMs === undefined)).toBe(true);
  });
});

describe('observeBinary (the pool writes its rows into the reply)', () => {
  // queryDurationUs (the f64 at byte 16) is measured, so it is the one field compared apart.
  const withoutDuration = (b: Uint8Array): Uint8Array => {
    const c = Uint8Array.from(b);
    c.fill(0, 16, 24);
    return c;
  };
  it.each([
    ['prefill_load_scale', { kind: 'kv_router', formula: 'prefill_load_scale' }],
    ['overlap_weight', { kind: 'kv_router', formula: 'overlap_weight' }],
    ['prefill_load_scale, sampled (temperature 1)', { kind: 'kv_router', formula: 'prefill_load_scale', temperature: 1 }],
  ] as const)('gives the bytes of encodeObserveReplyBinary(observeTransient(...)) for every prompt, time, writer and worker listing (%s)', (_name, selection) => {
    // Two pools fed alike, one per path: their selection RNGs then advance alike too.
    const a = scenario(selection);
    const b = scenario(selection);
    const toks = Array.from({ length: 40 }, (_, i) => i * 3 + 1);
    const pooled = new ObserveReplyBinaryWriter({ pooled: true });
    pooled.onRetire = () => pooled.release(pooled.epoch());
    let k = 0;
    for (const len of [0, 1, 2, 3, 5, 8, 9, 10, 40]) {
      const { local } = hashPrompt(toks.slice(0, len), BS);
      for (const promptTokens of [len, len + 3, 0]) {
        for (const [nowMs, restoredAtMs] of [
          [1_000, null],
          [6, 900],
          [50_000, null],
        ] as const) {
          const workers = k % 3 === 2 ? ('choice' as const) : ('all' as const);
          const ref = encodeObserveReplyBinary(a.observeTransient(local, promptTokens, nowMs), { nowMs, queryDurationUs: 0, restoredAtMs, workers });
          const fast = observeBinary(b, local, promptTokens, nowMs, process.hrtime.bigint(), restoredAtMs, k++ % 2 === 0 ? undefined : pooled, workers);
          expect(withoutDuration(fast)).toEqual(withoutDuration(ref));
          const d = observeReplyCodec.decode(fast);
          expect(d.ok && d.value.queryDurationUs).toBeGreaterThanOrEqual(0);
        }
      }
    }
    // The pools change (a worker leaves, a booking ends, a rank of a new worker appears, and one rank's
    // index entry is dropped while its worker stays registered): still the same bytes.
    for (const p of [a, b]) {
      p.removeWorker(5n as WorkerId, 60_000);
      p.index.removeDpRank((2n ** 64n - 1n) as WorkerId, 0);
      p.ledger.release('r', 'completed', 60_001);
      p.applyLoad({ workerId: (2n ** 63n) as WorkerId, dpRank: 0, activeDecodeBlocks: 1, activePrefillTokens: 2, kvUsedBlocks: 3, schedulerLoadScope: null }, 60_002);
      p.applyKvEvent({ workerId: 77n as WorkerId, dpRank: 3, storageTier: 'device', eventId: 1n, data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: BigUint64Array.of(1n), tokensHashes: hashPrompt(toks.slice(0, 4), BS).local } }, 60_003);
    }
    const { local } = hashPrompt(toks, BS);
    for (const workers of ['all', 'choice'] as const) {
      const ref = encodeObserveReplyBinary(a.observeTransient(local, 40, 70_000), { nowMs: 70_000, queryDurationUs: 0, restoredAtMs: null, workers });
      const fast = observeBinary(b, local, 40, 70_000, process.hrtime.bigint(), null, pooled, workers);
      expect(withoutDuration(fast)).toEqual(withoutDuration(ref));
    }
  });
});

describe('observe request decoding for the handler', () => {
  it('decodeObserveTransient gives what decodeObserve gives, its hashes in a buffer the next call reuses', () => {
    const enc = new TextEncoder();
    const requests = [
      ...[0, 1, 7, 300, 2].map((n) =>
        observeRequestCodec.encode({
          requestId: null,
          prompt: { kind: 'local_hashes', localHashes: BigUint64Array.from({ length: n }, (_, i) => BigInt(i) * 0x9e37_79b9_7f4a_7c15n + BigInt(n)), loraName: null },
          promptTokens: n * BS,
          replyEncoding: n % 2 === 0 ? 'binary' : 'json',
        }),
      ),
      observeRequestCodec.encode({ requestId: 'r-1', prompt: { kind: 'token_ids', tokenIds: Uint32Array.of(1, 2, 3), loraName: 'a' }, promptTokens: 3, workers: 'choice' }),
      enc.encode('{"v":1,"prompt":{"localHashesLe64":"AAAA"},"promptTokens":4}'),
      enc.encode('{"v":2,"prompt":{"localHashesLe64":""},"promptTokens":4}'),
    ];
    for (const data of requests) expect(decodeObserveTransient(data)).toEqual(decodeObserve(data));
    // The 300-hash request grew the buffer; the next one (2 hashes) is decoded into the same one.
    const a = decodeObserveTransient(requests[3]!);
    const b = decodeObserveTransient(requests[4]!);
    expect(a.ok && b.ok && a.value.localHashes!.buffer === b.value.localHashes!.buffer).toBe(true);
  });
});

describe('pooled binary replies (the service\'s writer)', () => {
  it('writes a slab again only after a flush issued once it was full has resolved, never after a failed one', async () => {
    const p = scenario();
    const flushes: { resolve: () => void; reject: (e: Error) => void }[] = [];
    const w = pooledReplyWriter({ flush: () => new Promise<void>((resolve, reject) => void flushes.push({ resolve, reject })) });
    const o = p.observeTransient(hashPrompt(Array.from({ length: 32 }, (_, i) => i * 3 + 1), BS).local, 32, 100);
    const encode = (k: number): Uint8Array => encodeObserveReplyBinary(o, { nowMs: 1000 + k, queryDurationUs: k, restoredAtMs: null }, w);
    const expectIntact = (b: Uint8Array, k: number): void => {
      const r = observeReplyCodec.decode(b);
      expect(r.ok && [r.value.atMs, r.value.queryDurationUs]).toEqual([1000 + k, k]);
    };
    // 3 workers: ~700-byte replies, a few hundred per slab. Fill several slabs; nothing is released yet.
    const first = Array.from({ length: 2000 }, (_, k) => encode(k));
    expect(flushes.length).toBeGreaterThan(2);
    expect(w.slabs.free).toBe(0);
    first.forEach(expectIntact);
    // A failed flush releases nothing.
    flushes[0]!.reject(new Error('closed'));
    await Promise.resolve();
    await Promise.resolve();
    expect(w.slabs.free).toBe(0);
    // The second flush resolves: the slabs full when it was issued are written again, later replies are not touched.
    const pendingAtSecond = flushes.length;
    flushes[1]!.resolve();
    await new Promise((r) => setTimeout(r, 0));
    expect(w.slabs.free).toBeGreaterThan(0);
    const perSlab = Math.ceil(2000 / pendingAtSecond);
    const late = first.slice(-perSlab).map((b) => Uint8Array.from(b));
    const more = Array.from({ length: 500 }, (_, k) => encode(5000 + k));
    first.slice(-perSlab).forEach((b, k) => expect(b).toEqual(late[k]));
    more.forEach((b, k) => expectIntact(b, 5000 + k));
  });
});

describe('observeBinary keeps each rank’s booked, registered and reported facts between queries', () => {
  // queryDurationUs (the f64 at byte 16) is measured, so it is the one field compared apart.
  const withoutDuration = (b: Uint8Array): Uint8Array => {
    const c = Uint8Array.from(b);
    c.fill(0, 16, 24);
    return c;
  };
  it('answers as observe does after every kind of change between queries', () => {
    // Two pools fed alike (their selection RNGs advance alike): one answers through observe, which
    // keeps nothing between queries, the other through observeBinary, which keeps rank facts.
    const a = scenario();
    const b = scenario();
    const toks = Array.from({ length: 40 }, (_, i) => i * 3 + 1);
    const { local, sequence } = hashPrompt(toks, BS);
    const workers = [2n ** 64n - 1n, 2n ** 63n, 5n, 99n] as WorkerId[];
    let seed = 12345;
    const rnd = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const live: string[] = [];
    let id = 0;
    let now = 10;
    const changes: string[] = [];
    const check = (): void => {
      const ref = encodeObserveReplyBinary(a.observe(local, 40, now), { nowMs: now, queryDurationUs: 0, restoredAtMs: null });
      const fast = observeBinary(b, local, 40, now, process.hrtime.bigint(), null);
      const x = observeReplyCodec.decode(fast);
      const y = observeReplyCodec.decode(ref);
      if (x.ok && y.ok) expect({ ...x.value, queryDurationUs: 0 }, `after ${changes.slice(-3).join(', ')}`).toEqual({ ...y.value, queryDurationUs: 0 });
      expect(withoutDuration(fast), `after ${changes.slice(-3).join(', ')}`).toEqual(withoutDuration(ref));
    };
    check();
    for (let step = 0; step < 400; step++) {
      now += 1 + rnd(3);
      const op = rnd(9);
      const w = workers[rnd(workers.length)]!;
      const dp = rnd(2);
      const n = 1 + rnd(10);
      if (op <= 1) id++;
      for (const p of [a, b]) {
        switch (op) {
          case 0:
          case 1: {
            p.ledger.book({ requestId: `q${id}`, workerId: w, dpRank: dp, promptTokens: 4 * n, overlapBlocks: 0, sequenceHashes: sequence.slice(0, n), source: 'local', nowMs: now });
            if (p === b) live.push(`q${id}`);
            break;
          }
          case 2:
            if (live.length > 0) p.ledger.markPrefillComplete(live[seed % live.length]!, now);
            break;
          case 3:
            if (live.length > 0) p.ledger.release(live[seed % live.length]!, 'completed', now);
            break;
          case 4:
            p.applyLoad({ workerId: w, dpRank: dp, activeDecodeBlocks: step, activePrefillTokens: step % 3 === 0 ? null : 2 * step, kvUsedBlocks: 7, schedulerLoadScope: null }, now);
            break;
          case 5:
            p.register(w, { ...cap, maxNumBatchedTokens: 8 + (step % 5) * 8, schedulable: step % 4 !== 0, dpSize: 1 + (step % 2) }, null, now);
            break;
          case 6:
            if (step % 7 === 0) p.removeWorker(w, now);
            else p.tick(now);
            break;
          case 7:
            p.applyKvEvent({ workerId: w, dpRank: dp, storageTier: 'device', eventId: BigInt(step + 100), data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: sequence.slice(0, 1 + (step % 9)), tokensHashes: local.slice(0, 1 + (step % 9)) } }, now);
            break;
          case 8:
            // Thousands of booking changes on the same ranks between two queries (each rank is logged once).
            if (step % 40 === 8) {
              for (let k = 0; k < 2_600; k++) {
                p.ledger.book({ requestId: `burst${step}-${k}`, workerId: workers[k % 4]!, dpRank: k % 2, promptTokens: 8, overlapBlocks: 0, sequenceHashes: sequence.slice(0, 2), source: 'local', nowMs: now });
              }
              for (let k = 0; k < 2_599; k++) p.ledger.release(`burst${step}-${k}`, 'completed', now);
            }
            break;
        }
      }
      if (op === 3 && live.length > 0) live.splice(seed % live.length, 1);
      changes.push(`step ${step} op ${op}`);
      if (rnd(3) !== 0) check();
    }
    expect(live.length).toBeGreaterThan(0);
  });

  it('answers as observe does when more ranks changed between two queries than the ledger’s change log lists', () => {
    const pools = [scenario(), scenario()] as const;
    const { local, sequence } = hashPrompt(Array.from({ length: 40 }, (_, i) => i * 3 + 1), BS);
    const wide = 1234n as WorkerId;
    const RANKS = 4_200;
    for (const p of pools) {
      p.register(wide, { ...cap, dpSize: RANKS }, null, 10);
      for (let r = 0; r < RANKS; r++) p.ledger.book({ requestId: `w${r}`, workerId: wide, dpRank: r, promptTokens: 8, overlapBlocks: 0, sequenceHashes: sequence.slice(0, 2), source: 'local', nowMs: 20 });
    }
    const check = (now: number): void => {
      const ref = encodeObserveReplyBinary(pools[0].observe(local, 40, now), { nowMs: now, queryDurationUs: 0, restoredAtMs: null });
      const fast = Buffer.from(withoutDuration(observeBinary(pools[1], local, 40, now, process.hrtime.bigint(), null)));
      // Compared as buffers (a deep comparison of ~700 kB byte by byte takes seconds): the first differing byte, or -1.
      const other = Buffer.from(withoutDuration(ref));
      const at = fast.equals(other) ? -1 : fast.findIndex((v, i) => v !== other[i]);
      expect({ length: fast.length, firstDifferenceAt: at }).toEqual({ length: other.length, firstDifferenceAt: -1 });
    };
    check(30);
    // Every rank's prefill completes (no rank is created or dropped): more changed ranks than the
    // log lists, so drainChanged says so and every row is rebuilt.
    let overflowed = false;
    for (const p of pools) for (let r = 0; r < RANKS; r++) p.ledger.markPrefillComplete(`w${r}`, 40);
    overflowed = !pools[0].ledger.drainChanged(() => {});
    check(50);
    for (const p of pools) p.ledger.release(`w${RANKS - 1}`, 'completed', 60);
    check(70);
    expect(overflowed).toBe(true);
  });
});
