import { describe, expect, it } from 'vitest';
import {
  computeMetrics,
  generateAgenticSessions,
  DEFAULT_AGENTIC_CONFIG,
  loadMooncakeTrace,
  parseMooncakeTrace,
  prepareTrace,
  runReplay,
  type MooncakeRecord,
  type PreparedTrace,
  type RequestRecord,
} from '@vantage/sim';
import { SHARED } from './helpers';

/** `groups` distinct 4-chunk prompts, each sent `repeats` times in a row, `gapMs` apart (each finishes before the next). */
function repeatsTrace(groups: number, repeats: number, gapMs: number): PreparedTrace {
  const lines: string[] = [];
  let t = 0;
  for (let g = 0; g < groups; g++) {
    const ids = [g * 100 + 1, g * 100 + 2, g * 100 + 3, g * 100 + 4];
    for (let r = 0; r < repeats; r++) {
      lines.push(JSON.stringify({ timestamp: t, input_length: 2000, output_length: 8, hash_ids: ids }));
      t += gapMs;
    }
  }
  const parsed = parseMooncakeTrace(lines.join('\n'));
  if (!parsed.ok) throw new Error(parsed.reason);
  return prepareTrace(parsed.records, 64, 'repeats');
}

const conv = (() => {
  let cached: PreparedTrace | undefined;
  return (n: number): PreparedTrace => {
    cached ??= prepareTrace(loadMooncakeTrace(`${SHARED}/traces/conversation_2k.jsonl`).slice(0, 160) as MooncakeRecord[], 64, 'conv160');
    return { ...cached, records: cached.records.slice(0, n), prompts: cached.prompts.slice(0, n) };
  };
})();

const workerOf = (records: readonly RequestRecord[]): Map<string, number> => new Map(records.map((r) => [r.requestId, r.workerIndex]));

describe('offline replay', () => {
  it('is deterministic for a seed (temperature sampling included) and depends on the seed', () => {
    const run = (seed: number) =>
      runReplay({
        workers: 4,
        router: { kind: 'kv_router', policy: { kind: 'kv_router', formula: 'prefill_load_scale', temperature: 0.5 } },
        workload: { kind: 'closed_loop', trace: conv(120), concurrency: 16 },
        seed,
      });
    const a = run(7);
    const b = run(7);
    const c = run(8);
    expect(b.records).toEqual(a.records);
    expect(b.metrics).toEqual(a.metrics);
    expect(a.metrics.requests).toBe(120);
    expect(c.records.map((r) => r.workerIndex)).not.toEqual(a.records.map((r) => r.workerIndex));
  });

  it('round_robin places request i on worker i mod W', () => {
    const W = 5;
    const r = runReplay({ workers: W, router: { kind: 'round_robin' }, workload: { kind: 'closed_loop', trace: conv(60), concurrency: 8 } });
    const w = workerOf(r.records);
    expect(w.size).toBe(60);
    for (let i = 0; i < 60; i++) expect(w.get(`r${i}`)).toBe(i % W);
    expect(r.counters.observes).toBe(0);
    expect(r.metrics.requestsPerWorker).toEqual([12, 12, 12, 12, 12]);
  });

  it('kv_router sends exact repeats to the worker holding the prefix; reuse beats round robin', () => {
    const trace = repeatsTrace(4, 3, 10_000);
    const kv = runReplay({ workers: 4, router: { kind: 'kv_router' }, workload: { kind: 'open_loop', trace } });
    const rr = runReplay({ workers: 4, router: { kind: 'round_robin' }, workload: { kind: 'open_loop', trace } });
    const w = workerOf(kv.records);
    for (let g = 0; g < 4; g++) {
      const first = w.get(`r${g * 3}`);
      expect(w.get(`r${g * 3 + 1}`)).toBe(first);
      expect(w.get(`r${g * 3 + 2}`)).toBe(first);
    }
    // Each repeat reuses the 31 full blocks of its 2,000-token prompt (1,984 tokens).
    const repeats = kv.records.filter((r) => Number(r.requestId.slice(1)) % 3 !== 0);
    for (const r of repeats) expect(r.reusedTokens).toBe(1984);
    expect(kv.metrics.prefixCacheReusedRatio).toBeCloseTo((8 * 1984) / (12 * 2000), 10);
    expect(kv.metrics.prefixCacheReusedRatio).toBeGreaterThan(rr.metrics.prefixCacheReusedRatio);
    expect(kv.metrics.ttftMs.mean).toBeLessThan(rr.metrics.ttftMs.mean);
  });

  it('follows the booking lifecycle: every request booked, prefill marked at first token, released at completion', () => {
    const r = runReplay({ workers: 3, router: { kind: 'kv_router' }, workload: { kind: 'closed_loop', trace: conv(80), concurrency: 12 } });
    expect(r.counters.routed).toBe(80);
    expect(r.counters.prefillMarked).toBe(80);
    expect(r.counters.bookingsAtEnd).toBe(0);
    expect(r.counters.maxInFlight).toBe(12);
    expect(r.counters.kvEvents).toBeGreaterThan(0);
  });

  it('runs llm-d, random, a KV event delay and agentic sessions to completion', () => {
    const wl = { kind: 'closed_loop', trace: conv(60), concurrency: 8 } as const;
    const llmd = runReplay({ workers: 4, router: { kind: 'llmd' }, workload: wl });
    expect(llmd.metrics.requests).toBe(60);
    expect(llmd.router).toBe('llmd(token-load)');
    const rnd = runReplay({ workers: 4, router: { kind: 'random' }, workload: wl, seed: 3 });
    expect(rnd.metrics.requests).toBe(60);
    // A delay longer than the run: the router never sees a cached block, so no repeat is steered by the cache.
    const trace = repeatsTrace(2, 4, 10_000);
    const blind = runReplay({ workers: 4, router: { kind: 'kv_router' }, workload: { kind: 'open_loop', trace }, eventDelayMs: 1e9 });
    const seeing = runReplay({ workers: 4, router: { kind: 'kv_router' }, workload: { kind: 'open_loop', trace } });
    expect(blind.metrics.requests).toBe(8);
    expect(seeing.metrics.prefixCacheReusedRatio).toBeGreaterThanOrEqual(blind.metrics.prefixCacheReusedRatio);
    const sessions = generateAgenticSessions({ ...DEFAULT_AGENTIC_CONFIG, sessions: 6, seed: 'replay-test', turnsPerSession: { kind: 'uniform', min: 2, max: 4 } });
    const turns = sessions.reduce((a, s) => a + s.turns.length, 0);
    const s = runReplay({ workers: 3, router: { kind: 'kv_router' }, workload: { kind: 'sessions', sessions } });
    expect(s.metrics.requests).toBe(turns);
    expect(s.counters.bookingsAtEnd).toBe(0);
    expect(s.metrics.prefixCacheReusedRatio).toBeGreaterThan(0.3);
  });

  it('rejects a trace hashed at another block size', () => {
    expect(() => runReplay({ workers: 2, engine: { blockSize: 16 }, router: { kind: 'round_robin' }, workload: { kind: 'open_loop', trace: repeatsTrace(1, 1, 1) } })).toThrow(/block size/);
  });
});

