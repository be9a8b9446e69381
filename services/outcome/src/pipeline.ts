/**
 * The batch loop of a leader term, a two-stage pipeline: while batch k's
 * transaction is in flight, batch k+1 is decoded and joined. The overlap
 * keeps the exactly-once rules (README, rule 2): at most one transaction
 * open, each batch acked after its own commit, a sync only with no
 * transaction in flight, and a batch built on memory a reset dropped
 * abandoned unacked.
 */
import type { Message as KafkaMessage } from 'kafkajs';
import { newBatch, sendRequests, type Batch } from './batch';
import type { InboxItem } from './intake';
import { setTimeout as sleep } from 'node:timers/promises';
import { progressRecord } from './progress';
import type { Term } from './term';

export async function runPipeline(t: Term): Promise<void> {
  const { o, joiner, abandoned } = t;
  let inFlight: { b: Batch; result: Promise<boolean> } | null = null;
  /** Waits for the transaction in flight; `ok` false when the loop must stop (gave up), `lost` when ownership lapsed. */
  const settle = async (): Promise<{ ok: boolean; lost: boolean }> => {
    if (inFlight === null) return { ok: true, lost: false };
    const { b, result } = inFlight;
    inFlight = null;
    let committedOk: boolean;
    try {
      committedOk = await result;
    } catch (e) {
      t.d.log.error({ err: e }, 'giving up on the current batch (shutdown or lost lease); its messages are released unacked');
      abandoned.push(...b.done);
      return { ok: false, lost: false };
    }
    if (!committedOk) {
      reset(t, b);
      return { ok: true, lost: true };
    }
    finish(t, b);
    return { ok: true, lost: false };
  };

  while (!t.stopping) {
    const now0 = Date.now();
    const due = joiner.nextDueMs(now0, t.readUpTo(now0));
    if (t.inboxSize() === 0 && (due === undefined || due > now0)) {
      if (inFlight !== null) {
        // Nothing to overlap with: finish the transaction in flight first.
        t.stage = 'commit';
        if (!(await settle()).ok) return;
        t.stage = 'idle';
        continue;
      }
      await t.idle(due === undefined ? 250 : Math.max(1, due - now0));
      if (t.stopping) break;
    }
    if (o.lingerMs > 0 && inFlight === null && t.inboxSize() > 0 && t.inboxSize() < o.nats.fetchBatch) await sleep(o.lingerMs);
    if (t.stopping) break;

    // A redelivered message may need the progress log up to date: no
    // transaction may be in flight while it is looked up.
    if (inFlight !== null && hasRedeliveryAhead(t)) {
      t.stage = 'commit';
      if (!(await settle()).ok) return;
    }
    t.stage = 'process';
    const b = await buildBatch(t);
    if (inFlight !== null) {
      t.stage = 'commit';
      const s = await settle();
      if (!s.ok) {
        joiner.forgetClosed(b.closedIds);
        abandoned.push(...b.done);
        return;
      }
      if (s.lost) {
        // Built on the memory that reset() dropped: abandoned, unacked.
        joiner.forgetClosed(b.closedIds);
        if (t.stopping) abandoned.push(...b.done);
        continue;
      }
    }
    if (b.records === 0) {
      t.stage = 'idle';
      continue;
    }
    t.stage = 'commit';
    inFlight = { b, result: commit(t, b) };
    // A rejection is handled by settle(); never leave it unobserved meanwhile.
    inFlight.result.catch(() => {});
  }
  // Stopping: the transaction in flight still commits (or gives up near the deadline).
  await settle();
}

/** Whether the next batch holds a redelivered message. */
function hasRedeliveryAhead(t: Term): boolean {
  const end = Math.min(t.inbox.length, t.inboxHead + t.o.maxBatchRecords);
  for (let i = t.inboxHead; i < end; i++) if ((t.inbox[i] as InboxItem).redelivered) return true;
  return false;
}

/**
 * Takes up to one batch from the inbox and turns it into records. Synchronous
 * except for a sync when a redelivered message is unknown to the progress log
 * (the caller has no transaction in flight then).
 */
