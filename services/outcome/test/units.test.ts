// Transport-free parts of the outcome service: the join state machine, the
// lifecycle decoder, sequence ranges and the committed-set bookkeeping.
import fc from 'fast-check';
import { GatewayClient } from '@vantage/gateway-client';
import type { NatsConnection } from '@vantage/runtime';
import type { WorkerId } from '@vantage/types';
import { describe, expect, it } from 'vitest';
import { SEND_CHUNK_RECORDS, sendRequests } from '../src/batch';
import { Joiner } from '../src/joiner';
import { decodeLifecycle } from '../src/lifecycle';
import { CommittedSet, parseProgress, progressRecord } from '../src/progress';
import { inRanges, mergeRanges, toRanges } from '../src/ranges';
import { ReadPosition } from '../src/readposition';
import { decision } from './helpers';

const te = new TextEncoder();
const ev = (requestId: string, kind: string, atMs: number, extra: Record<string, unknown> = {}) => ({ requestId, sessionId: 's', pool: 'p', kind: kind as 'done', atMs, ...extra });

describe('Joiner', () => {
  const opts = { joinWindowMs: 1000, terminalGraceMs: 100, recentlyClosedCap: 10 };
  const src = (seq: number, part: 'decision' | 'done' | 'first_token' = 'decision') => ({ stream: 'S', seq, part, handle: seq });

  it('closes complete at once when decision, terminal and usage are in, in any order', () => {
    const j = new Joiner<number>(opts);
    const d = decision(1, 'u');
    j.addEvent(ev(d.requestId, 'done', d.timestampMs + 500, { usage: { inputTokens: 10, outputTokens: 2, cachedTokens: 4 } }), src(2, 'done'), 0);
    expect(j.takeComplete(0)).toEqual([]);
    j.addDecision(d, src(1), 5);
    const [c] = j.takeComplete(5);
    expect(c?.record).toMatchObject({ status: 'completed', latencyMs: 500, uncachedInputTokens: 6, join: { closedBy: 'complete' } });
    expect(c?.sources.map((s) => s.handle)).toEqual([2, 1]);
    expect(j.pending).toBe(0);
  });

  it('waits the grace for usage after the terminal event, and closes early if usage comes', () => {
    const j = new Joiner<number>(opts);
    const a = decision(1, 'g');
    const b = decision(2, 'g');
    j.addDecision(a, src(1), 0);
    j.addEvent(ev(a.requestId, 'done', a.timestampMs + 9), src(2, 'done'), 0);
    j.addDecision(b, src(3), 0);
    j.addEvent(ev(b.requestId, 'done', b.timestampMs + 9), src(4, 'done'), 0);
    expect(j.takeComplete(50)).toEqual([]);
    j.addEvent(ev(b.requestId, 'usage', b.timestampMs + 10, { usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 } }), src(5, 'done'), 60);
    expect(j.takeComplete(60).map((c) => c.record.requestId)).toEqual([b.requestId]);
    expect(j.takeComplete(100).map((c) => c.record.requestId)).toEqual([a.requestId]);
  });

  it('holds a join past its deadline until the streams are read a window past its publish time, or the hold limit', () => {
    const j = new Joiner<number>({ ...opts, maxHoldMs: 5000 });
    const done = (d: ReturnType<typeof decision>) => ev(d.requestId, 'done', d.timestampMs + 9, { usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 } });
    const a = decision(1, 'h');
    // Received at 0, published at -50: deadline 1000, read position needed 950.
    j.addDecision(a, src(1), 0, -50);
    expect(j.nextDueMs(500, 400)).toBe(1000);
    // Past its deadline, the streams read only up to 900: held, due again after the recheck.
    expect(j.takeExpired(1200, Infinity, 900)).toEqual([]);
    expect(j.held).toBe(1);
    expect(j.nextDueMs(1200, 900)).toBe(1250);
    // Its done event, read late from a backlog: the join completes instead of closing incomplete.
    j.addEvent(done(a), src(2, 'done'), 1300, {}, 0);
    expect(j.takeComplete(1300).map((c) => c.record.status)).toEqual(['completed']);

    // Held joins are passed over, not in the way: a later join whose read position is reached closes.
    const b = decision(2, 'h');
    const c = decision(3, 'h');
    j.addDecision(b, src(3), 2000, 2000);
    j.addDecision(c, src(4), 2100, 1000);
    expect(j.takeExpired(3200, Infinity, 2500).map((x) => x.record.requestId)).toEqual([c.requestId]);
    // With no constraint from the read position, deadlines are the wall clock's.
    const [x] = j.takeExpired(3200);
    expect([x?.record.requestId, x?.record.status, x?.record.join.joinLatencyMs]).toEqual([b.requestId, 'incomplete', 1200]);

    // The hold limit: at deadline + maxHoldMs a join closes whatever the read position.
    const d = decision(4, 'h');
    j.addDecision(d, src(5), 10_000, 10_000);
    expect(j.takeExpired(15_999, Infinity, 0)).toEqual([]);
    expect(j.nextDueMs(15_990, 0)).toBe(16_000);
    expect(j.takeExpired(16_000, Infinity, 0).map((y) => y.record.status)).toEqual(['incomplete']);
    expect(j.held).toBe(0);
    expect(j.pending).toBe(0);

    // A reset (lost ownership) forgets held joins too.
    j.addDecision(decision(5, 'h'), src(6), 20_000, 20_000);
    expect(j.takeExpired(21_500, Infinity, 0)).toEqual([]);
    expect(j.held).toBe(1);
    j.clear();
    expect([j.held, j.pending]).toEqual([0, 0]);
  });

  it('closes by deadline as incomplete or timeout, oldest first, and treats later messages as late', () => {
    const j = new Joiner<number>(opts);
    const a = decision(1, 'w');
    const b = decision(2, 'w');
    j.addDecision(a, src(1), 0);
    j.addDecision(b, src(2), 10);
    j.addEvent(ev(b.requestId, 'first_token', b.timestampMs + 5), src(3, 'first_token'), 20);
    expect(j.nextDueMs(0)).toBe(1000);
    expect(j.takeExpired(999)).toEqual([]);
    const closed = j.takeExpired(2000);
    expect(closed.map((c) => [c.record.requestId, c.record.status, c.record.join.closedBy])).toEqual([
      [a.requestId, 'incomplete', 'deadline'],
      [b.requestId, 'timeout', 'deadline'],
    ]);
    expect(j.addEvent(ev(a.requestId, 'done', 1), src(9, 'done'), 2001)).toBe('late');
    expect(closed[0]?.record.join.joinLatencyMs).toBe(2000);
    // An abandoned batch un-closes its joins: the redelivery joins again.
    j.forgetClosed([a.requestId]);
    expect(j.addEvent(ev(a.requestId, 'done', 1), src(9, 'done'), 2002)).toBe('joined');
  });

  it('recognises a redelivered source it holds and swaps the handle', () => {
    const j = new Joiner<number>(opts);
    const d = decision(1, 'r');
    j.addDecision(d, src(7), 0);
    expect(j.rehandle(d.requestId, 'S', 7, 70)).toBe(true);
    expect(j.rehandle(d.requestId, 'S', 8, 80)).toBe(false);
    expect([...j.heldHandles()]).toEqual([70]);
  });

  it('closes background traffic on its terminal event (usage grace as usual), timed from arrivalMs, never incomplete', () => {
    const j = new Joiner<number>(opts);
    const bg = { background: true, arrivalMs: 1_000 };
    // With usage on the terminal event: at once, no decision awaited.
    j.addEvent(ev('bg-1', 'first_token', 1_250), src(1, 'first_token'), 0, bg);
    j.addEvent(ev('bg-1', 'done', 1_900, { usage: { inputTokens: 100, outputTokens: 10, cachedTokens: 40 } }), src(2, 'done'), 5, bg);
    const [a] = j.takeComplete(5);
    expect(a?.record).toMatchObject({
      requestId: 'bg-1',
      status: 'completed',
      background: true,
      decision: null,
      arrivalMs: 1_000,
      ttftMs: 250,
      latencyMs: 900,
      uncachedInputTokens: 60,
      join: { hasDecision: false, closedBy: 'complete' },
    });
    // Terminal without usage: the usual grace, then complete; a usage report within it is joined.
    j.addEvent(ev('bg-2', 'first_token', 1_100), src(3, 'first_token'), 10, bg);
    j.addEvent(ev('bg-2', 'failed', 1_300, { error: 'ENGINE_ERROR: x' }), src(4, 'done'), 10, bg);
    j.addEvent(ev('bg-3', 'cancelled', 1_200), src(5, 'done'), 10, bg);
    expect(j.takeComplete(50)).toEqual([]);
    j.addEvent(ev('bg-2', 'usage', 1_310, { usage: { inputTokens: 5, outputTokens: 0, cachedTokens: 0 } }), src(6, 'done'), 60, bg);
    const [b] = j.takeComplete(60);
    expect(b?.record).toMatchObject({ requestId: 'bg-2', status: 'failed', error: 'ENGINE_ERROR: x', background: true, ttftMs: 100, inputTokens: 5, join: { closedBy: 'complete' } });
    const [c] = j.takeComplete(110);
    expect(c?.record).toMatchObject({ requestId: 'bg-3', status: 'cancelled', background: true, ttftMs: null, join: { closedBy: 'complete', hasUsage: false } });
    expect(j.pending).toBe(0);
    // Only the terminal event need carry the marker.
    j.addEvent(ev('bg-4', 'first_token', 1_050), src(7, 'first_token'), 200);
    j.addEvent(ev('bg-4', 'done', 1_400, { usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 } }), src(8, 'done'), 200, bg);
    expect(j.takeComplete(200).map((x) => [x.record.requestId, x.record.background, x.record.ttftMs])).toEqual([['bg-4', true, 50]]);
  });

  it('background without a terminal event times out at the window (timeout, not incomplete)', () => {
    const j = new Joiner<number>(opts);
    j.addEvent(ev('bg-5', 'first_token', 1_080), src(1, 'first_token'), 0, { background: true, arrivalMs: 1_000 });
    expect(j.takeComplete(500)).toEqual([]);
    const [c] = j.takeExpired(1_000);
    expect(c?.record).toMatchObject({ status: 'timeout', background: true, ttftMs: 80, join: { closedBy: 'deadline' } });
  });

  it('a decision that arrives for a background-marked request stays authoritative', () => {
    const j = new Joiner<number>(opts);
    const d = decision(1, 'bgd');
    j.addEvent(ev(d.requestId, 'first_token', d.timestampMs + 70), src(1, 'first_token'), 0, { background: true, arrivalMs: d.timestampMs - 500 });
    j.addDecision(d, src(2), 1);
    j.addEvent(ev(d.requestId, 'done', d.timestampMs + 300, { usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 } }), src(3, 'done'), 2, { background: true, arrivalMs: d.timestampMs - 500 });
    const [c] = j.takeComplete(2);
    expect(c?.record).toMatchObject({ background: false, arrivalMs: d.timestampMs, ttftMs: 70, latencyMs: 300, join: { hasDecision: true } });
    expect(c?.record.decision?.recordId).toBe(d.recordId);
  });

  it('an unmarked request without a decision still waits for the window and is incomplete', () => {
    const j = new Joiner<number>(opts);
    j.addEvent(ev('nodec', 'done', 5, { usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 } }), src(1, 'done'), 0, { arrivalMs: 1 });
    expect(j.takeComplete(999)).toEqual([]);
    expect(j.takeExpired(1_000).map((c) => [c.record.status, c.record.background])).toEqual([['incomplete', false]]);
  });

  it('honours limits per call', () => {
    const j = new Joiner<number>(opts);
    for (let i = 0; i < 5; i++) j.addDecision(decision(i, 'l'), src(i), 0);
    expect(j.takeExpired(5000, 2)).toHaveLength(2);
    expect(j.takeExpired(5000)).toHaveLength(3);
  });
});

