import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { WorkerId } from '@vantage/types';
import { seededRng } from '@vantage/selection';
import {
  ClosedLoop,
  Engine,
  polynomialDecodeMs,
  polynomialPrefillMs,
  polynomialTiming,
  promptFromTokens,
  scaledTiming,
  type StepShape,
} from '@vantage/sim';
import { EventModel, W1, checkEngineInvariants, evictionOrder, hasBlock, range, req, runToIdle } from './helpers';

describe('timing model', () => {
  it('matches the mocker polynomials at hand-computed points', () => {
    expect(polynomialPrefillMs(0)).toBe(0);
    expect(polynomialPrefillMs(1000)).toBeCloseTo(32.1058589, 9);
    expect(polynomialPrefillMs(8192)).toBeCloseTo(169.1369184042, 9);
    expect(polynomialDecodeMs(0)).toBeCloseTo(5.74, 12);
    expect(polynomialDecodeMs(0.25)).toBeCloseTo(17.63375, 12);
    expect(polynomialDecodeMs(0.5)).toBeCloseTo(26.31, 12);
    expect(polynomialDecodeMs(1)).toBeCloseTo(34.01, 12);
    expect(polynomialDecodeMs(7)).toBeCloseTo(34.01, 12); // clamped to full
  });

  const shape = (p: Partial<StepShape>): StepShape => ({
    prefillRequests: 0,
    prefillThroughTokens: 0,
    prefillPrefixTokens: 0,
    decodeRequests: 0,
    decodeKvTokens: 0,
    totalKvTokens: 1000,
    ...p,
  });

  it('times a mixed pass as prefill then decode at the decoding context, a prefill-only pass without decode', () => {
    // u = decoding requests' context tokens / capacity.
    const prefill1000 = { prefillRequests: 1, prefillThroughTokens: 1000 };
    expect(polynomialTiming.stepMs(shape({ ...prefill1000, decodeRequests: 3, decodeKvTokens: 500 }))).toBeCloseTo(32.1058589 + 26.31, 9);
    expect(polynomialTiming.stepMs(shape({ ...prefill1000 }))).toBeCloseTo(32.1058589, 9);
    // Batched prefill as Dynamo's model reduces it: 3 requests, 8,192 through, 0 before → 3 × ⌊8192 / 3⌋ = 8,190 tokens timed.
    expect(polynomialTiming.stepMs(shape({ prefillRequests: 3, prefillThroughTokens: 8192 }))).toBeCloseTo(polynomialPrefillMs(8190), 9);
    // 2 requests, 12,000 through, 8,091 before: 2 × (6000 − 4045) = 3,910 timed for 3,909 computed.
    expect(polynomialTiming.stepMs(shape({ prefillRequests: 2, prefillThroughTokens: 12_000, prefillPrefixTokens: 8091 }))).toBeCloseTo(polynomialPrefillMs(3910), 9);
    expect(polynomialTiming.stepMs(shape({ decodeRequests: 1 }))).toBeCloseTo(5.74, 9);
  });

  it('a speed factor scales every pass', () => {
    const fast = scaledTiming(polynomialTiming, 2);
    expect(fast.stepMs(shape({ prefillRequests: 1, prefillThroughTokens: 1000 }))).toBeCloseTo(32.1058589 / 2, 9);
  });
});

