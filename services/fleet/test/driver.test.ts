/**
 * The real-time driver against an injected clock: time scaling, no drift under
 * timer jitter (sim times identical to stepping the same engines offline),
 * results released in sim-time order, KV events in order with consecutive ids.
 */
import { describe, expect, it } from 'vitest';
import { Engine, promptFromTokens, type Finished, type FirstToken } from '@vantage/sim';
import type { KvEvent, WorkerId } from '@vantage/types';
import { RealTimeDriver, type DriverSink, type Timers } from '../src/driver';

/** Hand-driven wall clock with one-shot timers; a fired timer may be late by `jitter()` ms. */
class FakeTime implements Timers {
  now = 0;
  private seq = 0;
  readonly pending = new Map<number, { at: number; fn: () => void }>();
  constructor(private readonly jitter: () => number = () => 0) {}
  set(fn: () => void, delayMs: number): unknown {
    const id = ++this.seq;
    this.pending.set(id, { at: this.now + delayMs + this.jitter(), fn });
    return id;
  }
  clear(h: unknown): void {
    this.pending.delete(h as number);
  }
  /** Fire timers in due order up to `t` (the clock jumps to each due time); returns timers fired. */
  runUntil(t: number): number {
    let fired = 0;
    for (;;) {
      let best: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.pending) if (e[1].at <= t && (!best || e[1].at < best[1].at || (e[1].at === best[1].at && e[0] < best[0]))) best = e;
      if (!best) break;
      this.pending.delete(best[0]);
      this.now = Math.max(this.now, best[1].at);
      best[1].fn();
      fired++;
    }
    this.now = Math.max(this.now, t);
    return fired;
  }
}

type Got =
  | { kind: 'kv'; worker: number; atMs: number; events: readonly KvEvent[] }
  | { kind: 'first'; worker: number; ft: FirstToken; wall: number }
  | { kind: 'done'; worker: number; f: Finished; wall: number };

function recorder(time: FakeTime): { sink: DriverSink; got: Got[]; loads: number[] } {
  const got: Got[] = [];
  const loads: number[] = [];
  return {
    got,
    loads,
    sink: {
      kvEvents: (worker, events, atMs) => got.push({ kind: 'kv', worker, atMs, events: [...events] }),
      firstToken: (worker, ft) => got.push({ kind: 'first', worker, ft, wall: time.now }),
      finished: (worker, f) => got.push({ kind: 'done', worker, f, wall: time.now }),
      loadChanged: (w) => loads.push(w),
    },
  };
}

const engines = (n: number): Engine[] =>
  Array.from({ length: n }, (_, i) => new Engine({ workerId: ((BigInt(i % 2) << 63n) | BigInt(i + 1)) as WorkerId, blockSize: 16, numGpuBlocks: 256, firstEventId: 1n }));

/** A deterministic stream of prompts sharing prefixes (so KV reuse and removals happen). */
function prompt(k: number, len: number): Uint32Array {
  const t = new Uint32Array(len);
  for (let i = 0; i < len; i++) t[i] = i < 200 ? (k % 3) * 1000 + i : k * 7919 + i;
  return t;
}

interface Arrival {
  wall: number;
  worker: number;
  id: string;
  tokens: Uint32Array;
  osl: number;
}

function workload(n: number, workers: number): Arrival[] {
  const out: Arrival[] = [];
  let wall = 0;
  for (let k = 0; k < n; k++) {
    wall += (k * 37) % 23;
    out.push({ wall, worker: k % workers, id: `r${k}`, tokens: prompt(k, 150 + ((k * 131) % 900)), osl: 1 + ((k * 17) % 40) });
  }
  return out;
}

/** Live run: arrivals submitted at their wall times; returns what the sink saw and each request's sim arrival. */
function live(arrivals: Arrival[], nWorkers: number, timeScale: number, jitter: () => number, maxStepsPerTurn = 256) {
  const time = new FakeTime(jitter);
  const rec = recorder(time);
  const eng = engines(nWorkers);
  const d = new RealTimeDriver(eng, { timeScale, clock: () => time.now, timers: time, sink: rec.sink, maxStepsPerTurn });
  d.start();
  const simArrival = new Map<string, number>();
  for (const a of arrivals) {
    time.runUntil(a.wall);
    const r = d.submit(a.worker, { id: a.id, prompt: promptFromTokens(a.tokens, 16), osl: a.osl });
    expect(r.ok).toBe(true);
    simArrival.set(a.id, r.arrivalMs);
  }
  let guard = 0;
  while (time.pending.size > 0 && guard++ < 100_000) time.runUntil([...time.pending.values()].reduce((m, p) => Math.min(m, p.at), Infinity));
  return { ...rec, driver: d, time, eng, simArrival };
}

/** Offline reference: the same engines and arrivals stepped one pass at a time in global time order. */
function offline(arrivals: Arrival[], simArrival: Map<string, number>, nWorkers: number): Map<string, Finished> {
  const eng = engines(nWorkers);
  for (const a of arrivals) eng[a.worker]!.addRequest({ id: a.id, arrivalMs: simArrival.get(a.id)!, prompt: promptFromTokens(a.tokens, 16), osl: a.osl });
  const out = new Map<string, Finished>();
  for (;;) {
    let wi = -1;
    let t = Infinity;
    eng.forEach((e, i) => {
      if (e.nextEventTime() < t) [t, wi] = [e.nextEventTime(), i];
    });
    if (wi < 0) break;
    for (const f of eng[wi]!.step(t).finished) out.set(f.requestId, f);
  }
  return out;
}

