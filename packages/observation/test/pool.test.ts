import { describe, expect, it } from 'vitest';
import { hashPrompt } from '@vantage/hashing';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { PoolState } from '../src/index';

const BS = 4;
const W1 = 18_446_744_073_709_551_557n as WorkerId; // above 2^63: must stay exact
const W2 = 7n as WorkerId;

function pool(): PoolState {
  return new PoolState({
    pool: 'p',
    blockSize: BS,
    selection: { kind: 'kv_router', formula: 'overlap_weight' },
    bookingTtlMs: 300_000,
    workerTtlMs: 60_000,
  });
}

/** A stored event for the first `n` blocks of `tokens` on a worker (engine block id = sequence hash, as the mocker does). */
function stored(worker: WorkerId, tokens: number[], n: number, eventId: bigint): KvEvent {
  const { local, sequence } = hashPrompt(tokens, BS);
  return {
    workerId: worker,
    dpRank: 0,
    storageTier: 'device',
    eventId,
    data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: sequence.slice(0, n), tokensHashes: local.slice(0, n) },
  };
}

const cap = { blockSize: BS, totalKvBlocks: 100, maxNumBatchedTokens: 16, maxNumSeqs: 8, dpStartRank: 0, dpSize: 1, schedulable: true };
const prompt = Array.from({ length: 16 }, (_, i) => i + 1); // 4 blocks