describe('decodeLifecycle (the protocol codec)', () => {
  const ok = { v: 1, requestId: 'r', sessionId: 's', pool: 'p', kind: 'done', atMs: 12 };
  it('accepts the wire shape and tolerates unknown keys', () => {
    expect(decodeLifecycle(te.encode(JSON.stringify({ ...ok, extra: true, usage: { inputTokens: 1, outputTokens: 2, cachedTokens: 0 } })), 'p')).toEqual({
      ok: true,
      value: {
        event: { requestId: 'r', sessionId: 's', pool: 'p', kind: 'done', atMs: 12, usage: { inputTokens: 1, outputTokens: 2, cachedTokens: 0 } },
        background: false,
        arrivalMs: null,
      },
    });
  });
  it('maps the error object to `code: message`, keeps workerId out, carries background and arrivalMs', () => {
    const r = decodeLifecycle(
      te.encode(JSON.stringify({ ...ok, kind: 'failed', workerId: '18446744073709551615', dpRank: 3, error: { code: 'ENGINE_OOM', message: 'out of KV blocks' }, background: true, arrivalMs: 5 })),
      'p',
    );
    expect(r).toEqual({
      ok: true,
      value: { event: { requestId: 'r', sessionId: 's', pool: 'p', kind: 'failed', atMs: 12, error: 'ENGINE_OOM: out of KV blocks' }, background: true, arrivalMs: 5 },
    });
    const bare = decodeLifecycle(te.encode(JSON.stringify({ ...ok, kind: 'failed', error: { code: 'ABORTED', message: null } })), 'p');
    expect(bare.ok && bare.value.event.error).toBe('ABORTED');
  });
  it('decodes exactly what GatewayClient.failed() publishes', () => {
    const sent: { subject: string; data: Uint8Array }[] = [];
    const nc = { publish: (subject: string, data: Uint8Array) => void sent.push({ subject, data }) } as unknown as NatsConnection;
    const pool = { model: 'm', pool: 'small', blockSize: 16 };
    const gw = new GatewayClient({ nc, pools: { efficient: pool, capable: { ...pool, pool: 'large' } } });
    gw.failed({ requestId: 'r-1', sessionId: 's-1', pool: 'small', workerId: 7n as WorkerId, dpRank: 0 }, { code: 'ENGINE_ERROR', message: 'engine exited' }, 1_732_000_000_500);
    expect(sent).toHaveLength(1);
    const subject = sent[0]!.subject;
    const r = decodeLifecycle(sent[0]!.data, subject.slice(subject.lastIndexOf('.') + 1));
    expect(r).toEqual({
      ok: true,
      value: { event: { requestId: 'r-1', sessionId: 's-1', pool: 'small', kind: 'failed', atMs: 1_732_000_000_500, error: 'ENGINE_ERROR: engine exited' }, background: false, arrivalMs: null },
    });
  });
  it.each([
    ['not json', 'LIFECYCLE_NOT_JSON'],
    [JSON.stringify([1]), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, v: 2 }), 'LIFECYCLE_UNKNOWN_VERSION'],
    [JSON.stringify({ ...ok, kind: 'started' }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, atMs: -1 }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, atMs: 12.5 }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, requestId: '' }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, usage: { inputTokens: 1.5, outputTokens: 0, cachedTokens: 0 } }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, error: 7 }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, error: 'a string' }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, workerId: '18446744073709551616' }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, background: 'yes' }), 'LIFECYCLE_INVALID'],
    [JSON.stringify({ ...ok, pool: 'q' }), 'LIFECYCLE_INVALID'],
  ])('rejects %s as %s', (text, code) => {
    const r = decodeLifecycle(te.encode(text), 'p');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.code).toBe(code);
  });
  it('never throws on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (b) => {
        expect(typeof decodeLifecycle(b).ok).toBe('boolean');
      }),
      { seed: 42, numRuns: 500 },
    );
  });
});