describe('RealTimeDriver', () => {
  it('scales time: sim = (wall - start) x timeScale, results released at the wall time of their sim time', () => {
    const time = new FakeTime();
    time.now = 1000; // the driver's zero is wherever the clock stands at start()
    const rec = recorder(time);
    const d = new RealTimeDriver(engines(1), { timeScale: 10, clock: () => time.now, timers: time, sink: rec.sink });
    d.start();
    time.runUntil(1005);
    expect(d.simNow()).toBe(50);
    const r = d.submit(0, { id: 'a', prompt: promptFromTokens(prompt(1, 1000), 16), osl: 5 });
    expect(r).toMatchObject({ ok: true, arrivalMs: 50 });
    time.runUntil(10_000);
    const first = rec.got.find((g) => g.kind === 'first') as Extract<Got, { kind: 'first' }>;
    const done = rec.got.find((g) => g.kind === 'done') as Extract<Got, { kind: 'done' }>;
    expect(first.ft.atMs).toBeGreaterThan(50);
    expect(done.f.atMs).toBeGreaterThan(first.ft.atMs);
    // Released no earlier than due, and at most one timer tick (1 ms wall, ms-rounded) later.
    for (const [sim, wall] of [
      [first.ft.atMs, first.wall],
      [done.f.atMs, done.wall],
    ] as const) {
      expect(wall).toBeGreaterThanOrEqual(1000 + sim / 10);
      expect(wall).toBeLessThanOrEqual(1000 + sim / 10 + 1);
    }
    // Idle afterwards: no timer left (no busy loop), and time passing does nothing.
    expect(time.pending.size).toBe(0);
    const steps = d.stats.steps;
    time.runUntil(100_000);
    expect(d.stats.steps).toBe(steps);
  });

  it('does not drift: under timer jitter every sim time equals an offline replay of the same arrivals', () => {
    const arrivals = workload(60, 3);
    let s = 12345;
    const jitter = () => {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      return (s % 1000) / 250; // 0..4 ms late
    };
    for (const timeScale of [0.5, 1, 7.5]) {
      const run = live(arrivals, 3, timeScale, jitter);
      const ref = offline(arrivals, run.simArrival, 3);
      const dones = run.got.filter((g): g is Extract<Got, { kind: 'done' }> => g.kind === 'done');
      expect(dones).toHaveLength(arrivals.length);
      for (const g of dones) {
        const want = ref.get(g.f.requestId)!;
        expect(g.f).toEqual(want);
        // Jitter delays delivery in wall time, never the sim time it reports.
        expect(g.wall).toBeGreaterThanOrEqual(g.f.atMs / timeScale);
      }
      // Fast-forward across late wake-ups means fewer step calls than passes, never more.
      expect(run.driver.stats.steps).toBeLessThanOrEqual(run.driver.stats.passes);
    }
  });

  it('publishes each worker\'s KV events in order with consecutive event ids, and results in sim-time order', () => {
    const arrivals = workload(80, 2);
    const run = live(arrivals, 2, 3, () => 0, 4); // a small per-turn budget: work spans many turns
    const ids = new Map<number, bigint[]>();
    const lastKvAt = new Map<number, number>();
    let lastResultAt = -Infinity;
    const firstSeen = new Set<string>();
    for (const g of run.got) {
      if (g.kind === 'kv') {
        expect(g.atMs).toBeGreaterThanOrEqual(lastKvAt.get(g.worker) ?? -Infinity);
        lastKvAt.set(g.worker, g.atMs);
        for (const e of g.events) {
          expect(e.workerId).toBe(run.eng[g.worker]!.workerId);
          (ids.get(g.worker) ?? ids.set(g.worker, []).get(g.worker)!).push(e.eventId);
        }
      } else {
        const at = g.kind === 'first' ? g.ft.atMs : g.f.atMs;
        expect(at).toBeGreaterThanOrEqual(lastResultAt);
        lastResultAt = at;
        if (g.kind === 'first') firstSeen.add(g.ft.requestId);
        else expect(firstSeen.has(g.f.requestId)).toBe(true);
      }
    }
    expect(ids.size).toBe(2);
    for (const [, list] of ids) {
      expect(list.length).toBeGreaterThan(10);
      list.forEach((id, i) => expect(id).toBe(BigInt(i + 1)));
    }
    expect(run.eng[1]!.workerId >= 1n << 63n).toBe(true);
    expect(run.got.filter((g) => g.kind === 'done')).toHaveLength(80);
  });

  it('sleeps between events: wake-ups are bounded by the work done, not by elapsed time', () => {
    const arrivals = workload(20, 2).map((a, i) => ({ ...a, wall: i * 5000 })); // long idle gaps
    const run = live(arrivals, 2, 1, () => 0);
    const results = run.got.filter((g) => g.kind !== 'kv').length;
    expect(run.driver.stats.wakeups).toBeLessThanOrEqual(run.driver.stats.steps + results + arrivals.length);
    expect(run.time.pending.size).toBe(0);
  });

  it('refuses what the engine refuses, without scheduling anything', () => {
    const time = new FakeTime();
    const rec = recorder(time);
    const d = new RealTimeDriver(engines(1), { timeScale: 1, clock: () => time.now, timers: time, sink: rec.sink });
    d.start();
    expect(d.submit(0, { id: 'x', prompt: promptFromTokens(prompt(1, 100), 64), osl: 1 })).toMatchObject({ ok: false, code: 'block_size_mismatch' });
    expect(time.pending.size).toBe(0);
    expect(() => new RealTimeDriver([], { timeScale: 0, clock: () => 0, sink: rec.sink })).toThrow(RangeError);
  });
});