describe('PoolState.observe', () => {
  it('reports K per worker, bookings R and P, and Dynamo’s choice', () => {
    const p = pool();
    p.register(W1, cap, null, 0);
    p.register(W2, cap, null, 0);
    p.applyKvEvent(stored(W1, prompt, 3, 1n), 10);
    p.applyKvEvent(stored(W2, prompt, 1, 1n), 10);
    const { local, sequence } = hashPrompt(prompt, BS);

    let o = p.observe(local, 16, 20);
    const w1 = o.workers.find((w) => w.workerId === W1)!;
    const w2 = o.workers.find((w) => w.workerId === W2)!;
    expect(w1.match?.deviceBlocks).toBe(3);
    expect(w1.match?.deviceTokens).toBe(12);
    expect(w2.match?.deviceBlocks).toBe(1);
    expect(w1.effectivePrefillTokens).toBe(4);
    expect(w2.effectivePrefillTokens).toBe(12);
    // overlap_weight cost: prefill/bs + decode blocks; W1 = 4/4 + 4 = 5, W2 = 12/4 + 4 = 7.
    expect(o.selection.chosen?.workerId).toBe(W1);

    // Book two requests on W1: R = 2, tracked prefill 4 + 4 = 8 tokens, P = 8 / 16.
    for (const id of ['a', 'b']) {
      p.ledger.book({ requestId: id, workerId: W1, dpRank: 0, promptTokens: 16, overlapBlocks: 3, sequenceHashes: sequence, source: 'local', nowMs: 30 });
    }
    o = p.observe(local, 16, 40);
    const b1 = o.workers.find((w) => w.workerId === W1)!;
    expect(b1.load.requests).toBe(2);
    expect(b1.load.trackedPrefillTokens).toBe(8);
    expect(b1.load.prefillPressure).toBeCloseTo(0.5);
    expect(b1.load.activeBlocks).toBe(4); // the shared prompt counts once
    expect(b1.newRequestBlocks).toBe(0); // all of this prompt's blocks already active there
    expect(o.pending.requests).toBe(2);
    // W1 = (8 + 4)/4 + 4 = 7, W2 = 7 + 4 = ... (12/4 + 4) = 7: tie broken by smaller tree → W2 (1 block).
    expect(o.selection.chosen?.workerId).toBe(W2);

    p.ledger.release('a', 'completed', 50);
    p.ledger.release('b', 'cancelled', 50);
    o = p.observe(local, 16, 60);
    expect(o.workers.find((w) => w.workerId === W1)!.load.requests).toBe(0);
  });

  it('keeps unschedulable workers out of Dynamo’s choice but reports them', () => {
    const p = pool();
    p.register(W1, { ...cap, schedulable: false }, null, 0);
    p.register(W2, cap, null, 0);
    p.applyKvEvent(stored(W1, prompt, 4, 1n), 1);
    const { local } = hashPrompt(prompt, BS);
    const o = p.observe(local, 16, 2);
    expect(o.workers).toHaveLength(2);
    expect(o.selection.chosen?.workerId).toBe(W2);
  });

  it('removes workers that stop publishing and do not renew, but never static ones', () => {
    const p = pool();
    p.register(W1, cap, 5_000, 0);
    p.register(W2, cap, null, 0, true);
    p.applyKvEvent(stored(W1, prompt, 2, 1n), 1_000);
    expect(p.tick(5_999).workersRemoved).toEqual([]);
    expect(p.tick(6_001).workersRemoved).toEqual([W1]);
    expect(p.index.stats().totalBlocks).toBe(0);
    expect(p.tick(10_000_000).workersRemoved).toEqual([]);
    expect(p.knownRanks().map((r) => r.workerId)).toEqual([W2]);
  });

  it('ignores load reports from workers it does not know (kv_metrics is namespace-wide)', () => {
    const p = pool();
    p.register(W1, cap, null, 0);
    const load = { workerId: W2, dpRank: 0, activeDecodeBlocks: 5, activePrefillTokens: 7, kvUsedBlocks: 9, schedulerLoadScope: null };
    expect(p.applyLoad(load, 1)).toBe(false);
    expect(p.knownRanks().map((r) => r.workerId)).toEqual([W1]);
    expect(p.applyLoad({ ...load, workerId: W1 }, 2)).toBe(true);
    const { local } = hashPrompt(prompt, BS);
    expect(p.observe(local, 16, 3).workers[0]!.report?.kvUsedBlocks).toBe(9);
  });

  it('flags a worker suspect after an event-id gap, and reports it in observe', () => {
    const p = pool();
    p.applyKvEvent(stored(W2, prompt, 1, 1n), 1);
    const { local, sequence } = hashPrompt(prompt, BS);
    const later: KvEvent = {
      workerId: W2,
      dpRank: 0,
      storageTier: 'device',
      eventId: 5n,
      data: { kind: 'removed', blockHashes: BigUint64Array.of(sequence[0]! as ExternalHash) },
    };
    p.applyKvEvent(later, 2);
    const o = p.observe(local, 16, 3);
    expect(o.workers[0]!.suspect?.reason).toBe('event_gap');
  });

  it.each([
    ['sampled', { kind: 'kv_router', formula: 'prefill_load_scale', temperature: 0.5 }],
    ['lowest cost', { kind: 'kv_router', formula: 'prefill_load_scale' }],
    ['lowest cost, April 2026 formula', { kind: 'kv_router', formula: 'overlap_weight' }],
  ] as const)('observeTransient answers exactly what observe does, while its records are reused query after query (%s)', (_n, selection) => {
    // Two pools fed the same messages with the same selection seed: one answers through observe,
    // the other through observeTransient (which overwrites one set of records per rank).
    const mk = (): PoolState => new PoolState({ pool: 'p', blockSize: BS, selection, bookingTtlMs: 300_000, workerTtlMs: 60_000 });
    const a = mk();
    const b = mk();
    const W3 = 0x8000_0000_0000_0001n as WorkerId;
    const other = Array.from({ length: 16 }, (_, i) => 100 + i);
    const steps: ((p: PoolState) => void)[] = [
      () => {},
      (p) => {
        p.register(W1, cap, null, 0);
        p.register(W2, { ...cap, dpSize: 2 }, null, 0);
      },
      (p) => p.applyKvEvent(stored(W1, prompt, 3, 1n), 10),
      (p) => p.applyKvEvent(stored(W2, other, 2, 1n), 11),
      (p) => p.ledger.book({ requestId: 'x', workerId: W1, dpRank: 0, promptTokens: 16, overlapBlocks: 3, sequenceHashes: hashPrompt(prompt, BS).sequence, source: 'local', nowMs: 12 }),
      (p) => p.applyLoad({ workerId: W2, dpRank: 1, activeDecodeBlocks: 5, activePrefillTokens: 7, kvUsedBlocks: 9, schedulerLoadScope: null }, 13),
      (p) => p.register(W3, { ...cap, schedulable: false }, null, 14),
      (p) => p.applyKvEvent({ ...stored(W3, prompt, 4, 3n) }, 15), // event-id gap: W3 suspect
      (p) => p.removeWorker(W1, 16),
      (p) => p.ledger.release('x', 'completed', 17),
      // Re-registrations, and bookings that create ledger state after the pool first read a rank.
      (p) => p.register(W2, { ...cap, dpSize: 2, maxNumBatchedTokens: 32, schedulable: false }, null, 18),
      (p) => p.ledger.book({ requestId: 'y', workerId: W3, dpRank: 0, promptTokens: 16, overlapBlocks: 0, sequenceHashes: hashPrompt(other, BS).sequence, source: 'local', nowMs: 19 }),
      (p) => p.register(W1, { ...cap, totalKvBlocks: 7 }, null, 20),
      (p) => p.ledger.book({ requestId: 'z', workerId: W1, dpRank: 0, promptTokens: 16, overlapBlocks: 0, sequenceHashes: hashPrompt(prompt, BS).sequence, source: 'local', nowMs: 21 }),
      (p) => p.register(W2, { ...cap, dpSize: 2 }, null, 22),
    ];
    // Each step's messages, by worker, at the step's time (registrations, KV events, load reports).
    const heard: (readonly [WorkerId, number])[][] = [[], [[W1, 0], [W2, 0]], [[W1, 10]], [[W2, 11]], [], [[W2, 13]], [[W3, 14]], [[W3, 15]], [], [], [[W2, 18]], [], [[W1, 20]], [], [[W2, 22]]];
    const lastSeen = new Map<bigint, number>();
    let t = 30;
    for (const [k, step] of steps.entries()) {
      step(a);
      step(b);
      for (const [w, at] of heard[k]!) lastSeen.set(w, at);
      if (k === 8) lastSeen.delete(W1); // removed
      for (const [tokens, n] of [
        [prompt, 16],
        [other, 15],
        [prompt, 9],
      ] as const) {
        const { local } = hashPrompt(tokens.slice(0, n), BS);
        const fresh = a.observe(local, n, t);
        const transient = b.observeTransient(local, n, t);
        expect(transient).toEqual(fresh);
        // Last seen is the worker's: the same on every rank of a worker, the time of its latest message.
        for (const w of fresh.workers) expect(w.lastSeenMs).toBe(lastSeen.get(w.workerId) ?? null);
        // Registration and booked load as the pool and the ledger report them when asked directly.
        for (const w of fresh.workers) {
          const reg = a.registration(w.workerId);
          expect([w.registered, w.schedulable, w.capacity]).toEqual([reg !== undefined, reg ? reg.capacity.schedulable : null, reg ? reg.capacity : null]);
          expect(w.load).toEqual(a.ledger.load(w.workerId, w.dpRank));
        }
        t++;
      }
    }
  });
});


