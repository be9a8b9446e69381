// Plain in-memory implementations of the narrow interfaces a leader term
// depends on (lease, Kafka session, intake), for broker-free unit tests of the
// term, pipeline and batch logic. They implement the contracts the term relies
// on (a transaction is all or nothing; the follower sees committed progress
// records in order), nothing more.
import { encodeSingleObject, DECISION_RECORD_CURRENT, type DecisionRecord } from '@vantage/records';
import { loadConfig } from '@vantage/runtime';
import pino from 'pino';
import { Registry } from 'prom-client';
import { outcomeConfigSchema, type OutcomeConfig } from '../src/config';
import { outcomeMetrics } from '../src/metrics';
import { acceptProgress, type ProgressRecord } from '../src/progress';
import type { InboxItem, IntakeSink, TermIntake } from '../src/intake';
import type { Renewal, TermLease } from '../src/lease';
import { Term, type TermDeps } from '../src/term';
import type { TermKafka, TopicMessages } from '../src/transactions';
import { lifecycle } from './helpers';

export const TXN = 'txn-unit';
export const D = 'DECISIONS';
export const L = 'LIFECYCLE';

export function outcomeOptions(env: Record<string, string> = {}): OutcomeConfig['outcome'] {
  return loadConfig(outcomeConfigSchema, { env: { VANTAGE_OUTCOME_LINGER_MS: '0', ...env }, defaults: { service: 'outcome-unit' } }).outcome;
}

export class MemoryLease implements TermLease {
  state: 'held' | 'lost' | 'free' = 'held';
  released = false;
  valid(): boolean {
    return this.state === 'held';
  }
  renew(): Promise<Renewal> {
    return Promise.resolve(this.state === 'held' ? 'renewed' : 'lost');
  }
  release(): Promise<void> {
    this.released = this.state === 'held';
    this.state = 'free';
    return Promise.resolve();
  }
}

/** One Kafka cluster's worth of committed records, shared by the terms of a test (a takeover sees its predecessor's log). */
export class MemoryLog {
  readonly topics = new Map<string, Buffer[]>();
  /** Committed transactions, in commit order. */
  transactions = 0;
  records(topic: string): Buffer[] {
    return this.topics.get(topic) ?? [];
  }
}

export class MemoryKafka implements TermKafka {
  fences = 0;
  /** Fail the next N transactions before their commit (nothing written). */
  failBeforeCommit = 0;
  /** Fail the next N transactions after their commit (written; the client is told it failed: an ambiguous commit). */
  failAfterCommit = 0;
  /** What the sources' acks looked like at each commit: none of a batch's sources may be acked before it. */
  readonly ackedAtCommit: number[] = [];
  private onRecord: ((rec: ProgressRecord) => void) | null = null;
  private delivered = 0;
  closed = false;
  /** Told of every call, for tests of the order of things. */
  spy: (call: 'fence' | 'follow' | 'transact') => void = () => {};

  constructor(
    readonly log: MemoryLog,
    private readonly acked: () => number = () => 0,
    private readonly followStarts: Promise<void> = Promise.resolve(),
  ) {}

  fence(): Promise<void> {
    this.spy('fence');
    this.fences++;
    return Promise.resolve();
  }

  async transact(requests: readonly (readonly TopicMessages[])[], owned: () => boolean): Promise<boolean> {
    this.spy('transact');
    if (this.closed || this.fences === 0) throw new Error('no producer');
    await Promise.resolve();
    if (this.failBeforeCommit > 0) {
      this.failBeforeCommit--;
      throw new Error('broker restarted during the transaction');
    }
    if (!owned()) return false;
    this.ackedAtCommit.push(this.acked());
    for (const req of requests) {
      for (const { topic, messages } of req) {
        const list = this.log.topics.get(topic) ?? [];
        for (const m of messages) list.push(Buffer.from(m.value as string | Buffer));
        this.log.topics.set(topic, list);
      }
    }
    this.log.transactions++;
    this.deliver();
    if (this.failAfterCommit > 0) {
      this.failAfterCommit--;
      throw new Error('EndTxn reply lost');
    }
    return true;
  }

  async follow(onRecord: (rec: ProgressRecord) => void): Promise<void> {
    this.spy('follow');
    await this.followStarts;
    this.onRecord = onRecord;
    this.deliver();
  }

  /** The follower: every committed progress record not yet seen, asynchronously, in order. */
  private deliver(): void {
    setImmediate(() => {
      const progress = this.log.records('progress');
      for (; this.onRecord !== null && this.delivered < progress.length; this.delivered++) {
        const got = acceptProgress(progress[this.delivered] as Buffer, TXN);
        if (got.ok) this.onRecord(got.rec);
      }
    });
  }