describe('ranges and the committed set', () => {
  it('toRanges covers exactly the input (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 300 }), { maxLength: 100 }), fc.integer({ min: 0, max: 320 }), (seqs, probe) => {
        const rs = toRanges(seqs);
        expect(inRanges(rs, probe)).toBe(seqs.includes(probe));
        expect(inRanges(mergeRanges([...rs, ...rs]), probe)).toBe(seqs.includes(probe));
      }),
      { seed: 7, numRuns: 300 },
    );
  });

  it('answers done over decision, dedupes by nonce, and prunes after the retention', () => {
    const c = new CommittedSet(1000);
    const r1 = progressRecord('w', 'n1', 0, new Map(), new Map([['D', [5, 6]]]));
    const r2 = progressRecord('w', 'n2', 0, new Map([['D', [5]], ['L', [9, 10, 11]]]), new Map());
    c.add(r1, 0);
    expect(c.lookup('D', 5)).toBe('decision');
    c.add(r2, 10);
    c.add(r2, 10);
    expect(c.size).toBe(2);
    expect(c.lookup('D', 5)).toBe('done');
    expect(c.lookup('D', 6)).toBe('decision');
    expect(c.lookup('L', 10)).toBe('done');
    expect(c.lookup('L', 12)).toBeUndefined();
    c.noteReconnect(500);
    c.prune(1400);
    expect(c.size).toBe(2); // reconnect at 500 restarts the clock
    c.prune(1600);
    expect(c.size).toBe(0);
    expect(c.lookup('D', 5)).toBeUndefined();
    expect(parseProgress(Buffer.from(JSON.stringify(r2)))).toEqual(r2);
    expect(parseProgress(Buffer.from('{"v":1}'))).toBeNull();
  });
});

