// One leadership term: everything a leader holds between acquiring the lease
// and giving it up. A takeover (or a term that failed) is a new Term; nothing
// of an old one is reset and reused. What each state does: README, "Code
// layout and the leader term".
//
//   fencing ──▶ reading ──▶ consuming ──▶ ending(cause) ──▶ ended
//      └───────────┴────────────┴──────────────▲
//                  stop() · lease lost · fail(why)
//
// Set-up steps race `fail()`, so a broker restart in the middle of set-up ends
// the term instead of hanging it.
import { randomBytes } from 'node:crypto';
import type { Logger } from '@vantage/runtime';
import { BatchBuilder } from './batch';
import type { OutcomeConfig } from './config';
import type { Held, InboxItem, IntakeSink, TermIntake } from './intake';
import { Joiner } from './joiner';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TermLease } from './lease';
import type { OutcomeMetrics } from './metrics';
import { runPipeline } from './pipeline';
import { CommittedSet, progressRecord, type ProgressRecord } from './progress';
import { ReadPosition } from './readposition';
import type { TermKafka } from './transactions';

type TermEndCause = 'shutdown' | 'lost' | 'failed';

type TermState =
  | { readonly name: 'fencing' | 'reading' | 'consuming' }
  | { readonly name: 'ending'; readonly cause: TermEndCause }
  | { readonly name: 'ended'; readonly cause: TermEndCause; readonly naked: number };

/** Time kept, within a message's ownership, for the transaction that writes its join. */
const COMMIT_MARGIN_MS = 2_000;

export interface TermDeps {
  o: OutcomeConfig['outcome'];
  transactionalId: string;
  /** The stream names, in intake order. */
  streams: readonly string[];
  lease: TermLease;
  kafka: TermKafka;
  intake: TermIntake;
  metrics: OutcomeMetrics;
  log: Logger;
  /** Kafka reachability for /healthz: every transaction and sync reports here. */
  kafkaHealth: { ok(): void; fail(err: unknown): void };
  /** Bound on fencing + reading. Default 60 s. */
  setupTimeoutMs?: number;
}

export class Term implements IntakeSink {
  readonly o: OutcomeConfig['outcome'];
  readonly joiner: Joiner<Held>;
  /** What the progress log says is in Kafka (this term's reading of it). */
  readonly committed: CommittedSet;
  readonly builder: BatchBuilder;
  /** Fetched, not yet taken into a batch: `inbox[inboxHead…]`. */
  readonly inbox: InboxItem[] = [];
  inboxHead = 0;
  /** Handles of batches given up: nak'ed with the rest at the end. */
  readonly abandoned: Held[] = [];
  /** Set at the end of the term, or (by the service) near the shutdown deadline: a Kafka retry loop gives up and leaves its messages unacked. */
  giveUp = false;
  /** Where the pipeline is, for the stall report. */
  stage = 'starting';
  lastCommitMs = Date.now();
  private readonly reading: ReadPosition;
  private current: TermState = { name: 'fencing' };
  private wake: (() => void) | null = null;
  private readonly sentinels = new Map<string, () => void>();
  private abortSetup: ((e: Error) => void) | null = null;

  constructor(readonly d: TermDeps) {
    const o = (this.o = d.o);
    this.committed = new CommittedSet(2 * o.nats.ackWaitMs);
    // A join held for the streams' read position (Joiner.takeExpired) closes terminalGraceMs + COMMIT_MARGIN_MS before its
    // first message's ownership ends, leaving that long for its transaction (README, "Joins after an outage").
    const maxHoldMs = Math.max(0, Math.floor(o.nats.ackWaitMs / 2) - o.joinWindowMs - o.terminalGraceMs - COMMIT_MARGIN_MS);
    this.joiner = new Joiner<Held>({ joinWindowMs: o.joinWindowMs, terminalGraceMs: o.terminalGraceMs, recentlyClosedCap: o.recentlyClosedCap, maxHoldMs });
    this.builder = new BatchBuilder(o, this.joiner, this.committed, d.metrics);
    this.reading = new ReadPosition(d.streams);
  }