async function buildBatch(t: Term): Promise<Batch> {
  const { inbox, builder } = t;
  const b = newBatch();
  const take = Math.min(t.inboxSize(), t.o.maxBatchRecords);
  const items = inbox.slice(t.inboxHead, t.inboxHead + take);
  t.inboxHead += take;
  if (builder.needsSync(items)) await t.sync();
  const used = builder.add(b, items, Date.now());
  t.inboxHead -= items.length - used;
  if (t.inboxHead > 65_536 && t.inboxHead * 2 > inbox.length) {
    inbox.splice(0, t.inboxHead);
    t.inboxHead = 0;
  }
  t.d.metrics.inbox.set(t.inboxSize());
  // Already in Kafka: ack now, nothing to write.
  for (const h of b.skipped) h.msg.ack();
  const now = Date.now();
  builder.closeJoins(b, now, t.readUpTo(now));
  return b;
}

/** Whether every source of the batch is still this instance's to write. */
function owned(t: Term, b: Batch, nowMs: number): boolean {
  // The lease first: a replica that may no longer be the leader writes nothing.
  if (!t.d.lease.valid(nowMs)) return false;
  for (const h of b.done) if (h.ownedUntilMs <= nowMs) return false;
  for (const h of b.copied) if (h.ownedUntilMs <= nowMs) return false;
  return true;
}

/**
 * One transaction for the whole batch: the records plus the progress
 * record. Returns false when ownership of a source was lost (the caller
 * resets). An error of any kind leads to a fresh producer (which resolves
 * the old transaction) and a sync, after which the progress log says
 * whether the batch committed: this is how an ambiguous commit is settled.
 */
async function commit(t: Term, b: Batch): Promise<boolean> {
  const { metrics, log, kafka, kafkaHealth } = t.d;
  const prog = progressRecord(t.d.transactionalId, b.nonce, Date.now(), b.doneSeqs, b.copiedSeqs);
  const requests = sendRequests(b.byTopic, { topic: t.o.topics.progress, messages: [{ partition: 0, value: JSON.stringify(prog) } as KafkaMessage] });
  const stillOwned = (): boolean => owned(t, b, Date.now());
  for (let attempt = 0; ; attempt++) {
    if (!stillOwned()) return false;
    const stop = metrics.produceSeconds.startTimer();
    try {
      if (!(await kafka.transact(requests, stillOwned))) {
        metrics.transactions.inc({ result: 'aborted' });
        return false;
      }
      stop();
      metrics.transactions.inc({ result: 'committed' });
      t.committed.add(prog, Date.now());
      kafkaHealth.ok();
      return true;
    } catch (e) {
      metrics.transactions.inc({ result: 'failed' });
      kafkaHealth.fail(e);
      if (t.giveUp) throw e;
      log.warn({ err: e, attempt, records: b.records }, 'kafka transaction failed; re-creating producer and checking the progress log');
      await sleep(Math.min(5000, 100 * 2 ** Math.min(attempt, 6)));
      await t.refence();
      await t.sync();
      if (t.committed.has(b.nonce)) {
        log.info({ nonce: b.nonce }, 'transaction had committed before the failure was reported');
        kafkaHealth.ok();
        return true;
      }
    }
  }
}

/** Lost ownership: forget all in-memory work; JetStream redelivers it and the progress log dedupes. */
function reset(t: Term, b: Batch): void {
  const { joiner, abandoned } = t;
  t.d.metrics.resets.inc();
  joiner.forgetClosed(b.closedIds);
  if (t.stopping) {
    // The term is ending (lost lease): everything held goes back at once.
    for (const h of joiner.heldHandles()) abandoned.push(h);
    abandoned.push(...b.done);
  }
  t.d.log.warn({ pendingJoins: joiner.pending }, 'ownership of held messages lapsed; dropping in-memory joins for redelivery');
  joiner.clear();
}

/** After a commit: acknowledge the batch's finished sources and count. */
function finish(t: Term, b: Batch): void {
  const { metrics } = t.d;
  t.lastCommitMs = Date.now();
  for (const h of b.done) h.msg.ack();
  metrics.batchRecords.observe(b.records);
  for (const [key, n] of b.counts) {
    const i = key.indexOf('\u0000');
    metrics.recordsOut.inc({ kind: key.slice(0, i), status: key.slice(i + 1) }, n);
  }
  for (const r of b.deadLetters) metrics.deadLetters.inc({ reason: r });
  if (b.newestPublishMs > 0) metrics.lagSeconds.set((Date.now() - b.newestPublishMs) / 1000);
  t.committed.prune(Date.now());
}