describe('PoolState: Dynamo 1.6.1 reports on endpoint-scoped subjects', () => {
  const mk = () => new PoolState({ pool: 'p', blockSize: 16, selection: { kind: 'kv_router', formula: 'overlap_weight' }, bookingTtlMs: 60_000, workerTtlMs: 1_000 });
  const load = (workerId: bigint) => ({ workerId: workerId as WorkerId, dpRank: 0, activeDecodeBlocks: null, activePrefillTokens: null, schedulerLoadScope: null, kvUsedBlocks: 3 });

  it('a load report before any KV event is foreign on the namespace subject, kept when adopted', () => {
    const s = mk();
    expect(s.applyLoad(load(5n), 1)).toBe(false);
    expect(s.applyLoad(load(5n), 2, true)).toBe(true);
    const o = s.observe(new BigUint64Array(0), 0, 3);
    expect(o.workers.map((w) => [w.workerId, w.report?.kvUsedBlocks])).toEqual([[5n, 3]]);
  });

  it('forward-pass metrics land on their rank and count as a sign of life', () => {
    const s = mk();
    const idle = { prefillRequests: 0, prefillTokens: 0, prefillLengthVariance: 0, prefillKvTokens: 0, decodeRequests: 0, decodeKvTokens: 0, decodeKvTokensVariance: 0 };
    s.applyForwardPass({ version: 1, workerId: 9n as WorkerId, dpRank: 1, counterId: 1n, wallTime: 0.5, scheduled: { ...idle, prefillRequests: 1, prefillTokens: 100, decodeRequests: 2, decodeKvTokens: 50 }, queued: { ...idle, prefillRequests: 3, prefillTokens: 900 } }, 10);
    const o = s.observe(new BigUint64Array(0), 0, 20);
    expect(o.workers).toHaveLength(1);
    expect(o.workers[0]).toMatchObject({ workerId: 9n, dpRank: 1, forwardPass: { scheduledRequests: 3, scheduledPrefillTokens: 100, scheduledDecodeKvTokens: 50, queuedRequests: 3, queuedPrefillTokens: 900, wallTimeS: 0.5, atMs: 10 } });
    // Unregistered and then silent past the TTL: removed; a static (discovered) worker is not.
    s.register(11n as WorkerId, { blockSize: 16, totalKvBlocks: 8, maxNumBatchedTokens: 64, maxNumSeqs: 4, dpStartRank: 0, dpSize: 1, schedulable: true }, null, 10, true);
    s.tick(5_000);
    expect(s.knownRanks().map((r) => r.workerId)).toEqual([11n]);
  });
});