  get state(): TermState {
    return this.current;
  }

  get stopping(): boolean {
    return this.current.name === 'ending' || this.current.name === 'ended';
  }

  inboxSize(): number {
    return this.inbox.length - this.inboxHead;
  }

  /**
   * The publish time up to which both streams have been read and joined, for `Joiner.takeExpired`
   * (README, "Joins after an outage"). At `maxPendingJoins` nothing is held (the memory bound first).
   */
  readUpTo(nowMs: number): number {
    return this.joiner.pending >= this.o.maxPendingJoins ? Infinity : this.reading.upTo(nowMs, this.inbox, this.inboxHead);
  }

  // ------------------------------------------------------------ intake sink
  room(): number {
    if (this.joiner.pending >= this.o.maxPendingJoins) return 0;
    return Math.min(this.o.maxInbox - this.inboxSize(), this.o.nats.fetchBatch);
  }

  take(item: InboxItem, pending: number): void {
    this.reading.delivered(item.stream, item.publishMs, pending);
    this.inbox.push(item);
    const n = this.inboxSize();
    if (n >= this.o.nats.fetchBatch || n === 1) this.poke();
  }

  pulled(stream: string, got: number): void {
    // A pull that waited out its expiry with nothing to deliver: this stream is caught up.
    if (got === 0) this.reading.caughtUp(stream);
    this.poke();
  }

  // ------------------------------------------------------------ the pipeline's wait
  /** Wakes the pipeline if it is waiting. */
  poke(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Waits up to `ms` or until poked. */
  async idle(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => ((this.wake = resolve), (timer = setTimeout(resolve, ms))));
    clearTimeout(timer);
    this.wake = null;
  }

  // ------------------------------------------------------------ ending
  /** Shutdown: stop intake; the transaction in flight still commits. */
  stop(): void {
    if (!this.stopping) this.current = { name: 'ending', cause: 'shutdown' };
    this.poke();
  }

  /** Ends the term after a failure it cannot recover from by itself (the next term starts afresh). */
  fail(why: string): void {
    if (this.stopping) return;
    this.d.log.warn({ why }, 'leader term failing; starting afresh');
    this.current = { name: 'ending', cause: 'failed' };
    this.giveUp = true;
    this.poke();
    this.abortSetup?.(new Error(why));
  }

  private lose(): void {
    if (this.current.name === 'ended') return;
    if (!this.stopping || (this.current.name === 'ending' && this.current.cause === 'shutdown')) this.current = { name: 'ending', cause: 'lost' };
    this.giveUp = true;
    this.poke();
  }

  /** One lease renewal; a lost lease ends the term. */
  async renew(): Promise<boolean> {
    const r = await this.d.lease.renew();
    if (r === 'lost') this.lose();
    return r === 'renewed';
  }