describe('engine scheduling', () => {
  it('chunks a long prefill under the token budget and emits the first token after the last chunk', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100, maxNumBatchedTokens: 16 });
    expect(e.addRequest(req('a', range(1, 40), 4, 2))).toEqual({ ok: true });
    const { steps, finished } = runToIdle(e);
    expect(steps.map((s) => s.prefillTokens)).toEqual([16, 16, 8, 0]);
    expect(steps.map((s) => s.tokensEmitted)).toEqual([0, 0, 1, 1]);
    // Durations: three prefill chunks (the last one's first token adds no decode
    // step, as in Dynamo's replay), then one decode step at the decoding
    // context: 41 tokens (the prompt and the sampled token) of 400.
    expect(steps[0]!.endMs).toBeCloseTo(polynomialPrefillMs(16), 9);
    expect(steps[2]!.endMs - steps[2]!.startMs).toBeCloseTo(polynomialPrefillMs(8), 9);
    expect(steps[2]!.firstTokens).toEqual([{ requestId: 'a', atMs: steps[2]!.endMs }]);
    expect(steps[3]!.endMs - steps[3]!.startMs).toBeCloseTo(polynomialDecodeMs(41 / 400), 9);
    expect(finished).toHaveLength(1);
    expect(finished[0]).toMatchObject({ requestId: 'a', isl: 40, outputTokens: 2, reusedTokens: 0, atMs: steps[3]!.endMs });
    expect(e.nextEventTime()).toBe(Infinity);
  });

  it('holds a request until its arrival time', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100 });
    e.addRequest(req('late', range(1, 8), 4, 1, 500));
    expect(e.nextEventTime()).toBe(500);
    const s = e.step(500);
    expect(s.finished[0]!.firstTokenMs).toBeGreaterThan(500);
    expect(() => e.step(s.endMs - 1)).toThrow(RangeError);
  });

  it('rejects duplicate ids, mismatched block sizes and requests that can never fit', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 10 });
    expect(e.addRequest(req('a', range(1, 8), 4, 1)).ok).toBe(true);
    expect(e.addRequest(req('a', range(1, 8), 4, 1))).toMatchObject({ ok: false, code: 'duplicate_id' });
    expect(e.addRequest(req('b', range(1, 8), 8, 1))).toMatchObject({ ok: false, code: 'block_size_mismatch' });
    expect(e.addRequest(req('c', range(1, 41), 4, 1))).toMatchObject({ ok: false, code: 'too_long' });
    expect(e.addRequest(req('d', range(1, 40), 4, 1)).ok).toBe(true); // exactly 10 blocks
  });

  it('respects maxNumSeqs', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 1000, maxNumSeqs: 2 });
    for (let i = 0; i < 5; i++) e.addRequest(req(`r${i}`, range(100 * i, 8), 4, 3));
    const s = e.step(0);
    expect(s.scheduledRequests).toBe(2);
    expect(e.load().running).toBe(2);
    expect(e.load().waiting).toBe(3);
  });
});

describe('prefix reuse and eviction', () => {
  it('a second identical prompt prefills only the uncached tail', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100 });
    const prompt = range(1, 42); // 10 full blocks + 2 tokens
    e.addRequest(req('a', prompt, 4, 1));
    const first = runToIdle(e);
    expect(first.steps[0]!.prefillTokens).toBe(42);
    e.addRequest(req('b', prompt, 4, 1, first.steps.at(-1)!.endMs));
    const second = runToIdle(e);
    expect(second.steps[0]!.prefillTokens).toBe(2);
    expect(second.finished[0]!.reusedTokens).toBe(40);
    // No new blocks were stored for b's prompt.
    expect(second.steps.flatMap((s) => s.kvEvents)).toEqual([]);
  });

  it('a fully cached prompt still recomputes its last block (at least one token is always computed)', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100 });
    e.addRequest(req('a', range(1, 40), 4, 1));
    const t = runToIdle(e).steps.at(-1)!.endMs;
    e.addRequest(req('b', range(1, 40), 4, 1, t));
    const s = runToIdle(e).steps[0]!;
    expect(s.prefillTokens).toBe(4);
  });

  it('evicts least recently released blocks first, and a finished request frees its tail first', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 8 });
    const a = promptFromTokens(range(1, 20), 4); // 5 blocks
    e.addRequest({ id: 'a', arrivalMs: 0, prompt: a, osl: 1 });
    const t = runToIdle(e).steps.at(-1)!.endMs;
    expect(evictionOrder(e)).toEqual([...a.sequence].reverse());
    // c needs 5 blocks; 3 are free, so the two oldest unreferenced blocks go: a's tail.
    e.addRequest(req('c', range(1000, 20), 4, 1, t));
    const evs = runToIdle(e).steps.flatMap((s) => s.kvEvents);
    const removed = evs.filter((ev) => ev.data.kind === 'removed').flatMap((ev) => (ev.data.kind === 'removed' ? [...ev.data.blockHashes] : []));
    expect(removed).toEqual([a.sequence[4], a.sequence[3]]);
    expect(hasBlock(e, a.sequence[2]!)).toBe(true);
    expect(hasBlock(e, a.sequence[4]!)).toBe(false);
  });

  it('emits stored events with the sequence hash as block id and the previous block as parent', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100, maxNumBatchedTokens: 8, firstEventId: 0n });
    const p = promptFromTokens(range(1, 18), 4); // 4 full blocks
    e.addRequest({ id: 'a', arrivalMs: 0, prompt: p, osl: 1 });
    const evs = runToIdle(e).steps.flatMap((s) => s.kvEvents);
    expect(evs.map((ev) => ev.eventId)).toEqual([0n, 1n]);
    const [e0, e1] = evs.map((ev) => ev.data);
    expect(e0).toMatchObject({ kind: 'stored', parentHash: null, startPosition: 0 });
    expect(e1).toMatchObject({ kind: 'stored', parentHash: p.sequence[1], startPosition: 2 });
    if (e0?.kind !== 'stored' || e1?.kind !== 'stored') throw new Error('unreachable');
    expect([...e0.blockHashes, ...e1.blockHashes]).toEqual([...p.sequence]);
    expect([...e0.tokensHashes, ...e1.tokensHashes]).toEqual([...p.local]);
    expect(evs[0]!).toMatchObject({ workerId: W1, dpRank: 0, storageTier: 'device' });
  });

  it('caches generated blocks, so the next turn of a conversation reuses the previous output', () => {
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100 });
    const prompt = range(1, 10);
    const out = Uint32Array.from(range(500, 12));
    e.addRequest(req('t0', prompt, 4, out.length, 0, out));
    const t = runToIdle(e).steps.at(-1)!.endMs;
    // Turn 1 = prompt + output + tool result. 21 of the 22 known tokens were written (the last sampled token never is).
    const next = [...prompt, ...out, ...range(900, 7)];
    e.addRequest(req('t1', next, 4, 1, t));
    const r = runToIdle(e);
    expect(r.finished[0]!.reusedTokens).toBe(20); // 5 full blocks of the 21 cached tokens
  });

  it('synthesised output tokens are deterministic per request id', () => {
    const run = () => {
      const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 100 });
      e.addRequest(req('x', range(1, 6), 4, 20));
      return runToIdle(e).steps.flatMap((s) => s.kvEvents.flatMap((ev) => (ev.data.kind === 'stored' ? [...ev.data.blockHashes] : [])));
    };
    const a = run();
    expect(a.length).toBe(6); // 6 + 19 computed tokens = 6 full blocks
    expect(run()).toEqual(a);
  });
});