describe('metrics', () => {
  it('matches a hand-computed case', () => {
    const rec = (id: string, arrivalMs: number, firstTokenMs: number, endMs: number, isl: number, outputTokens: number, reusedTokens: number, workerIndex: number): RequestRecord => ({
      requestId: id,
      workerIndex,
      arrivalMs,
      firstTokenMs,
      endMs,
      isl,
      outputTokens,
      reusedTokens,
      preemptions: 0,
    });
    const m = computeMetrics([rec('a', 0, 100, 400, 1000, 4, 500, 0), rec('b', 100, 300, 300, 2000, 1, 0, 1), rec('c', 200, 250, 1200, 1000, 11, 1000, 1)], 2);
    expect(m.ttftMs.mean).toBeCloseTo(350 / 3, 10);
    expect(m.ttftMs.p50).toBe(100);
    expect(m.ttftMs.p90).toBeCloseTo(180, 10);
    expect(m.e2eMs.mean).toBeCloseTo(1600 / 3, 10);
    expect(m.e2eMs.p90).toBeCloseTo(880, 10);
    expect(m.e2eMs.p99).toBeCloseTo(400 + 0.98 * 600, 10);
    expect(m.tpotMs.count).toBe(2);
    expect(m.tpotMs.mean).toBeCloseTo(97.5, 10);
    expect(m.itlMs.mean).toBeCloseTo(1250 / 13, 10);
    expect(m.itlMs.p50).toBe(95);
    expect(m.durationMs).toBe(1200);
    expect(m.requestThroughputPerS).toBeCloseTo(2.5, 10);
    expect(m.outputTokenThroughputPerS).toBeCloseTo(16 / 1.2, 10);
    expect(m.totalTokenThroughputPerS).toBeCloseTo(4016 / 1.2, 10);
    expect(m.prefixCacheReusedRatio).toBeCloseTo(0.375, 12);
    expect(m.requestsPerWorker).toEqual([1, 2]);
  });
});