describe('configuration', () => {
  it('defaults load and satisfy the cross-field rules; a too-short ack wait is refused', async () => {
    const { loadConfig } = await import('@vantage/runtime');
    const { outcomeConfigSchema, checkOutcomeConfig } = await import('../src/config');
    const cfg = loadConfig(outcomeConfigSchema, { env: {}, defaults: { service: 'outcome' } });
    expect(() => checkOutcomeConfig(cfg)).not.toThrow();
    const bad = loadConfig(outcomeConfigSchema, { env: { VANTAGE_OUTCOME_NATS_ACK_WAIT_MS: '30000' }, defaults: { service: 'outcome' } });
    expect(() => checkOutcomeConfig(bad)).toThrow(/ackWaitMs/);
  });
});

describe('ReadPosition', () => {
  const item = (stream: string, publishMs: number) => ({ stream, publishMs });

  it('is the least over the streams of the first inbox message, else the backlog position, else now', () => {
    const r = new ReadPosition(['D', 'L']);
    // Nothing known: now.
    expect(r.upTo(1000, [], 0)).toBe(1000);
    // The first message of each stream still in the inbox (from the head on), in delivery order.
    expect(r.upTo(1000, [item('L', 10), item('D', 300), item('L', 200), item('D', 400)], 1)).toBe(200);
    // Only one stream in the inbox: the other is caught up (its latest delivery said nothing more was pending).
    r.delivered('L', 500, 0);
    expect(r.upTo(1000, [item('D', 300), item('D', 350)], 0)).toBe(300);
    // …or has a backlog in JetStream: read up to its newest delivery.
    r.delivered('L', 250, 7);
    r.delivered('D', 900, 0);
    expect(r.upTo(1000, [item('D', 600)], 0)).toBe(500);
    expect(r.upTo(1000, [], 0)).toBe(500);
    // A redelivery's older publish time does not move the position back.
    r.delivered('L', 20, 3);
    expect(r.upTo(1000, [], 0)).toBe(500);
    r.delivered('L', 700, 2);
    expect(r.upTo(1000, [], 0)).toBe(700);
    // An empty pull: caught up.
    r.caughtUp('L');
    expect(r.upTo(1000, [], 0)).toBe(1000);
    r.delivered('D', 950, 5);
    expect(r.upTo(1000, [], 0)).toBe(950);
  });
});

