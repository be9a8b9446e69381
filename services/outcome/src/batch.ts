/**
 * Batch building: fetched messages → the records of one Kafka transaction
 * (README, "Exactly once", rules 2 and 4). Decode, dead-letter, dedupe
 * redeliveries against the progress log, join, close due joins. Synchronous
 * and transport-free: the leader term hands it inbox items and its joiner and
 * committed set, and commits what comes out.
 */
import { randomBytes } from 'node:crypto';
import { decodeSingleObject, DECISION_REGISTRY, encodeSingleObject, OUTCOME_RECORD_CURRENT, type DecisionRecord, type SourcePart } from '@vantage/records';
import type { Message as KafkaMessage } from 'kafkajs';
import type { OutcomeConfig } from './config';
import { deadLetterMessage, DLQ_HEADERS, type DeadLetterReason } from './deadletter';
import type { Held, InboxItem } from './intake';
import type { ClosedJoin, Joiner } from './joiner';
import { decodeLifecycle } from './lifecycle';
import type { OutcomeMetrics } from './metrics';
import type { CommittedSet } from './progress';
import type { TopicMessages } from './transactions';

export interface Batch {
  nonce: string;
  byTopic: Map<string, KafkaMessage[]>;
  records: number;
  /** Approximate output bytes (values), against maxBatchBytes. */
  bytes: number;
  /** Acked after commit. */
  done: Held[];
  doneSeqs: Map<string, number[]>;
  /** Decisions copied to the decisions topic whose join is still open: must be owned at commit, acked later. */
  copied: Held[];
  copiedSeqs: Map<string, number[]>;
  /** Redeliveries the progress log says are already in Kafka: acked at once, nothing written. */
  skipped: Held[];
  newestPublishMs: number;
  /** Request ids whose outcome this batch carries (un-closed again if the batch is abandoned). */
  closedIds: string[];
  /** Output records by `kind \0 status`, counted into metrics after commit. */
  counts: Map<string, number>;
  deadLetters: DeadLetterReason[];
}

export function newBatch(): Batch {
  const nonce = `t-${randomBytes(8).toString('hex')}`;
  return { nonce, byTopic: new Map(), records: 0, bytes: 0, done: [], doneSeqs: new Map(), copied: [], copiedSeqs: new Map(), skipped: [], newestPublishMs: 0, closedIds: [], counts: new Map(), deadLetters: [] };
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const a = m.get(k);
  if (a === undefined) m.set(k, [v]);
  else a.push(v);
}

export class BatchBuilder {
  private readonly lifecyclePrefix: string;

  constructor(
    private readonly o: OutcomeConfig['outcome'],
    private readonly joiner: Joiner<Held>,
    private readonly committed: CommittedSet,
    private readonly metrics: OutcomeMetrics,
  ) {
    this.lifecyclePrefix = o.nats.lifecycleSubject.slice(0, -1); // "vantage.v1.lifecycle."
  }

  /**
   * Counts the redeliveries among `items`; true when one of them is unknown to
   * the progress log, so it must be brought up to date (a sync) first: it may
   * have been written by a replica that died before acking.
   */
  needsSync(items: readonly InboxItem[]): boolean {
    let redeliveries = 0;
    let unknown = false;
    for (const it of items) {
      if (!it.redelivered) continue;
      redeliveries++;
      if (!unknown && this.committed.lookup(it.stream, it.seq) !== 'done') unknown = true;
    }
    if (redeliveries > 0) this.metrics.redeliveries.inc(redeliveries);
    return unknown;
  }

