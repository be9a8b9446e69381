import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { PoolState } from '@vantage/observation';
import { PrefixIndex as RunIndex } from '@vantage/prefix-index';
import type { Logger } from '@vantage/runtime';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import type { WorkerKvQueryResponse } from '@vantage/wire';
import { Recovery, recoveryMetrics, type RecoveryAnswer, type RecoveryMetrics } from '../src/recovery';
import type { RecoveryTarget } from '../src/worker-query';

/**
 * Recovery's bookkeeping, with a real pool and index and a querier the test answers by hand (the
 * live test against Dynamo's own workers is test/recovery-dynamo.int.test.ts).
 */
const BS = 4;
const W = (2n ** 64n - 5n) as WorkerId; // past 2^63: ids stay exact
const OTHER = 12n as WorkerId;

/** A stored event of one chain: block i's local hash is 1000 * chain + i, its engine id 10 * that. */
function stored(w: WorkerId, id: bigint, chain: number, from: number, to: number): KvEvent {
  const n = to - from;
  const tokensHashes = new BigUint64Array(n);
  const blockHashes = new BigUint64Array(n);
  for (let i = 0; i < n; i++) {
    tokensHashes[i] = BigInt(1000 * chain + from + i);
    blockHashes[i] = BigInt(10 * (1000 * chain + from + i));
  }
  return {
    workerId: w,
    dpRank: 0,
    storageTier: 'device',
    eventId: id,
    data: { kind: 'stored', parentHash: from === 0 ? null : (BigInt(10 * (1000 * chain + from - 1)) as ExternalHash), startPosition: null, blockHashes, tokensHashes },
  };
}
function removed(w: WorkerId, id: bigint, chain: number, from: number, to: number): KvEvent {
  const blockHashes = new BigUint64Array(to - from);
  for (let i = from; i < to; i++) blockHashes[i - from] = BigInt(10 * (1000 * chain + i));
  return { workerId: w, dpRank: 0, storageTier: 'device', eventId: id, data: { kind: 'removed', blockHashes } };
}
const prompt = (chain: number, n: number): BigUint64Array => BigUint64Array.from({ length: n }, (_, i) => BigInt(1000 * chain + i));

/** Every event the worker published, ids 1.. in order. */
function history(): KvEvent[] {
  return [
    stored(W, 1n, 1, 0, 4), // chain 1: 4 blocks
    stored(W, 2n, 2, 0, 3), // chain 2: 3 blocks
    stored(W, 3n, 1, 4, 6), // chain 1 grows to 6
    removed(W, 4n, 2, 1, 3), // chain 2 back to 1 block
    stored(W, 5n, 3, 0, 5), // chain 3: 5 blocks
    stored(W, 6n, 2, 1, 2), // chain 2 to 2 blocks
    removed(W, 7n, 1, 5, 6), // chain 1 to 5
    stored(W, 8n, 4, 0, 2),
  ];
}

/** The worker's tree after events 1..upTo, as its local index dumps it (synthetic ids from 0). */
function dumpAfter(upTo: number): KvEvent[] {
  const ref = new RunIndex(BS);
  for (const e of history().slice(0, upTo)) ref.apply(e, 0);
  const out: KvEvent[] = [];
  for (let chain = 1; chain <= 4; chain++) {
    const held = ref.match(prompt(chain, 8)).workers.find((x) => x.workerId === W)?.deviceBlocks ?? 0;
    if (held > 0) out.push({ ...stored(W, BigInt(out.length), chain, 0, held) });
  }
  return out;
}

/** Per chain, the blocks an index says the worker holds. */
function answers(idx: { match(l: BigUint64Array): { workers: { workerId: WorkerId; deviceBlocks: number }[] } }): number[] {
  return [1, 2, 3, 4].map((c) => idx.match(prompt(c, 8)).workers.find((x) => x.workerId === W)?.deviceBlocks ?? 0);
}