describe('preemption', () => {
  it('preempts the most recently admitted request when decode runs out of blocks, and everything still finishes', () => {
    // 6 blocks of 4 tokens. Two requests of 8 prompt tokens (2 blocks each) decoding 12 tokens each need
    // up to 5 blocks apiece: they cannot both grow to the end at once.
    const e = new Engine({ workerId: W1, blockSize: 4, numGpuBlocks: 6 });
    e.addRequest(req('a', range(1, 8), 4, 12));
    e.addRequest(req('b', range(100, 8), 4, 12));
    const model = new EventModel();
    const { steps, finished } = runToIdle(e);
    for (const s of steps) for (const ev of s.kvEvents) model.apply(ev);
    const preempted = steps.flatMap((s) => s.preempted);
    expect(preempted[0]).toBe('b');
    expect(finished.map((f) => f.requestId).sort()).toEqual(['a', 'b']);
    expect(finished.find((f) => f.requestId === 'b')!.preemptions).toBeGreaterThan(0);
    expect(finished.every((f) => f.outputTokens === 12)).toBe(true);
  });
});

describe('scheduler invariants on random workloads (property, replayed against an event model)', () => {
  it('never exceeds the token budget or the block pool; events replay cleanly; the model ends equal to the cache', () => {
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.integer({ min: 0, max: 1_000_000 }),
          blocks: fc.integer({ min: 12, max: 60 }),
          budget: fc.integer({ min: 4, max: 48 }),
          maxSeqs: fc.integer({ min: 1, max: 6 }),
          n: fc.integer({ min: 1, max: 14 }),
        }),
        ({ seed, blocks, budget, maxSeqs, n }) => {
          const bs = 4;
          const rng = seededRng(seed);
          const e = new Engine({ workerId: 7n as WorkerId, blockSize: bs, numGpuBlocks: blocks, maxNumBatchedTokens: budget, maxNumSeqs: maxSeqs });
          // Prompts drawn from a few shared prefixes so reuse, sharing and eviction all happen.
          const prefixes = [range(1, 12), range(50, 20), range(200, 6)];
          let t = 0;
          const added: string[] = [];
          for (let i = 0; i < n; i++) {
            t += Math.floor(rng.next() * 40);
            const base = prefixes[Math.floor(rng.next() * prefixes.length)]!;
            const extra = range(1000 + i * 100, Math.floor(rng.next() * 14));
            const osl = 1 + Math.floor(rng.next() * 10);
            const r = req(`r${i}`, [...base, ...extra], bs, osl, t);
            if (e.addRequest(r).ok) added.push(r.id);
          }
          const model = new EventModel();
          const finished = new Set<string>();
          for (let steps = 0; steps < 100_000; steps++) {
            const now = e.nextEventTime();
            if (now === Infinity) break;
            const s = e.step(now);
            // Plain checks in the loop: per-step expect() calls would dominate the run time.
            checkEngineInvariants(e);
            if (s.scheduledTokens > budget) throw new Error(`pass scheduled ${s.scheduledTokens} > budget ${budget}`);
            if (s.prefillTokens > s.scheduledTokens) throw new Error('prefill tokens exceed scheduled tokens');
            const load = e.load();
            if (load.kvUsedBlocks > blocks) throw new Error(`${load.kvUsedBlocks} blocks used of ${blocks}`);
            if (load.activeDecodeBlocks > load.kvUsedBlocks) throw new Error('active blocks exceed used blocks');
            for (const ev of s.kvEvents) model.apply(ev);
            for (const f of s.finished) {
              if (finished.has(f.requestId)) throw new Error(`${f.requestId} finished twice`);
              finished.add(f.requestId);
              if (!(f.arrivalMs < f.firstTokenMs && f.firstTokenMs <= f.atMs)) throw new Error(`${f.requestId} times out of order`);
            }
          }
          expect([...finished].sort()).toEqual([...added].sort());
          // Every stored block was either removed or is still resident, and nothing else is resident.
          expect(model.parent.size).toBe(e.cachedBlocks);
          for (const h of model.parent.keys()) expect(hasBlock(e, h)).toBe(true);
          expect(e.load().activeDecodeBlocks).toBe(0);
        },
      ),
      { seed: 20260501, numRuns: 300 },
    );
  });
});