describe('sendRequests', () => {
  const msgs = (topic: string, n: number) => Array.from({ length: n }, (_, i) => ({ key: `${topic}${i}`, value: Buffer.from([i & 255]) }));
  const last = { topic: 'progress', messages: [{ partition: 0, value: '{}' }] };

  it('splits a batch into requests of at most SEND_CHUNK_RECORDS records, in order, with the progress record in the last one', () => {
    for (const [a, b] of [[0, 0], [1, 0], [SEND_CHUNK_RECORDS, 0], [SEND_CHUNK_RECORDS - 1, 1], [2 * SEND_CHUNK_RECORDS + 7, SEND_CHUNK_RECORDS + 3]] as const) {
      const byTopic = new Map<string, { key: string; value: Buffer }[]>();
      if (a > 0) byTopic.set('a', msgs('a', a));
      if (b > 0) byTopic.set('b', msgs('b', b));
      const reqs = sendRequests(byTopic, last);
      const flat = reqs.flatMap((r) => r.flatMap((t) => t.messages.map((m) => `${t.topic}:${String(m.key)}`)));
      expect(flat).toEqual([...msgs('a', a).map((m) => `a:${m.key}`), ...msgs('b', b).map((m) => `b:${m.key}`), 'progress:undefined']);
      const sizes = reqs.map((r) => r.filter((t) => t.topic !== 'progress').reduce((x, t) => x + t.messages.length, 0));
      expect(sizes.every((n) => n <= SEND_CHUNK_RECORDS)).toBe(true);
      expect(reqs.length).toBe(Math.max(1, Math.ceil((a + b) / SEND_CHUNK_RECORDS)));
      expect(reqs.at(-1)?.at(-1)).toBe(last);
    }
  });
});

describe('progress records are taken only from our own transactional id', () => {
  it('accepts our writer, refuses another writer and malformed values with a reason', async () => {
    const { acceptProgress } = await import('../src/progress');
    const mine = Buffer.from(JSON.stringify(progressRecord('txn-a', 'n1', 1, new Map([['D', [1, 2]]]), new Map())));
    const forged = Buffer.from(JSON.stringify(progressRecord('txn-evil', 'n2', 1, new Map([['D', [3, 4]]]), new Map())));
    expect(acceptProgress(mine, 'txn-a')).toMatchObject({ ok: true, rec: { writer: 'txn-a', nonce: 'n1' } });
    expect(acceptProgress(forged, 'txn-a')).toMatchObject({ ok: false, code: 'foreign_writer' });
    expect(acceptProgress(Buffer.from('{"v":1}'), 'txn-a')).toMatchObject({ ok: false, code: 'malformed' });
    expect(acceptProgress(null, 'txn-a')).toMatchObject({ ok: false, code: 'malformed' });
  });
});