function quietLog(): Logger & { lines: { level: string; obj: Record<string, unknown> }[] } {
  const lines: { level: string; obj: Record<string, unknown> }[] = [];
  const log = {
    lines,
    info: (obj: Record<string, unknown>) => lines.push({ level: 'info', obj }),
    warn: (obj: Record<string, unknown>) => lines.push({ level: 'warn', obj }),
    error: (obj: Record<string, unknown>) => lines.push({ level: 'error', obj }),
    debug: () => {},
  };
  return log as unknown as Logger & { lines: typeof lines };
}

interface Harness {
  state: PoolState;
  rec: Recovery;
  metrics: RecoveryMetrics;
  registry: Registry;
  calls: { target: RecoveryTarget; start: bigint | null; answer: (r: WorkerKvQueryResponse) => void; fail: (e: Error) => void }[];
  answers: RecoveryAnswer[];
  clock: { t: number };
  log: ReturnType<typeof quietLog>;
  live: (e: KvEvent) => void;
  settle: () => Promise<void>;
  target: { value: RecoveryTarget | null };
}

function harness(opts: { maxBufferedEvents?: number; maxInFlight?: number } = {}): Harness {
  const clock = { t: 1_000 };
  const state = new PoolState({ pool: 'p', blockSize: BS, selection: { kind: 'kv_router', formula: 'prefill_load_scale' }, bookingTtlMs: 300_000, workerTtlMs: 60_000 });
  const registry = new Registry();
  const metrics = recoveryMetrics(registry);
  const calls: Harness['calls'] = [];
  const answers: RecoveryAnswer[] = [];
  const log = quietLog();
  const target = { value: { workerId: W, dpRank: 0, transport: 'tcp', address: '127.0.0.1:1/x', codec: 'msgpack' } as RecoveryTarget | null };
  const rec = new Recovery({
    pool: 'p',
    state: () => state,
    targetOf: (w, dp) => (w === W && dp === 0 ? target.value : null),
    querier: {
      query: (t, start) =>
        new Promise<WorkerKvQueryResponse>((resolve, reject) => {
          calls.push({ target: t, start, answer: resolve, fail: reject });
        }),
    },
    deliver: (a) => answers.push(a),
    settings: { initialBackoffMs: 100, maxBackoffMs: 1_000, maxBufferedEvents: opts.maxBufferedEvents ?? 1000, maxInFlight: opts.maxInFlight ?? 16 },
    metrics,
    log,
    now: () => clock.t,
    random: () => 0.5, // no jitter
  });
  const live = (e: KvEvent): void => rec.afterKvEvent(e, state.applyKvEvent(e, clock.t));
  // Answers reach the writer through the queue: here, applied in order when the test says.
  const settle = async (): Promise<void> => {
    await new Promise((r) => setImmediate(r));
    for (const a of answers.splice(0)) rec.applyAnswer(a);
  };
  return { state, rec, metrics, registry, calls, answers, clock, log, live, settle, target };
}

const outcome = async (h: Harness, o: string): Promise<number> =>
  (await h.metrics.outcomes.get()).values.find((v) => v.labels.outcome === o)?.value ?? 0;