  /** Takes `items` in order into `b` until its byte cap; returns how many were taken (the rest stay in the inbox). */
  add(b: Batch, items: readonly InboxItem[], startedMs: number): number {
    const { o, metrics } = this;
    let used = 0;
    let decisionsIn = 0;
    let expired = 0;
    for (const it of items) {
      if (b.bytes >= o.maxBatchBytes) break;
      used++;
      if (it.kind === 'decision') decisionsIn++;
      // Held so long (Kafka down) that the server may have redelivered it:
      // not ours to write any more. Dropped unacked; its redelivery decides.
      if (it.ownedUntilMs <= startedMs) {
        expired++;
        continue;
      }
      let seenAs: 'decision' | undefined;
      if (it.redelivered) {
        const s = this.committed.lookup(it.stream, it.seq);
        if (s === 'done') {
          metrics.redeliveriesSkipped.inc({ found: 'done' });
          b.skipped.push(it);
          continue;
        }
        if (s === 'decision') {
          metrics.redeliveriesSkipped.inc({ found: 'decision_copy' });
          seenAs = 'decision';
        }
      }
      this.processOne(b, it, seenAs);
    }
    if (decisionsIn > 0) metrics.recordsIn.inc({ kind: 'decision' }, decisionsIn);
    if (used > decisionsIn) metrics.recordsIn.inc({ kind: 'lifecycle' }, used - decisionsIn);
    if (expired > 0) metrics.expiredDropped.inc(expired);
    return used;
  }

  /** Closes the joins that are due into `b`, bounded per batch too (the rest close in the next one). */
  closeJoins(b: Batch, nowMs: number, readUpTo: number): void {
    const { o, joiner } = this;
    const room = (): number => (b.bytes >= o.maxBatchBytes ? 0 : Math.max(1, o.maxBatchRecords - b.records));
    for (const c of joiner.takeComplete(nowMs, room())) this.emitOutcome(b, c);
    for (const c of joiner.takeExpired(nowMs, room(), readUpTo)) this.emitOutcome(b, c);
    this.metrics.pendingJoins.set(joiner.pending);
    this.metrics.joinsHeld.set(joiner.held);
  }

  private emit(b: Batch, topic: string, m: KafkaMessage, kind: string, status: string): void {
    push(b.byTopic, topic, m);
    b.records++;
    b.bytes += (m.value as Buffer | null)?.length ?? 0;
    const key = `${kind}\u0000${status}`;
    b.counts.set(key, (b.counts.get(key) ?? 0) + 1);
  }

  private markDone(b: Batch, h: Held, stream: string): void {
    b.done.push(h);
    push(b.doneSeqs, stream, h.seq);
  }

  private deadLetter(b: Batch, item: InboxItem, reason: DeadLetterReason, detail: string): void {
    this.emit(b, this.o.topics.deadLetter, deadLetterMessage(item.msg, item.stream, reason, detail, this.o.maxDeadLetterBytes), 'dead_letter', reason);
    b.deadLetters.push(reason);
    this.markDone(b, item, item.stream);
  }

  private emitOutcome(b: Batch, c: ClosedJoin<Held>): void {
    const r = c.record;
    b.closedIds.push(r.requestId);
    for (const s of c.sources) this.markDone(b, s.handle, s.stream);
    let value: Buffer;
    try {
      value = encodeSingleObject(OUTCOME_RECORD_CURRENT, r);
    } catch (e) {
      // A value the schema refuses (e.g. a timestamp beyond 2^53) must not
      // stop the pipeline: the join goes to the dead-letter topic as JSON.
      const json = JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
      const first = c.sources[0];
      const headers = {
        [DLQ_HEADERS.reason]: 'OUTCOME_ENCODE_FAILED',
        [DLQ_HEADERS.detail]: e instanceof Error ? e.message.slice(0, 1024) : String(e),
        [DLQ_HEADERS.stream]: first?.stream ?? '',
        [DLQ_HEADERS.seq]: String(first?.seq ?? ''),
      };
      this.emit(b, this.o.topics.deadLetter, { key: r.requestId, value: Buffer.from(json.slice(0, Math.max(0, this.o.maxDeadLetterBytes))), headers }, 'dead_letter', 'OUTCOME_ENCODE_FAILED');
      b.deadLetters.push('OUTCOME_ENCODE_FAILED');
      return;
    }
    this.emit(b, this.o.topics.outcomes, { key: r.sessionId ?? r.requestId, value }, 'outcome', r.status);
    if (r.join.closedBy === 'deadline') this.metrics.joinTimeouts.inc({ status: r.status });
  }