  // ------------------------------------------------------------ Kafka
  /** A fresh producer (fences the previous epoch), only while the lease provably holds: a stale leader must never fence the current one. */
  async refence(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (this.giveUp) throw new Error('not re-creating the Kafka producer: shutting down or no longer the leader');
      if (!(await this.renew())) throw new Error('leadership lease not held: not re-creating the Kafka producer');
      try {
        await this.d.kafka.fence();
        return;
      } catch (e) {
        if (this.giveUp) throw e;
        this.d.log.warn({ err: e, attempt }, 'kafka producer re-creation failed; retrying');
        await sleep(Math.min(5000, 200 * 2 ** Math.min(attempt, 5)));
      }
    }
  }

  /**
   * Read the progress log up to "now": commit a sentinel record and wait until
   * the follower sees it. Read_committed delivers in offset order and stops at
   * the first open transaction, so everything committed before the sentinel
   * (including a transaction that was open when we wrote it) is known after.
   */
  async sync(): Promise<void> {
    const { metrics, log, kafka, kafkaHealth } = this.d;
    metrics.syncs.inc();
    const outer = this.stage;
    this.stage = `${outer}/sync`;
    for (let attempt = 0; ; attempt++) {
      const nonce = `s-${randomBytes(8).toString('hex')}`;
      let timer: NodeJS.Timeout | undefined;
      const seen = new Promise<'seen'>((resolve) => this.sentinels.set(nonce, () => resolve('seen')));
      try {
        const value = JSON.stringify(progressRecord(this.d.transactionalId, nonce, Date.now(), new Map(), new Map()));
        await kafka.transact([[{ topic: this.o.topics.progress, messages: [{ partition: 0, value }] }]], () => true);
        metrics.transactions.inc({ result: 'sentinel' });
        const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), Math.max(30_000, this.o.transactionTimeoutMs + 5_000))));
        if ((await Promise.race([seen, timeout])) === 'seen') {
          this.stage = outer;
          return;
        }
        log.warn({ nonce }, 'progress sentinel not seen in time; retrying');
      } catch (e) {
        kafkaHealth.fail(e);
        if (this.giveUp) throw e;
        log.warn({ err: e, attempt }, 'progress sync failed; re-creating producer');
        await sleep(Math.min(5000, 200 * 2 ** Math.min(attempt, 5)));
        await this.refence();
      } finally {
        clearTimeout(timer);
        this.sentinels.delete(nonce);
      }
    }
  }

  private onProgress(rec: ProgressRecord): void {
    this.committed.add(rec, Date.now());
    this.sentinels.get(rec.nonce)?.();
  }

  // ------------------------------------------------------------ the term's life
  /** Runs the term to its end: fence, read the progress log, consume until stopped, lost or failed; then release everything. */
  async run(): Promise<{ cause: TermEndCause; naked: number }> {
    const { o, log, kafka, intake, lease } = this.d;
    const renewTimer = setInterval(() => void this.renew(), o.leader.renewMs);
    const aborted = new Promise<never>((_, reject) => (this.abortSetup = reject));
    aborted.catch(() => {});
    const setupMs = this.d.setupTimeoutMs ?? 60_000;
    const setupTimer = setTimeout(() => this.fail(`leader term set-up took longer than ${setupMs / 1000} s`), setupMs);
    const enter = (name: 'reading' | 'consuming'): void => {
      if (!this.stopping) this.current = { name };
    };
    try {
      await Promise.race([this.refence(), aborted]);
      enter('reading');
      await Promise.race([kafka.follow((rec) => this.onProgress(rec), (why) => this.fail(why)), aborted]);
      await Promise.race([this.sync(), aborted]);
      clearTimeout(setupTimer);
      log.info({ committedTransactions: this.committed.size }, 'progress log read back; consuming');
      this.lastCommitMs = Date.now();
      enter('consuming');
      if (!this.stopping) await Promise.all([intake.run(this), runPipeline(this)]);
    } catch (e) {
      const cause = this.current.name === 'ending' ? this.current.cause : 'failed';
      if (cause === 'failed') log.error({ err: e }, 'leader term failed; releasing the lease');
    } finally {
      clearInterval(renewTimer);
      clearTimeout(setupTimer);
      this.abortSetup = null;
      if (!this.stopping) this.current = { name: 'ending', cause: 'failed' };
    }
    const cause = (this.current as { cause: TermEndCause }).cause;
    const naked = this.releaseHeld();
    await intake.flush();
    await kafka.close();
    await lease.release();
    this.current = { name: 'ended', cause, naked };
    return { cause, naked };
  }

  /** Nak everything this term holds (inbox, open joins, abandoned batches) so the next leader gets it at once. */
  private releaseHeld(): number {
    const held: Held[] = [...this.inbox.slice(this.inboxHead), ...this.joiner.heldHandles(), ...this.abandoned];
    for (const h of held) h.msg.nak();
    this.inbox.length = this.inboxHead = this.abandoned.length = 0;
    this.joiner.clear();
    for (const g of [this.d.metrics.inbox, this.d.metrics.pendingJoins, this.d.metrics.joinsHeld]) g.set(0);
    return held.length;
  }
}
