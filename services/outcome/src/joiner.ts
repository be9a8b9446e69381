/**
 * Open joins keyed by request id: transport-free and synchronous, so the
 * service, tests and the benchmark drive the same state machine. When a join
 * closes (`complete` at once or after `terminalGraceMs`, `deadline` after
 * `joinWindowMs`, held for the streams' read position up to `maxHoldMs`) and
 * how background traffic closes without a decision: README, "The join".
 * Nothing is ever dropped: every join ends in exactly one outcome record.
 *
 * Each contributing message is carried as a `Source<H>` whose handle `H` the
 * caller uses to acknowledge it once the outcome is durably written.
 */
import { joinOutcome, type DecisionRecord, type LifecycleEventInput, type OutcomeRecord, type SourcePart } from '@vantage/records';

export interface Source<H> {
  stream: string;
  seq: number;
  part: SourcePart;
  handle: H;
}

interface Join<H> {
  requestId: string;
  openedAtMs: number;
  deadlineMs: number;
  /** Publish time of the join's first message + the window: the streams must be read this far. */
  eventDeadlineMs: number;
  /** deadlineMs + maxHoldMs: closes now whatever the streams' read position. */
  holdUntilMs: number;
  decision: DecisionRecord | null;
  events: LifecycleEventInput[];
  sources: Source<H>[];
  hasTerminal: boolean;
  hasUsage: boolean;
  /** Some event of the request marked it as background (competing) traffic. */
  background: boolean;
  /** The request's arrival as the events report it (first one given), for a join without a decision. */
  arrivalMs: number | null;
  /** Grace deadline once decision + terminal are in but usage is not. */
  graceAtMs: number | null;
}

export interface ClosedJoin<H> {
  record: OutcomeRecord;
  sources: Source<H>[];
}

interface JoinerOptions {
  joinWindowMs: number;
  terminalGraceMs: number;
  /** Request ids remembered after their join closed, to recognise late messages. */
  recentlyClosedCap: number;
  /** Longest a join waits past its deadline for the streams' read position (see `takeExpired`); default 0. */
  maxHoldMs?: number;
}

type AddResult = 'joined' | 'duplicate' | 'late';

const TERMINAL = new Set(['done', 'cancelled', 'failed']);
const RECHECK_MS = 50;

export class Joiner<H> {
  private readonly open = new Map<string, Join<H>>();
  /** Request ids in grace order (grace is a constant added to arrival time, so FIFO is sorted). */
  private readonly graceQueue: { id: string; at: number }[] = [];
  private graceHead = 0;
  /** Joins complete now (decision + terminal + usage), closed at the next takeComplete. */
  private readonly ready: string[] = [];
  /** Insertion-ordered, so the first key is the oldest: an LRU by close time. */
  private readonly closed = new Map<string, number>();
  /** Joins the last `takeExpired` found past their deadline but held for the read position. */
  held = 0;

  constructor(private readonly opts: JoinerOptions) {}

  get pending(): number {
    return this.open.size;
  }

  /** Replace the handle of a held source (a redelivered copy supersedes the old delivery). */
  rehandle(requestId: string, stream: string, seq: number, handle: H): boolean {
    const j = this.open.get(requestId);
    const s = j?.sources.find((x) => x.seq === seq && x.stream === stream);
    if (s === undefined) return false;
    s.handle = handle;
    return true;
  }

  /** True when `requestId` closed recently: a message for it now is late. */
  isLate(requestId: string): boolean {
    return !this.open.has(requestId) && this.closed.has(requestId);
  }

  /** `publishMs`: when the message entered its stream (default `nowMs`), for `takeExpired`'s read position. */
  addDecision(decision: DecisionRecord, src: Source<H>, nowMs: number, publishMs = nowMs): AddResult {
    if (this.isLate(decision.requestId)) return 'late';
    const j = this.get(decision.requestId, nowMs, publishMs);
    j.sources.push(src);
    // The first decision stays authoritative; a second one (a republish) only adds a source.
    if (j.decision !== null) return 'duplicate';
    j.decision = decision;
    this.maybeArm(j, nowMs);
    return 'joined';
  }

  /**
   * Adds a lifecycle event. `request` carries what the event says about its
   * request: the background marker and the arrival time (protocol fields
   * `background`, `arrivalMs`).
   */
  addEvent(ev: LifecycleEventInput, src: Source<H>, nowMs: number, request: { background?: boolean; arrivalMs?: number | null } = {}, publishMs = nowMs): AddResult {
    if (this.isLate(ev.requestId)) return 'late';
    const j = this.get(ev.requestId, nowMs, publishMs);
    j.sources.push(src);
    j.events.push(ev);
    if (request.background === true) j.background = true;
    if (j.arrivalMs === null && request.arrivalMs !== undefined && request.arrivalMs !== null) j.arrivalMs = request.arrivalMs;
    if (TERMINAL.has(ev.kind)) j.hasTerminal = true;
    if (ev.usage !== undefined) j.hasUsage = true;
    this.maybeArm(j, nowMs);
    return 'joined';
  }

  /** Joins whose completion condition now holds (call after adding a batch). */
  takeComplete(nowMs: number, limit = Infinity): ClosedJoin<H>[] {
    const out: ClosedJoin<H>[] = [];
    let used = 0;
    for (; used < this.ready.length && out.length < limit; used++) {
      const j = this.open.get(this.ready[used] as string);
      if (j !== undefined && j.graceAtMs !== null) out.push(this.close(j, 'complete', nowMs));
    }
    this.ready.splice(0, used);
    while (this.graceHead < this.graceQueue.length && out.length < limit) {
      const g = this.graceQueue[this.graceHead] as { id: string; at: number };
      const j = this.open.get(g.id);
      if (j === undefined || j.graceAtMs === null) {
        this.graceHead++;
        continue;
      }
      if (!j.hasUsage && g.at > nowMs) break;
      this.graceHead++;
      out.push(this.close(j, 'complete', nowMs));
    }
    if (this.graceHead > 4096 && this.graceHead * 2 > this.graceQueue.length) {
      this.graceQueue.splice(0, this.graceHead);
      this.graceHead = 0;
    }
    return out;
  }