describe('decode fast-forward', () => {
  function workload(seed: number, bs: number) {
    const rng = seededRng(seed);
    const out: ReturnType<typeof req>[] = [];
    let t = 0;
    for (let i = 0; i < 12; i++) {
      t += Math.floor(rng.next() * 300);
      const shared = range(1, 8 + Math.floor(rng.next() * 40));
      out.push(req(`r${i}`, [...shared, ...range(10_000 + i * 1000, Math.floor(rng.next() * 50))], bs, 1 + Math.floor(rng.next() * 120), t));
    }
    return out;
  }

  it('gives exactly the single-step results (times, events, outputs) in fewer calls', () => {
    let calls = 0;
    let passes = 0;
    for (let seed = 0; seed < 40; seed++) {
      const bs = [4, 16, 64][seed % 3]!;
      const cfg = { workerId: W1, blockSize: bs, numGpuBlocks: 40, maxNumBatchedTokens: 64, maxNumSeqs: 4 };
      const single = new Engine(cfg);
      const fast = new Engine(cfg);
      for (const r of workload(seed, bs)) {
        single.addRequest(r);
        fast.addRequest(r);
      }
      const a = runToIdle(single);
      const bSteps = [];
      const bFinished = [];
      for (let now = fast.nextEventTime(); now !== Infinity; now = fast.nextEventTime()) {
        const s = fast.step(now, { untilMs: Infinity });
        checkEngineInvariants(fast);
        if (s.scheduledTokens > 64 * s.passes) throw new Error('token budget exceeded');
        bSteps.push(s);
        bFinished.push(...s.finished);
      }
      expect(bFinished).toEqual(a.finished);
      expect(bSteps.flatMap((s) => s.kvEvents)).toEqual(a.steps.flatMap((s) => s.kvEvents));
      expect(bSteps.flatMap((s) => s.firstTokens)).toEqual(a.steps.flatMap((s) => s.firstTokens));
      expect(bSteps.reduce((n, s) => n + s.passes, 0)).toBe(a.steps.length);
      expect(bSteps.reduce((n, s) => n + s.tokensEmitted, 0)).toBe(a.steps.reduce((n, s) => n + s.tokensEmitted, 0));
      calls += bSteps.length;
      passes += a.steps.length;
    }
    // Small blocks and staggered requests leave short quiet stretches here; at block size 64 it is far more.
    expect(calls / passes).toBeLessThan(0.8);
  });

  it('stops before untilMs so a request added then is scheduled exactly as with single steps', () => {
    const cfg = { workerId: W1, blockSize: 64, numGpuBlocks: 100 };
    const single = new Engine(cfg);
    const fast = new Engine(cfg);
    const first = req('a', range(1, 100), 64, 200);
    single.addRequest(first);
    fast.addRequest(first);
    // Arrive exactly at the start of a mid-stretch decode pass: the boundary case of `untilMs`.
    const probe = new Engine(cfg);
    probe.addRequest(first);
    const arrival = runToIdle(probe).steps[10]!.startMs;
    const late = req('b', range(500, 70), 64, 5, arrival);
    // Single stepping with the driver adding b once time reaches its arrival.
    let maxPasses = 0;
    const drive = (e: Engine, useHorizon: boolean) => {
      const fin = [];
      let added = false;
      for (;;) {
        const now = e.nextEventTime();
        if (!added && arrival <= now) {
          e.addRequest(late);
          added = true;
          continue;
        }
        if (now === Infinity) break;
        const s = e.step(now, useHorizon && !added ? { untilMs: arrival } : {});
        if (useHorizon && !added) expect(s.endMs - s.startMs > 0 && (s.passes === 1 || now < arrival)).toBe(true);
        maxPasses = Math.max(maxPasses, s.passes);
        fin.push(...s.finished);
      }
      return fin;
    };
    expect(drive(fast, true)).toEqual(drive(single, false));
    expect(maxPasses).toBeGreaterThan(1);
  });

  it('in a closed loop over several engines (completions trigger arrivals) fast-forward changes nothing', () => {
    const rng = seededRng(11);
    const reqs = Array.from({ length: 60 }, (_, i) =>
      req(`c${i}`, [...range(1, 30), ...range(5000 + i * 100, Math.floor(rng.next() * 90))], 16, 5 + Math.floor(rng.next() * 60)),
    );
    const run = (ff: boolean) => {
      const engines = [1n, 2n, 3n].map((id) => new Engine({ workerId: id as WorkerId, blockSize: 16, numGpuBlocks: 64, maxNumBatchedTokens: 96 }));
      const loop = new ClosedLoop(reqs.length, 5);
      const add = (a: { index: number; arrivalMs: number }, to: number) => engines[to]!.addRequest({ ...reqs[a.index]!, arrivalMs: a.arrivalMs });
      loop.start(0).forEach((a) => add(a, a.index % 3));
      const done: Array<[string, number, number]> = [];
      let calls = 0;
      for (;;) {
        let best = -1;
        let bestT = Infinity;
        let other = Infinity;
        engines.forEach((e, i) => {
          const t = e.nextEventTime();
          if (t < bestT) {
            other = bestT;
            bestT = t;
            best = i;
          } else if (t < other) other = t;
        });
        if (best < 0) break;
        // Closed loop: another engine's next pass may finish a request and send one here.
        const s = engines[best]!.step(bestT, ff ? { untilMs: other } : {});
        calls++;
        for (const f of s.finished) {
          done.push([f.requestId, f.firstTokenMs, f.atMs]);
          // The follow-up goes to the engine that just finished (like a session's next turn).
          const next = loop.complete(f.atMs);
          if (next) add(next, best);
        }
      }
      return { done, calls };
    };
    const single = run(false);
    const fast = run(true);
    expect(fast.done).toEqual(single.done);
    expect(single.done).toHaveLength(60);
    expect(fast.calls).toBeLessThan(single.calls);
  });

  it('never fast-forwards past a pass that finished a request (its follow-up may arrive right then)', () => {
    const run = (ff: boolean) => {
      const e = new Engine({ workerId: W1, blockSize: 64, numGpuBlocks: 100 });
      const loop = new ClosedLoop(6, 2);
      const mk = (i: number, t: number) => req(`f${i}`, range(1000 * i, 40), 64, i % 2 === 0 ? 3 : 50, t);
      loop.start(0).forEach((a) => e.addRequest(mk(a.index, a.arrivalMs)));
      const out: Array<[string, number]> = [];
      for (let now = e.nextEventTime(); now !== Infinity; now = e.nextEventTime()) {
        const s = e.step(now, ff ? { untilMs: Infinity } : {});
        for (const f of s.finished) {
          out.push([f.requestId, f.firstTokenMs]);
          const next = loop.complete(f.atMs);
          if (next) e.addRequest(mk(next.index, next.arrivalMs));
        }
      }
      return out;
    };
    expect(run(true)).toEqual(run(false));
  });
});
