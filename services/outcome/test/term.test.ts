// A leader term driven through in-memory lease, Kafka and intake: the
// exactly-once rules (ack after commit, progress-log dedupe, ambiguous
// commits), the end of a term, and a takeover as a new term on the same log.
import { decodeSingleObject, OUTCOME_REGISTRY } from '@vantage/records';
import { describe, expect, it } from 'vitest';
import { parseProgress } from '../src/progress';
import { decision } from './helpers';
import { D, decisionBytes, doneBytes, item, L, MemoryLog, startTerm, until } from './in-memory';

const outcomes = (log: MemoryLog) => log.records('outcomes').map((b) => {
  const r = decodeSingleObject(b, OUTCOME_REGISTRY);
  if (!r.ok) throw new Error(r.reason);
  return r.value;
});

describe('Term', () => {
  it('fences, reads the progress log, then consumes; one transaction per batch with its progress record; acked only after the commit', async () => {
    const log = new MemoryLog();
    const calls: string[] = [];
    const rig = startTerm(log, { spy: (call, state) => calls.push(`${call}:${state}`) });
    const d = decision(1, 'term');
    const dm = item('decision', 1, decisionBytes(d), rig.o);
    const lm = item('lifecycle', 1, doneBytes(d), rig.o);
    rig.send(dm, lm);
    await until('outcome written and sources acked', () => dm.msg.acks === 1 && lm.msg.acks === 1);
    expect(rig.kafka.fences).toBe(1);
    expect(outcomes(log).map((r) => [r.requestId, r.status])).toEqual([[d.requestId, 'completed']]);
    expect(log.records('decisions')).toHaveLength(1);
    // The sentinel of the set-up, then the batch's record naming both sources as done.
    const progress = log.records('progress').map((b) => parseProgress(b));
    expect(progress).toHaveLength(2);
    expect(progress[1]?.done).toEqual({ [D]: [[1, 1]], [L]: [[1, 1]] });
    expect(rig.kafka.ackedAtCommit.every((n) => n === 0)).toBe(true);
    rig.term.stop();
    const end = await rig.run;
    expect(end).toEqual({ cause: 'shutdown', naked: 0 });
    // Fence first, then the follower and the sentinel sync, and only then the batch.
    expect(calls).toEqual(['fence:fencing', 'follow:reading', 'transact:reading', 'transact:consuming']);
    expect(rig.term.state).toEqual({ name: 'ended', cause: 'shutdown', naked: 0 });
    expect(rig.lease.released).toBe(true);
    expect(rig.kafka.closed).toBe(true);
    expect(rig.intake.flushed).toBe(1);
  });

  it('acks a redelivery the progress log lists as done without writing it again', async () => {
    const log = new MemoryLog();
    const first = startTerm(log);
    const d = decision(2, 'term');
    first.send(item('decision', 5, decisionBytes(d), first.o), item('lifecycle', 9, doneBytes(d), first.o));
    await until('first write', () => outcomes(log).length === 1);
    first.term.stop();
    await first.run;

    // The acks were lost: the next term gets both again, as redeliveries.
    const next = startTerm(log);
    const again = [item('decision', 5, decisionBytes(d), next.o, { redelivered: true }), item('lifecycle', 9, doneBytes(d), next.o, { redelivered: true })];
    next.send(...again);
    await until('redeliveries acked', () => again.every((m) => m.msg.acks === 1));
    expect(outcomes(log)).toHaveLength(1);
    expect(log.records('decisions')).toHaveLength(1);
    expect((await next.metrics.redeliveriesSkipped.get()).values.find((v) => v.labels['found'] === 'done')?.value).toBe(2);
    next.term.stop();
    await next.run;
  });

  it('settles an ambiguous commit by the progress log: a fresh producer, a sync, and the batch is not written twice', async () => {
    const log = new MemoryLog();
    const rig = startTerm(log);
    await until('consuming', () => rig.term.state.name === 'consuming');
    rig.kafka.failAfterCommit = 1;
    const d = decision(3, 'term');
    const srcs = [item('decision', 1, decisionBytes(d), rig.o), item('lifecycle', 1, doneBytes(d), rig.o)];
    rig.send(...srcs);
    await until('acked after the commit was confirmed', () => srcs.every((m) => m.msg.acks === 1));
    expect(rig.kafka.fences).toBe(2);
    expect(outcomes(log)).toHaveLength(1);
    expect(rig.health.fail).toBeGreaterThan(0);
    rig.term.stop();
    await rig.run;
  });

  it('writes a batch again when its transaction failed before the commit', async () => {
    const log = new MemoryLog();
    const rig = startTerm(log);
    await until('consuming', () => rig.term.state.name === 'consuming');
    rig.kafka.failBeforeCommit = 1;
    const d = decision(4, 'term');
    const srcs = [item('decision', 1, decisionBytes(d), rig.o), item('lifecycle', 1, doneBytes(d), rig.o)];
    rig.send(...srcs);
    await until('acked', () => srcs.every((m) => m.msg.acks === 1));
    expect(outcomes(log)).toHaveLength(1);
    expect((await rig.metrics.transactions.get()).values.find((v) => v.labels['result'] === 'failed')?.value).toBe(1);
    rig.term.stop();
    await rig.run;
  });

  it('a lost lease ends the term: nothing more commits, everything held is nak\'ed, the key is left alone', async () => {
    const log = new MemoryLog();
    const rig = startTerm(log, { env: { VANTAGE_OUTCOME_LEADER_RENEW_MS: '100' } });
    const d = decision(5, 'term');
    const dm = item('decision', 1, decisionBytes(d), rig.o);
    rig.send(dm);
    // The decision is copied to Kafka; its join stays open (no lifecycle event yet), so it is held unacked.
    await until('decision copied', () => log.records('decisions').length === 1);
    const committed = log.transactions;
    rig.lease.state = 'lost';
    const end = await rig.run;
    expect(end).toEqual({ cause: 'lost', naked: 1 });
    expect(dm.msg.acks).toBe(0);
    expect(dm.msg.naks).toBe(1);
    expect(rig.lease.released).toBe(false);
    // Anything arriving now is not consumed by this term.
    rig.send(item('lifecycle', 1, doneBytes(d), rig.o));
    await new Promise((r) => setTimeout(r, 20));
    expect(log.transactions).toBe(committed);
  });

  it('a takeover is a new term: it reads its predecessor\'s commits and finishes the open join without copying the decision again', async () => {
    const log = new MemoryLog();
    const a = startTerm(log);
    const d = decision(6, 'term');
    a.send(item('decision', 1, decisionBytes(d), a.o));
    await until('decision copied', () => log.records('decisions').length === 1);
    a.lease.state = 'lost';
    await a.run;

    const b = startTerm(log);
    expect(b.term.joiner).not.toBe(a.term.joiner);
    const srcs = [item('decision', 1, decisionBytes(d), b.o, { redelivered: true }), item('lifecycle', 1, doneBytes(d), b.o)];
    b.send(...srcs);
    await until('joined and acked', () => srcs.every((m) => m.msg.acks === 1));
    expect(outcomes(log).map((r) => r.requestId)).toEqual([d.requestId]);
    expect(log.records('decisions')).toHaveLength(1);
    expect((await b.metrics.redeliveriesSkipped.get()).values.find((v) => v.labels['found'] === 'decision_copy')?.value).toBe(1);
    b.term.stop();
    await b.run;
  });

  it('a set-up that hangs ends the term as failed at its bound, releasing the lease', async () => {
    const log = new MemoryLog();
    const rig = startTerm(log, { setupTimeoutMs: 50, followStarts: new Promise(() => {}) });
    const end = await rig.run;
    expect(end.cause).toBe('failed');
    expect(rig.term.state).toEqual({ name: 'ended', cause: 'failed', naked: 0 });
    expect(rig.lease.released).toBe(true);
  });

  it('gives a batch up when the lease lapses while its transaction keeps failing, leaving its sources unacked and nak\'ed', async () => {
    const log = new MemoryLog();
    const rig = startTerm(log, { env: { VANTAGE_OUTCOME_LEADER_RENEW_MS: '100' } });
    await until('consuming', () => rig.term.state.name === 'consuming');
    rig.kafka.failBeforeCommit = 1_000;
    const d = decision(7, 'term');
    const srcs = [item('decision', 1, decisionBytes(d), rig.o), item('lifecycle', 1, doneBytes(d), rig.o)];
    rig.send(...srcs);
    await until('a failed attempt', () => rig.health.fail > 0);
    rig.lease.state = 'lost';
    const end = await rig.run;
    expect(end.cause).toBe('lost');
    expect(srcs.map((m) => [m.msg.acks, m.msg.naks])).toEqual([[0, 1], [0, 1]]);
    expect(outcomes(log)).toHaveLength(0);
  });
});