  private copyDecision(b: Batch, item: InboxItem, d: DecisionRecord): void {
    const data = item.msg.data;
    // A view of the received bytes, not a copy: they live until the commit anyway.
    const value = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    this.emit(b, this.o.topics.decisions, { key: d.sessionId, value, headers: { 'vantage-source-stream': item.stream, 'vantage-source-seq': String(item.seq) } }, 'decision', 'copied');
  }

  /** Decode, dead-letter or join one message. `seenAs` is what the progress log says about a redelivery. */
  private processOne(b: Batch, item: InboxItem, seenAs: 'decision' | undefined): void {
    const { msg, stream, seq } = item;
    const { o, joiner } = this;
    if (item.publishMs > b.newestPublishMs) b.newestPublishMs = item.publishMs;
    if (msg.data.length > o.maxMessageBytes) {
      this.deadLetter(b, item, 'OVERSIZED', `${msg.data.length} bytes > ${o.maxMessageBytes}`);
      return;
    }
    if (item.kind === 'decision') {
      const r = decodeSingleObject(msg.data, DECISION_REGISTRY);
      if (!r.ok) {
        this.deadLetter(b, item, r.code, r.reason);
        return;
      }
      const d = r.value;
      if (d.requestId === '' || d.sessionId === '') {
        this.deadLetter(b, item, 'DECISION_INVALID', 'requestId and sessionId must be non-empty');
        return;
      }
      // Only a redelivery can be a message a join already holds (first deliveries skip the lookup).
      if (item.redelivered && joiner.rehandle(d.requestId, stream, seq, item)) return;
      const res = joiner.addDecision(d, { stream, seq, part: 'decision', handle: item }, item.receivedAtMs, item.publishMs);
      if (seenAs !== 'decision') this.copyDecision(b, item, d);
      if (res === 'late') {
        // Its request's outcome is already written: keep the decision (copied
        // above) and record why it joined nothing.
        this.deadLetter(b, item, 'JOIN_LATE', `decision for request ${d.requestId} arrived after its outcome was written`);
        return;
      }
      if (seenAs !== 'decision') {
        b.copied.push(item);
        push(b.copiedSeqs, stream, seq);
      }
      return;
    }
    const pool = msg.subject.startsWith(this.lifecyclePrefix) ? msg.subject.slice(this.lifecyclePrefix.length) : undefined;
    const r = decodeLifecycle(msg.data, pool);
    if (!r.ok) {
      this.deadLetter(b, item, r.code, r.reason);
      return;
    }
    const ev = r.value.event;
    if (item.redelivered && joiner.rehandle(ev.requestId, stream, seq, item)) return;
    const res = joiner.addEvent(ev, { stream, seq, part: ev.kind as SourcePart, handle: item }, item.receivedAtMs, r.value, item.publishMs);
    if (res === 'late') this.deadLetter(b, item, 'JOIN_LATE', `${ev.kind} event for request ${ev.requestId} arrived after its outcome was written`);
  }
}

/**
 * Most records per kafkajs `sendBatch` call. kafkajs groups a call's records
 * per partition by copying the partition's array for every record, so its
 * cost grows with the square of the records per partition in one call;
 * smaller calls inside the same transaction keep it down, for one produce
 * round trip each.
 */
export const SEND_CHUNK_RECORDS = 1000;

/** The batch's records as produce requests of at most SEND_CHUNK_RECORDS; `last` (the progress record) goes in the final one. */
export function sendRequests(byTopic: ReadonlyMap<string, KafkaMessage[]>, last: TopicMessages): TopicMessages[][] {
  const out: TopicMessages[][] = [];
  let cur: TopicMessages[] = [];
  let n = 0;
  for (const [topic, messages] of byTopic) {
    for (let i = 0; i < messages.length; ) {
      if (n === SEND_CHUNK_RECORDS) {
        out.push(cur);
        cur = [];
        n = 0;
      }
      const take = Math.min(messages.length - i, SEND_CHUNK_RECORDS - n);
      cur.push({ topic, messages: i === 0 && take === messages.length ? messages : messages.slice(i, i + take) });
      n += take;
      i += take;
    }
  }
  cur.push(last);
  out.push(cur);
  return out;
}