  /**
   * Joins past their window, oldest first. A join past its deadline still waits until `readUpToMs`
   * (the publish time up to which every stream has been read and joined; default: no constraint)
   * is `joinWindowMs` past its first message's publish time, or `maxHoldMs` more have passed
   * (README, "Joins after an outage").
   */
  takeExpired(nowMs: number, limit = Infinity, readUpToMs = Infinity): ClosedJoin<H>[] {
    const out: ClosedJoin<H>[] = [];
    let held = 0;
    // Map iteration is insertion order and every deadline is open time + a
    // constant, so the deadlines are in order; joins held for the read
    // position are passed over (their event deadlines need not be in order).
    for (const j of this.open.values()) {
      if (j.deadlineMs > nowMs || out.length >= limit) break;
      if (j.eventDeadlineMs > readUpToMs && j.holdUntilMs > nowMs) {
        held++;
        continue;
      }
      out.push(this.close(j, 'deadline', nowMs));
    }
    this.held = held;
    return out;
  }

  /** Handles of every source held by an open join (to release them at shutdown). */
  *heldHandles(): IterableIterator<H> {
    for (const j of this.open.values()) for (const s of j.sources) yield s.handle;
  }

  /**
   * Undo the "recently closed" mark of joins whose outcome was never
   * committed (the batch holding it was abandoned): their redelivered
   * messages must join again, not be taken for late arrivals.
   */
  forgetClosed(requestIds: Iterable<string>): void {
    for (const id of requestIds) this.closed.delete(id);
  }

  /** Forget everything (after a lost-ownership reset: JetStream redelivers it all). */
  clear(): void {
    this.open.clear();
    this.graceQueue.length = 0;
    this.graceHead = 0;
    this.ready.length = 0;
    this.held = 0;
  }

  /**
   * Earliest time any join could close by the clock (for the service's timer).
   * A join held for the read position (`takeExpired`) is due again after
   * `RECHECK_MS`, when the read position may have moved, or at its hold limit.
   */
  nextDueMs(nowMs: number, readUpToMs = Infinity): number | undefined {
    if (this.ready.length > 0) return nowMs;
    let due: number | undefined;
    const first = this.open.values().next();
    if (!first.done) {
      const j = first.value;
      due = j.deadlineMs > nowMs || j.eventDeadlineMs <= readUpToMs ? j.deadlineMs : Math.min(j.holdUntilMs, nowMs + RECHECK_MS);
    }
    for (let i = this.graceHead; i < this.graceQueue.length; i++) {
      const g = this.graceQueue[i] as { id: string; at: number };
      const j = this.open.get(g.id);
      if (j === undefined || j.graceAtMs === null) continue;
      if (due === undefined || g.at < due) due = g.at;
      break;
    }
    return due;
  }

  private get(requestId: string, nowMs: number, publishMs: number): Join<H> {
    let j = this.open.get(requestId);
    if (j === undefined) {
      const deadlineMs = nowMs + this.opts.joinWindowMs;
      j = {
        requestId,
        openedAtMs: nowMs,
        deadlineMs,
        eventDeadlineMs: publishMs + this.opts.joinWindowMs,
        holdUntilMs: deadlineMs + (this.opts.maxHoldMs ?? 0),
        decision: null,
        events: [],
        sources: [],
        hasTerminal: false,
        hasUsage: false,
        background: false,
        arrivalMs: null,
        graceAtMs: null,
      };
      this.open.set(requestId, j);
    }
    return j;
  }

  private maybeArm(j: Join<H>, nowMs: number): void {
    if (j.graceAtMs !== null) {
      // Usage arrived during the grace wait: complete now rather than at the grace deadline.
      if (j.hasUsage) this.ready.push(j.requestId);
      return;
    }
    // Background traffic has no decision to wait for: its terminal event is enough.
    if ((j.decision === null && !j.background) || !j.hasTerminal) return;
    j.graceAtMs = j.hasUsage ? nowMs : nowMs + this.opts.terminalGraceMs;
    if (j.hasUsage) this.ready.push(j.requestId);
    else this.graceQueue.push({ id: j.requestId, at: j.graceAtMs });
  }

  private close(j: Join<H>, closedBy: 'complete' | 'deadline', nowMs: number): ClosedJoin<H> {
    this.open.delete(j.requestId);
    j.graceAtMs = null;
    if (this.opts.recentlyClosedCap > 0) {
      this.closed.delete(j.requestId);
      this.closed.set(j.requestId, nowMs);
      if (this.closed.size > this.opts.recentlyClosedCap) {
        const oldest = this.closed.keys().next();
        if (!oldest.done) this.closed.delete(oldest.value);
      }
    }
    const record = joinOutcome(j.decision, j.events, {
      requestId: j.requestId,
      closedBy,
      sources: j.sources.map((s) => ({ stream: s.stream, sequence: s.seq, part: s.part })),
      joinLatencyMs: nowMs - j.openedAtMs,
      // Used only without a decision (joinOutcome: the decision is authoritative).
      background: j.background,
      ...(j.arrivalMs === null ? {} : { arrivalMs: j.arrivalMs }),
    });
    return { record, sources: j.sources };
  }
}