  close(): Promise<void> {
    this.closed = true;
    this.onRecord = null;
    return Promise.resolve();
  }
}

export interface FakeMsg {
  data: Uint8Array;
  subject: string;
  seq: number;
  acks: number;
  naks: number;
  ack(): void;
  nak(): void;
}

export function fakeMsg(subject: string, seq: number, data: Uint8Array): FakeMsg {
  return {
    data,
    subject,
    seq,
    acks: 0,
    naks: 0,
    ack() {
      this.acks++;
    },
    nak() {
      this.naks++;
    },
  };
}

/** An inbox item as intake makes it, for a message received now. */
export function item(kind: 'decision' | 'lifecycle', seq: number, data: Uint8Array, o: OutcomeConfig['outcome'], extra: Partial<InboxItem> = {}): InboxItem & { msg: FakeMsg } {
  const now = Date.now();
  const stream = kind === 'decision' ? D : L;
  const subject = kind === 'decision' ? 'vantage.v1.decisions' : 'vantage.v1.lifecycle.small';
  return { kind, stream, msg: fakeMsg(subject, seq, data), receivedAtMs: now, ownedUntilMs: now + o.nats.ackWaitMs / 2, seq, redelivered: false, publishMs: now, ...extra } as InboxItem & { msg: FakeMsg };
}

export const decisionBytes = (d: DecisionRecord): Uint8Array => encodeSingleObject(DECISION_RECORD_CURRENT, d);
export const doneBytes = (d: DecisionRecord): Uint8Array => lifecycle(d, 'done', 40, 'small', { usage: { inputTokens: 10, outputTokens: 2, cachedTokens: 0 } });

/** Intake from a queue the test fills: hands over what the term has room for, then reports the pull. */
export class MemoryIntake implements TermIntake {
  readonly queue: InboxItem[] = [];
  flushed = 0;
  async run(sink: IntakeSink): Promise<void> {
    while (!sink.stopping) {
      const n = Math.min(sink.room(), this.queue.length);
      for (const it of this.queue.splice(0, n)) sink.take(it, 0);
      sink.pulled(D, n);
      sink.pulled(L, n);
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  flush(): Promise<void> {
    this.flushed++;
    return Promise.resolve();
  }
}

export function quietLog(): TermDeps['log'] {
  return pino({ level: 'silent' });
}

export interface Rig {
  term: Term;
  lease: MemoryLease;
  kafka: MemoryKafka;
  intake: MemoryIntake;
  metrics: ReturnType<typeof outcomeMetrics>;
  o: OutcomeConfig['outcome'];
  health: { ok: number; fail: number };
  sources: (InboxItem & { msg: FakeMsg })[];
  /** Queues messages for intake (and remembers them for ack counts). */
  send(...items: (InboxItem & { msg: FakeMsg })[]): void;
  run: Promise<{ cause: string; naked: number }>;
}

/** A term over in-memory parts, already running. */
export function startTerm(log: MemoryLog, opts: { env?: Record<string, string>; setupTimeoutMs?: number; followStarts?: Promise<void>; spy?: (call: string, state: string) => void } = {}): Rig {
  const o = outcomeOptions({ VANTAGE_OUTCOME_TOPICS_PROGRESS: 'progress', VANTAGE_OUTCOME_TOPICS_OUTCOMES: 'outcomes', VANTAGE_OUTCOME_TOPICS_DECISIONS: 'decisions', VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: 'dlq', ...opts.env });
  const sources: (InboxItem & { msg: FakeMsg })[] = [];
  const lease = new MemoryLease();
  const kafka = new MemoryKafka(log, () => sources.reduce((n, s) => n + s.msg.acks, 0), opts.followStarts);
  const intake = new MemoryIntake();
  const metrics = outcomeMetrics(new Registry());
  const health = { ok: 0, fail: 0 };
  const kafkaHealth = { ok: () => void health.ok++, fail: () => void health.fail++ };
  const deps: TermDeps = { o, transactionalId: TXN, streams: [D, L], lease, kafka, intake, metrics, log: quietLog(), kafkaHealth, ...(opts.setupTimeoutMs === undefined ? {} : { setupTimeoutMs: opts.setupTimeoutMs }) };
  const term = new Term(deps);
  const spy = opts.spy;
  if (spy !== undefined) kafka.spy = (call) => spy(call, term.state.name);
  const send = (...items: (InboxItem & { msg: FakeMsg })[]): void => {
    sources.push(...items);
    intake.queue.push(...items);
  };
  return { term, lease, kafka, intake, metrics, o, health, sources, send, run: term.run() };
}

export async function until(what: string, cond: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
