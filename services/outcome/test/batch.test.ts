// Batch building on its own: fetched messages in, the records of one
// transaction out (dead letters, decision copies, closed joins, redelivery
// dedupe, the byte cap and ownership), no broker and no term.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { BatchBuilder, newBatch } from '../src/batch';
import type { Held } from '../src/intake';
import { Joiner } from '../src/joiner';
import { outcomeMetrics } from '../src/metrics';
import { CommittedSet, progressRecord } from '../src/progress';
import { decision } from './helpers';
import { D, decisionBytes, doneBytes, item, L, outcomeOptions, TXN } from './in-memory';

function rig(env: Record<string, string> = {}) {
  const o = outcomeOptions({ VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: 'dlq', VANTAGE_OUTCOME_TOPICS_DECISIONS: 'decisions', VANTAGE_OUTCOME_TOPICS_OUTCOMES: 'outcomes', ...env });
  const joiner = new Joiner<Held>({ joinWindowMs: o.joinWindowMs, terminalGraceMs: o.terminalGraceMs, recentlyClosedCap: 100 });
  const committed = new CommittedSet(60_000);
  const metrics = outcomeMetrics(new Registry());
  return { o, joiner, committed, metrics, builder: new BatchBuilder(o, joiner, committed, metrics) };
}
const headers = (m: { headers?: unknown }) => m.headers as Record<string, string>;

describe('BatchBuilder', () => {
  it('dead-letters what does not decode, with the reason, and counts it done', () => {
    const { builder } = rig();
    const b = newBatch();
    const bad = [item('decision', 1, Buffer.from('not avro'), rig().o), item('lifecycle', 2, Buffer.from('{"v":2}'), rig().o), item('decision', 3, Buffer.alloc(2 * 1024 * 1024), rig().o)];
    expect(builder.add(b, bad, Date.now())).toBe(3);
    const dlq = b.byTopic.get('dlq') ?? [];
    expect(dlq.map((m) => headers(m)['vantage-dlq-reason'])).toEqual(['RECORD_BAD_MARKER', 'LIFECYCLE_UNKNOWN_VERSION', 'OVERSIZED']);
    expect(b.deadLetters).toEqual(['RECORD_BAD_MARKER', 'LIFECYCLE_UNKNOWN_VERSION', 'OVERSIZED']);
    expect(b.done.map((h) => h.seq)).toEqual([1, 2, 3]);
    expect(Object.fromEntries(b.doneSeqs)).toEqual({ [D]: [1, 3], [L]: [2] });
  });

  it('copies a decision and holds it until its join closes; the outcome then names every source done', () => {
    const { builder, joiner, o } = rig();
    const d = decision(1, 'batch');
    const b1 = newBatch();
    builder.add(b1, [item('decision', 7, decisionBytes(d), o)], Date.now());
    builder.closeJoins(b1, Date.now(), Date.now());
    expect(b1.byTopic.get('decisions')).toHaveLength(1);
    expect(headers(b1.byTopic.get('decisions')?.[0] ?? {})).toEqual({ 'vantage-source-stream': D, 'vantage-source-seq': '7' });
    expect(b1.copied.map((h) => h.seq)).toEqual([7]);
    expect(b1.done).toEqual([]);
    expect(joiner.pending).toBe(1);

    const b2 = newBatch();
    builder.add(b2, [item('lifecycle', 9, doneBytes(d), o)], Date.now());
    builder.closeJoins(b2, Date.now(), Date.now());
    expect(b2.byTopic.get('outcomes')).toHaveLength(1);
    expect(b2.closedIds).toEqual([d.requestId]);
    expect(Object.fromEntries(b2.doneSeqs)).toEqual({ [L]: [9], [D]: [7] });
    expect(b2.counts.get('outcome\u0000completed')).toBe(1);
  });

  it('dedupes redeliveries against the progress log: done is skipped, a copied decision is joined but not copied again', () => {
    const { builder, committed, o } = rig();
    const a = decision(1, 'redeliver');
    const c = decision(2, 'redeliver');
    committed.add(progressRecord(TXN, 't-1', Date.now(), new Map([[D, [1]], [L, [2]]]), new Map([[D, [3]]])), Date.now());
    const items = [
      item('decision', 1, decisionBytes(a), o, { redelivered: true }),
      item('lifecycle', 2, doneBytes(a), o, { redelivered: true }),
      item('decision', 3, decisionBytes(c), o, { redelivered: true }),
    ];
    // Only redeliveries the log lists as done need no sync (a copied decision's join may have closed since).
    expect(builder.needsSync(items.slice(0, 2))).toBe(false);
    expect(builder.needsSync(items)).toBe(true);
    const b = newBatch();
    builder.add(b, items, Date.now());
    expect(b.skipped.map((h) => h.seq)).toEqual([1, 2]);
    expect(b.byTopic.get('decisions')).toBeUndefined();
    expect(b.copied).toEqual([]);
    expect(builder.needsSync([item('decision', 4, decisionBytes(c), o)])).toBe(false);
  });

  it('stops at the byte cap, leaving the rest for the next batch', () => {
    const { builder, o } = rig({ VANTAGE_OUTCOME_MAX_BATCH_BYTES: String(64 * 1024) });
    const big = Buffer.alloc(40 * 1024, 1);
    const items = [1, 2, 3].map((seq) => item('lifecycle', seq, big, o));
    const b = newBatch();
    // Each is dead-lettered (not JSON) with its 40 KiB kept: the second reaches the cap, the third waits.
    expect(builder.add(b, items, Date.now())).toBe(2);
    expect(b.done.map((h) => h.seq)).toEqual([1, 2]);
  });

  it('drops a message whose ownership lapsed while queued, unprocessed and unacked', async () => {
    const { builder, metrics, o } = rig();
    const d = decision(1, 'late');
    const old = item('decision', 1, decisionBytes(d), o, { receivedAtMs: Date.now() - o.nats.ackWaitMs, ownedUntilMs: Date.now() - o.nats.ackWaitMs / 2 });
    const b = newBatch();
    expect(builder.add(b, [old], Date.now())).toBe(1);
    expect(b.records).toBe(0);
    expect(b.done).toEqual([]);
    expect((await metrics.expiredDropped.get()).values[0]?.value).toBe(1);
  });

  it('closes at most one batch of joins at a time', () => {
    const { builder, o } = rig({ VANTAGE_OUTCOME_MAX_BATCH_RECORDS: '4' });
    const ds = [1, 2, 3, 4, 5].map((i) => decision(i, 'cap'));
    const b1 = newBatch();
    builder.add(b1, ds.flatMap((d, i) => [item('decision', i + 1, decisionBytes(d), o), item('lifecycle', i + 1, doneBytes(d), o)]), Date.now());
    builder.closeJoins(b1, Date.now(), Date.now());
    // Five decision copies already fill the batch past its 4 records: one join still closes (progress is never starved).
    expect(b1.byTopic.get('outcomes')).toHaveLength(1);
    const b2 = newBatch();
    builder.closeJoins(b2, Date.now(), Date.now());
    expect(b2.byTopic.get('outcomes')).toHaveLength(4);
  });
});
