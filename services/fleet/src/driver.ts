/**
 * Real-time driver: runs the sim's discrete-event engines against a wall clock, so the same engine
 * model that replays traces offline serves live requests (README.md, "The clock": sim time, why
 * passes run at the engine's own `nextEventTime()`, the order results are released in). Clock and
 * timers are injected so tests can drive time by hand.
 */
import type { KvEvent } from '@vantage/types';
import { EventHeap, nextPass, type AddResult, type Engine, type EngineRequest, type Finished, type FirstToken, type NextPass } from '@vantage/sim';

/** Monotonic wall clock in ms (e.g. `performance.now`). */
type Clock = () => number;

/** One-shot timers; `set(fn, 0)` means "next turn of the event loop". */
export interface Timers {
  set(fn: () => void, delayMs: number): unknown;
  clear(handle: unknown): void;
}

const nodeTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Where the driver's results go, in sim-time order (per worker: strictly in the engine's order). */
export interface DriverSink {
  /** KV events of one pass, in event_id order, at the pass's start. */
  kvEvents(worker: number, events: readonly KvEvent[], atMs: number): void;
  firstToken(worker: number, ft: FirstToken): void;
  finished(worker: number, f: Finished): void;
  /** The engine's load may have changed (after a pass or an admission). */
  loadChanged(worker: number): void;
}

interface DriverOptions {
  readonly timeScale: number;
  readonly clock: Clock;
  readonly timers?: Timers;
  readonly sink: DriverSink;
  /** Passes (and deliveries) per timer callback at most; the rest continue on the next turn. */
  readonly maxStepsPerTurn?: number;
}

/** A result to deliver at sim time `t`; the heap keeps ties in the order the engines produced them. */
type Note = { t: number; worker: number } & ({ kind: 'first'; ft: FirstToken } | { kind: 'done'; f: Finished });

interface DriverStats {
  /** Engine `step` calls. */
  steps: number;
  /** Forward passes (fast-forwarded quiet passes included). */
  passes: number;
  /** Timer callbacks that ran. */
  wakeups: number;
  /** Largest lag seen between a due event's sim time and the sim time it was processed at, in sim ms. */
  maxLagMs: number;
}

export class RealTimeDriver {
  readonly timeScale: number;
  private readonly clock: Clock;
  private readonly timers: Timers;
  private readonly sink: DriverSink;
  private readonly maxSteps: number;
  private readonly notes = new EventHeap<Note>();
  private readonly pass: NextPass = { best: -1, bestT: Infinity, other: Infinity };
  private startWall = NaN;
  private timer: unknown = null;
  private timerAtWall = Infinity;
  private running = false;
  /** Sim time of the last processed event; sim time never goes backwards for an engine. */
  private lastSim = 0;
  readonly stats: DriverStats = { steps: 0, passes: 0, wakeups: 0, maxLagMs: 0 };

  constructor(
    readonly engines: readonly Engine[],
    opts: DriverOptions,
  ) {
    if (!(opts.timeScale > 0) || !Number.isFinite(opts.timeScale)) throw new RangeError(`timeScale must be positive, got ${opts.timeScale}`);
    this.timeScale = opts.timeScale;
    this.clock = opts.clock;
    this.timers = opts.timers ?? nodeTimers;
    this.sink = opts.sink;
    this.maxSteps = opts.maxStepsPerTurn ?? 256;
  }

  /** Sim time 0 is now. */
  start(): void {
    if (this.running) return;
    this.startWall = this.clock();
    this.running = true;
    this.reschedule();
  }

  /** Stops the timer; nothing more is stepped or delivered. */
  stop(): void {
    this.running = false;
    this.clearTimer();
  }

  get started(): boolean {
    return this.running;
  }

  /** Current sim time (ms). */
  simNow(): number {
    if (Number.isNaN(this.startWall)) return 0;
    return Math.max(this.lastSim, (this.clock() - this.startWall) * this.timeScale);
  }

  /**
   * Add a request to a worker's engine, arriving now (sim). Passes that were
   * due before now but not yet computed are unaffected: the engine admits an
   * arrival only in passes starting at or after it.
   */
  submit(worker: number, req: Omit<EngineRequest, 'arrivalMs'>): AddResult & { arrivalMs: number } {
    const engine = this.engines[worker];
    if (engine === undefined) throw new RangeError(`no worker ${worker}`);
    const arrivalMs = this.simNow();
    const r = engine.addRequest({ ...req, arrivalMs });
    if (r.ok) this.wakeAt(engine.nextEventTime());
    return { ...r, arrivalMs };
  }

  /** Processes everything due at or before the current sim time, in sim-time order, up to `maxStepsPerTurn` items. */
  private runDue(): void {
    const now = this.simNow();
    let n = 0;
    while (n < this.maxSteps) {
      const { best: wi, bestT: te } = nextPass(this.engines, this.pass);
      const tn = this.notes.peekTime();
      const t = Math.min(te, tn);
      if (t > now) break;
      n++;
      this.stats.maxLagMs = Math.max(this.stats.maxLagMs, now - t);
      this.lastSim = Math.max(this.lastSim, t);
      // A result due at the same instant as a pass is delivered first: it happened at the end of the previous pass.
      if (tn <= te) {
        const note = this.notes.pop()!;
        if (note.kind === 'first') this.sink.firstToken(note.worker, note.ft);
        else this.sink.finished(note.worker, note.f);
        continue;
      }
      this.stepEngine(wi, te, now);
    }
  }

  private stepEngine(wi: number, at: number, now: number): void {
    const engine = this.engines[wi]!;
    // Quiet decode passes that would already have started by `now` are fast-forwarded: no request can
    // still arrive before `now` (arrivals are stamped with the current sim time), which is the engine's
    // condition for fast-forwarding exactly.
    const r = engine.step(at, { untilMs: now });
    this.stats.steps++;
    this.stats.passes += r.passes;
    if (r.kvEvents.length > 0) this.sink.kvEvents(wi, r.kvEvents, r.startMs);
    for (const ft of r.firstTokens) this.notes.push({ t: ft.atMs, worker: wi, kind: 'first', ft });
    for (const f of r.finished) this.notes.push({ t: f.atMs, worker: wi, kind: 'done', f });
    this.sink.loadChanged(wi);
  }

  private tick = (): void => {
    this.timer = null;
    this.timerAtWall = Infinity;
    if (!this.running) return;
    this.stats.wakeups++;
    this.runDue();
    this.reschedule();
  };

  private clearTimer(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
    this.timerAtWall = Infinity;
  }

  /** Make sure a wake-up happens no later than sim time `t`. */
  private wakeAt(t: number): void {
    if (!this.running || t === Infinity) return;
    const wall = this.startWall + t / this.timeScale;
    if (wall >= this.timerAtWall) return;
    this.clearTimer();
    // Timers have ms granularity: round up, so a wake-up is never early (which would cost an empty turn).
    const delay = Math.max(0, Math.ceil(wall - this.clock()));
    this.timerAtWall = wall;
    this.timer = this.timers.set(this.tick, delay);
  }

  /** A wake-up at the next sim time anything is due (a pass or a delivery). */
  private reschedule(): void {
    let t = this.notes.peekTime();
    for (const e of this.engines) t = Math.min(t, e.nextEventTime());
    this.wakeAt(t);
  }
}