describe('recovery of a suspect worker', () => {
  it('a gap makes it suspect; the dump replaces its state and the suspicion ends, without a cleared', async () => {
    const h = harness();
    const hist = history();
    for (const e of hist.slice(0, 3)) h.live(e);
    for (const e of hist.slice(5, 6)) h.live(e); // 4 and 5 lost: gap
    expect(h.state.index.suspectOf(W, 0)?.reason).toBe('event_gap');
    h.rec.pump();
    expect(h.calls).toHaveLength(1);
    expect(h.calls[0]!.start).toBeNull(); // a whole-tree query
    expect(h.calls[0]!.target.workerId).toBe(W);
    h.calls[0]!.answer({ kind: 'tree_dump', events: dumpAfter(6), lastEventId: 6n });
    await h.settle();
    expect(h.state.index.suspectOf(W, 0)).toBeNull();
    const ref = new RunIndex(BS);
    for (const e of hist.slice(0, 6)) ref.apply(e, 0);
    expect(answers(h.state.index)).toEqual(answers(ref));
    expect(h.state.index.lastEventIdOf(W, 0)).toBe(6n);
    expect(h.state.observe(new BigUint64Array(0), 0, 1_000).workers.find((w) => w.workerId === W && w.dpRank === 0)?.recoveredAtMs).toBe(1_000);
    expect(await outcome(h, 'recovered')).toBe(1);
    // The stream continues from the dump's last id: 7 applies, an old 5 is a duplicate.
    h.live(hist[6]!);
    expect(h.state.applyKvEvent(hist[4]!, 0).status).toBe('duplicate');
    ref.apply(hist[6]!, 0);
    expect(answers(h.state.index)).toEqual(answers(ref));
    expect(h.state.index.suspectOf(W, 0)).toBeNull();
  });

  it('events that arrive while the query is out are neither lost nor applied twice', async () => {
    const h = harness();
    const hist = history();
    h.live(hist[0]!);
    h.live(hist[2]!); // 2 lost
    h.rec.pump(); // baseline 3
    // Meanwhile 4, 5, 6 and 7 arrive and are applied (the worker still suspect).
    for (const e of hist.slice(3, 7)) h.live(e);
    // The worker dumped its tree after event 5: 6 and 7 are newer than the dump.
    h.calls[0]!.answer({ kind: 'tree_dump', events: dumpAfter(5), lastEventId: 5n });
    await h.settle();
    const ref = new RunIndex(BS);
    for (const e of hist.slice(0, 7)) ref.apply(e, 0);
    expect(answers(h.state.index)).toEqual(answers(ref));
    expect(h.state.index.suspectOf(W, 0)).toBeNull();
    expect((await h.metrics.replayedEvents.get()).values[0]?.value).toBe(2); // 6 and 7, once each
    h.live(hist[7]!);
    ref.apply(hist[7]!, 0);
    expect(answers(h.state.index)).toEqual(answers(ref));
  });

  it('a dump older than what was applied when the query left is not applied; it is asked again', async () => {
    const h = harness();
    const hist = history();
    for (const e of [hist[0]!, hist[1]!, hist[3]!]) h.live(e); // 3 lost; baseline 4
    h.rec.pump();
    h.calls[0]!.answer({ kind: 'tree_dump', events: dumpAfter(2), lastEventId: 2n });
    await h.settle();
    expect(await outcome(h, 'stale')).toBe(1);
    expect(h.state.index.suspectOf(W, 0)).not.toBeNull();
    h.clock.t += 100;
    h.rec.pump();
    expect(h.calls).toHaveLength(2);
    h.calls[1]!.answer({ kind: 'tree_dump', events: dumpAfter(4), lastEventId: 4n });
    await h.settle();
    expect(h.state.index.suspectOf(W, 0)).toBeNull();
    const ref = new RunIndex(BS);
    for (const e of hist.slice(0, 4)) ref.apply(e, 0);
    expect(answers(h.state.index)).toEqual(answers(ref));
  });

  it('failures are retried with growing backoff, logged once per step, and never touch the state', async () => {
    const h = harness();
    const hist = history();
    h.live(hist[0]!);
    h.live(hist[2]!);
    const before = answers(h.state.index);
    h.rec.pump();
    h.calls[0]!.fail(new Error('connect ECONNREFUSED'));
    await h.settle();
    expect(await outcome(h, 'failed_query')).toBe(1);
    const waits: number[] = [];
    for (let i = 1; i <= 5; i++) {
      // Not before the backoff has passed.
      const t0 = h.clock.t;
      let issued = h.calls.length;
      while (h.calls.length === issued) {
        h.clock.t += 10;
        h.rec.pump();
      }
      waits.push(h.clock.t - t0);
      issued = h.calls.length;
      const c = h.calls[issued - 1]!;
      if (i % 2 === 0) c.answer({ kind: 'error', message: 'worker busy' });
      else c.answer({ kind: 'tree_dump_failed', lastEventId: 3n, message: 'dump failed' });
      await h.settle();
    }
    expect(waits).toEqual([100, 200, 400, 800, 1000]);
    expect(await outcome(h, 'failed_answer')).toBe(5);
    expect(answers(h.state.index)).toEqual(before);
    expect(h.state.index.suspectOf(W, 0)).not.toBeNull();
    expect(h.log.lines.filter((l) => l.level === 'warn')).toHaveLength(6);
  });

  it("a dump naming another worker's blocks is refused whole", async () => {
    const h = harness();
    h.live(history()[0]!);
    h.live(history()[2]!);
    const before = answers(h.state.index);
    h.rec.pump();
    h.calls[0]!.answer({ kind: 'tree_dump', events: [...dumpAfter(3), stored(OTHER, 9n, 9, 0, 2)], lastEventId: 3n });
    await h.settle();
    expect(await outcome(h, 'failed_apply')).toBe(1);
    expect(answers(h.state.index)).toEqual(before);
    expect(h.state.index.suspectOf(W, 0)).not.toBeNull();
  });

  it('too many events during one query abandon that attempt; a worker that left drops its answer', async () => {
    const h = harness({ maxBufferedEvents: 2 });
    const hist = history();
    h.live(hist[0]!);
    h.live(hist[2]!);
    h.rec.pump();
    for (const e of hist.slice(3, 6)) h.live(e);
    h.calls[0]!.answer({ kind: 'tree_dump', events: dumpAfter(4), lastEventId: 4n });
    await h.settle();
    expect(await outcome(h, 'abandoned_buffer')).toBe(1);
    h.clock.t += 1_000;
    h.rec.pump();
    expect(h.calls).toHaveLength(2);
    h.rec.forget(W);
    h.calls[1]!.answer({ kind: 'tree_dump', events: dumpAfter(6), lastEventId: 6n });
    await h.settle();
    expect(await outcome(h, 'abandoned_gone')).toBe(1);
    expect(h.state.index.suspectOf(W, 0)).not.toBeNull();
  });

  it('at most maxInFlight queries are out at once; the rest go as answers come back', async () => {
    const h = harness({ maxInFlight: 2 });
    const ws = [W, OTHER, 13n as WorkerId, 14n as WorkerId];
    const rec = new Recovery({
      pool: 'p',
      state: () => h.state,
      targetOf: (w, dp) => ({ workerId: w, dpRank: dp, transport: 'tcp', address: '127.0.0.1:1/x', codec: 'msgpack' }),
      querier: { query: (t, start) => new Promise((resolve, reject) => h.calls.push({ target: t, start, answer: resolve, fail: reject })) },
      deliver: (a) => h.answers.push(a),
      settings: { initialBackoffMs: 100, maxBackoffMs: 1_000, maxBufferedEvents: 10, maxInFlight: 2 },
      metrics: h.metrics,
      log: h.log,
      now: () => h.clock.t,
    });
    for (const w of ws) rec.request(w, 0, 'listed');
    rec.pump();
    expect(h.calls).toHaveLength(2);
    rec.pump();
    expect(h.calls).toHaveLength(2);
    h.calls[0]!.answer({ kind: 'tree_dump', events: [], lastEventId: 0n });
    await new Promise((r) => setImmediate(r));
    for (const a of h.answers.splice(0)) rec.applyAnswer(a);
    rec.pump();
    expect(h.calls).toHaveLength(3);
  });

  it('without a recovery target it waits; once one is known the query goes out', async () => {
    const h = harness();
    h.target.value = null;
    h.live(history()[1]!); // first id 2: missed start
    expect(h.state.index.suspectOf(W, 0)?.reason).toBe('missed_start');
    h.rec.pump();
    expect(h.calls).toHaveLength(0);
    h.target.value = { workerId: W, dpRank: 0, transport: 'tcp', address: '127.0.0.1:1/x', codec: 'msgpack' };
    h.rec.pump();
    expect(h.calls).toHaveLength(1);
    h.calls[0]!.answer({ kind: 'tree_dump', events: dumpAfter(2), lastEventId: 2n });
    await h.settle();
    expect(h.state.index.suspectOf(W, 0)).toBeNull();
    expect(h.rec.pending()).toHaveLength(0);
  });
});
