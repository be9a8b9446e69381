/**
 * Offline discrete-event replay: simulated engines behind a router running the services' own
 * `PoolState`; the booking lifecycle and the event order at one instant: README "How it runs".
 * Deterministic for a seed: wall time is read only for progress and `wallMs`.
 */
import type { KvEvent, WorkerId } from '@vantage/types';
import { PoolState } from '@vantage/observation';
import {
  roundRobinPolicy,
  selectLlmd,
  selectWorker,
  seededRng,
  type CandidateInput,
  type KvRouterPolicy,
  type LlmdPolicy,
  type RoundRobinPolicy,
} from '@vantage/selection';
import { Engine, nextPass, type EngineConfig, type NextPass } from './engine';
import { EventHeap } from './heap';
import { computeMetrics, type ReplayMetrics, type RequestRecord } from './metrics';
import { ClosedLoop, openLoopArrivals, traceSessions, type MooncakeRecord } from './mooncake';
import { MooncakePromptHasher, promptFromTokens, type PromptBlocks } from './prompt';
import type { AgenticSession } from './sessions';

export type RouterSpec =
  | { readonly kind: 'round_robin' }
  | { readonly kind: 'random' }
  /** Default policy: README "Offline replay" (`RouterSpec`). */
  | { readonly kind: 'kv_router'; readonly policy?: KvRouterPolicy }
  /** Default policy: token-load scorer with llm-d's defaults. */
  | { readonly kind: 'llmd'; readonly policy?: LlmdPolicy };

export const DEFAULT_KV_ROUTER: KvRouterPolicy = Object.freeze({ kind: 'kv_router', formula: 'prefill_load_scale', tieBreakByTreeSize: false });
const DEFAULT_LLMD: LlmdPolicy = Object.freeze({ kind: 'llmd', scorer: 'token-load' });

/** A Mooncake trace with its prompts hashed once at a block size (reusable across runs). */
export interface PreparedTrace {
  readonly name: string;
  readonly blockSize: number;
  readonly records: readonly MooncakeRecord[];
  readonly prompts: readonly PromptBlocks[];
}

export function prepareTrace(records: readonly MooncakeRecord[], blockSize: number, name = 'trace'): PreparedTrace {
  const hasher = new MooncakePromptHasher(blockSize);
  return { name, blockSize, records, prompts: records.map((r) => hasher.prompt(r.hashIds, r.inputLength)) };
}

/** How each loop releases sessions and turns: the README's "Multi-turn Mooncake traces" (`speedup` divides timestamps and delays alike). */
export type Workload =
  | { readonly kind: 'open_loop'; readonly trace: PreparedTrace; readonly speedup?: number }
  /** `concurrency` sessions in flight (Dynamo's concurrency mode); timestamps ignored. */
  | { readonly kind: 'closed_loop'; readonly trace: PreparedTrace; readonly concurrency: number }
  /** Multi-turn sessions: turn t+1 arrives its think time after turn t completes. */
  | { readonly kind: 'sessions'; readonly sessions: readonly AgenticSession[] };

/** The settings every engine of a replay shares (ids and event ids are the replay's). */
export type ReplayEngineConfig = Omit<EngineConfig, 'workerId' | 'firstEventId'>;

export interface ReplayProgress {
  readonly done: number;
  readonly total: number;
  readonly simMs: number;
  readonly wallMs: number;
  readonly final: boolean;
}

interface ReplayOptions {
  readonly workers: number;
  readonly engine?: ReplayEngineConfig;
  readonly router: RouterSpec;
  readonly workload: Workload;
  /** Seeds the selection RNG (temperature sampling, tie-breaks, random routing). Default 1. */
  readonly seed?: number;
  /** KV events reach the router this long after the pass that emitted them starts. Default 0. */
  readonly eventDelayMs?: number;
  readonly onProgress?: (p: ReplayProgress) => void;
  /** Wall-clock interval between progress calls. Default 500 ms. */
  readonly progressEveryMs?: number;
}

interface ReplayCounters {
  routed: number;
  observes: number;
  kvEvents: number;
  steps: number;
  passes: number;
  rejected: number;
  maxInFlight: number;
  /** Live bookings left in the ledger after the run: 0 unless the lifecycle leaked. */
  bookingsAtEnd: number;
  /** Bookings whose prefill was marked complete (one per routed, admitted request). */
  prefillMarked: number;
}

interface ReplayResult {
  readonly router: string;
  readonly metrics: ReplayMetrics;
  /** Finished requests in completion order. */
  readonly records: RequestRecord[];
  readonly counters: ReplayCounters;
  readonly wallMs: number;
}

export function routerName(spec: RouterSpec): string {
  switch (spec.kind) {
    case 'round_robin':
    case 'random':
      return spec.kind;
    case 'kv_router': {
      const p = spec.policy ?? DEFAULT_KV_ROUTER;
      const ties = (p.tieBreakByTreeSize ?? true) ? ',ties=tree' : '';
      if (p.formula === 'overlap_weight') return `kv_router(weight=${p.overlapScoreWeight ?? 1},T=${p.temperature ?? 0}${ties})`;
      return `kv_router(credit=${p.overlapScoreCredit ?? 1},scale=${p.prefillLoadScale ?? 1},T=${p.temperature ?? 0}${ties})`;
    }
    case 'llmd':
      return `llmd(${(spec.policy ?? DEFAULT_LLMD).scorer})`;
  }
}

/** A request of the workload (a trace record, or a session's turn) and the next turn of its session. */
interface Item {
  readonly id: string;
  readonly osl: number;
  readonly outputTokens?: Uint32Array;
  /** Trace prompts come hashed (`prepareTrace`); session turns are hashed when routed. */
  readonly prompt: PromptBlocks | Uint32Array;
  /** The session's next request (-1: none), released `delayMs` after this one completes. */
  next: number;
  delayMs: number;
}

interface Arrival {
  readonly t: number;
  readonly index: number;
}

type Update =
  | { readonly t: number; readonly kind: 'kv'; readonly ev: KvEvent }
  | { readonly t: number; readonly kind: 'prefill'; readonly id: string };

interface FinishEvent {
  readonly t: number;
  readonly record: RequestRecord;
}

/** One engine per worker id, each registered in `state` as a worker of its own (one dp rank, schedulable). */
export function registerEngines(state: PoolState, workerIds: readonly WorkerId[], cfg: ReplayEngineConfig): Engine[] {
  return workerIds.map((workerId) => {
    const e = new Engine({ ...cfg, workerId });
    const reason = state.register(workerId, e.capacity(), null, 0, true);
    if (reason !== undefined) throw new RangeError(`cannot register worker ${workerId}: ${reason}`);
    return e;
  });
}

export function runReplay(opts: ReplayOptions): ReplayResult {
  const W = opts.workers;
  if (!Number.isInteger(W) || W <= 0) throw new RangeError(`workers must be a positive integer, got ${W}`);
  const cfg = opts.engine ?? {};
  const bs = cfg.blockSize ?? 64;
  const delay = opts.eventDelayMs ?? 0;
  if (!(delay >= 0) || !Number.isFinite(delay)) throw new RangeError(`eventDelayMs must be a finite number >= 0, got ${delay}`);
  const seed = opts.seed ?? 1;
  const wl = opts.workload;
  if (wl.kind !== 'sessions' && wl.trace.blockSize !== bs) {
    throw new RangeError(`trace ${wl.trace.name} was hashed at block size ${wl.trace.blockSize}, engines use ${bs}`);
  }
  const wall0 = performance.now();

  const spec = opts.router;
  const kvPolicy: KvRouterPolicy = spec.kind === 'kv_router' ? (spec.policy ?? DEFAULT_KV_ROUTER) : DEFAULT_KV_ROUTER;
  const state = new PoolState({ pool: 'sim', blockSize: bs, selection: kvPolicy, bookingTtlMs: 300_000, workerTtlMs: 3_600_000, seed });
  const workerIds = Array.from({ length: W }, (_, i) => BigInt(i + 1) as WorkerId);
  const indexOf = new Map<bigint, number>(workerIds.map((id, i) => [id, i]));
  const engines = registerEngines(state, workerIds, { ...cfg, blockSize: bs });
  const rng = seededRng(`${seed}:router`);
  const rr: RoundRobinPolicy = roundRobinPolicy();
  const staticCandidates: CandidateInput[] = workerIds.map((workerId) => ({ workerId, dpRank: 0, overlapBlocks: 0, activePrefillTokens: 0, activeDecodeBlocks: 0, activeRequests: 0 }));

  // ------------------------------------------------------------- workload
  const reqs: Item[] = [];
  /** Each session's first request, in session order, and when it starts. */
  let starts: { readonly index: number; readonly t: number }[] = [];
  // Delays shrink with the open loop's speed-up, as Dynamo's `arrival_speedup_ratio` shrinks them.
  const delaySpeedup = wl.kind === 'open_loop' ? (wl.speedup ?? 1) : 1;
  if (wl.kind === 'sessions') {
    for (const sess of wl.sessions) {
      if (sess.turns.length > 0) starts.push({ index: reqs.length, t: sess.startMs });
      sess.turns.forEach((turn, k) => {
        const next = sess.turns[k + 1];
        reqs.push({ id: `${sess.sessionId}:${k}`, osl: turn.outputTokens.length, outputTokens: turn.outputTokens, prompt: turn.promptTokens, next: next ? reqs.length + 1 : -1, delayMs: next?.thinkTimeMs ?? 0 });
      });
    }
  } else {
    const records = wl.trace.records;
    if (wl.trace.prompts.length !== records.length) throw new RangeError(`trace ${wl.trace.name} has ${records.length} records but ${wl.trace.prompts.length} prompts`);
    records.forEach((r, i) => reqs.push({ id: `r${i}`, osl: r.outputLength, prompt: wl.trace.prompts[i]!, next: -1, delayMs: 0 }));
    // Grouped here, not in prepareTrace, so a sliced or filtered trace stays consistent.
    const sessions = traceSessions(records);
    for (const { turns } of sessions) {
      for (let k = 1; k < turns.length; k++) {
        const prev = reqs[turns[k - 1]!]!;
        prev.next = turns[k]!;
        prev.delayMs = (records[prev.next]!.delayMs ?? 0) / delaySpeedup;
      }
    }
    starts = sessions.map((s) => ({ index: s.turns[0]!, t: s.startMs }));
  }
  const total = reqs.length;
  const dynamicArrivals = wl.kind !== 'open_loop' || reqs.some((r) => r.next >= 0);
  const arrivals = new EventHeap<Arrival>();
  let loop: ClosedLoop | undefined;
  if (wl.kind === 'open_loop') {
    // A session's first record starts it (in a sliced trace it may be a later
    // turn that kept its timestamp; traceSessions refused one without).
    const firsts = starts.map((s) => ({ ...wl.trace.records[s.index]!, turn: 0 }));
    for (const a of openLoopArrivals(firsts, { speedup: delaySpeedup })) arrivals.push({ t: a.arrivalMs, index: starts[a.index]!.index });
  } else if (wl.kind === 'closed_loop') {
    loop = new ClosedLoop(starts.length, wl.concurrency);
    for (const a of loop.start(0)) arrivals.push({ t: a.arrivalMs, index: starts[a.index]!.index });
  } else for (const s of starts) arrivals.push(s);

  const updates = new EventHeap<Update>();
  const finishes = new EventHeap<FinishEvent>();
  const live = new Map<string, number>();
  const records: RequestRecord[] = [];
  const counters: ReplayCounters = { routed: 0, observes: 0, kvEvents: 0, steps: 0, passes: 0, rejected: 0, maxInFlight: 0, bookingsAtEnd: 0, prefillMarked: 0 };
  const progressEvery = opts.progressEveryMs ?? 500;
  let lastProgress = wall0;
  let nextTickMs = 10_000;
  let done = 0;
  let nowMs = 0;

  const progress = (final: boolean): void => {
    if (!opts.onProgress) return;
    const w = performance.now();
    if (!final && w - lastProgress < progressEvery) return;
    lastProgress = w;
    opts.onProgress({ done, total, simMs: nowMs, wallMs: w - wall0, final });
  };

  /** A request left the system (finished or rejected): its session's next turn, else the closed loop's next session. */
  const followUp = (index: number, t: number): void => {
    const { next, delayMs } = reqs[index]!;
    if (next >= 0) arrivals.push({ t: t + delayMs, index: next });
    else if (loop) {
      const n = loop.complete(t);
      if (n) arrivals.push({ t: n.arrivalMs, index: starts[n.index]!.index });
    }
  };

  const route = (a: Arrival): void => {
    const t = a.t;
    if (t >= nextTickMs) {
      state.tick(t);
      nextTickMs = t + 10_000;
    }
    const r = reqs[a.index]!;
    const id = r.id;
    const prompt = r.prompt instanceof Uint32Array ? promptFromTokens(r.prompt, bs) : r.prompt;
    const req = { isl: prompt.isl, blockSize: bs };
    let chosen: number;
    let overlap = 0;
    if (spec.kind === 'round_robin' || spec.kind === 'random') {
      // These never read the pool state: no observe (their bookings carry overlap 0).
      const sel = selectWorker(spec.kind === 'round_robin' ? rr : { kind: 'random' }, req, staticCandidates, rng);
      chosen = sel.chosen!.index;
    } else {
      const obs = state.observe(prompt.local, prompt.isl, t, prompt.sequence);
      counters.observes++;
      const c = spec.kind === 'kv_router' ? obs.selection.chosen : selectLlmd(spec.policy ?? DEFAULT_LLMD, req, obs.selection.scores.map((s) => s.input), rng).chosen;
      if (c === null) throw new Error(`${spec.kind} found no candidate`);
      const wid = c.workerId;
      chosen = indexOf.get(wid)!;
      for (const w of obs.workers) if (w.workerId === wid) overlap = w.match?.deviceBlocks ?? 0;
    }
    counters.routed++;
    const workerId = workerIds[chosen]!;
    state.ledger.book({ requestId: id, workerId, dpRank: 0, promptTokens: prompt.isl, overlapBlocks: overlap, sequenceHashes: prompt.sequence, source: 'simulator', nowMs: t });
    const added = engines[chosen]!.addRequest({ id, arrivalMs: t, prompt, osl: r.osl, ...(r.outputTokens ? { outputTokens: r.outputTokens } : {}) });
    if (!added.ok) {
      counters.rejected++;
      state.ledger.release(id, 'failed', t);
      done++;
      followUp(a.index, t);
      return;
    }
    live.set(id, a.index);
    if (live.size > counters.maxInFlight) counters.maxInFlight = live.size;
  };

  const pass: NextPass = { best: -1, bestT: Infinity, other: Infinity };
  for (;;) {
    const { best, bestT, other } = nextPass(engines, pass);
    const tu = updates.peekTime();
    const tf = finishes.peekTime();
    const ta = arrivals.peekTime();
    if (tu < Infinity && tu <= tf && tu <= ta && tu <= bestT) {
      const u = updates.pop()!;
      nowMs = u.t;
      if (u.kind === 'kv') state.applyKvEvent(u.ev, u.t);
      else state.ledger.markPrefillComplete(u.id, u.t);
      continue;
    }
    if (tf < Infinity && tf <= ta && tf <= bestT) {
      const f = finishes.pop()!;
      nowMs = f.t;
      const l = live.get(f.record.requestId)!;
      live.delete(f.record.requestId);
      state.ledger.release(f.record.requestId, 'completed', f.t);
      records.push(f.record);
      done++;
      followUp(l, f.t);
      progress(false);
      continue;
    }
    if (ta < Infinity && ta <= bestT) {
      const a = arrivals.pop()!;
      nowMs = a.t;
      route(a);
      continue;
    }
    if (best < 0) break;
    nowMs = bestT;
    // The earliest time a request could next be added to this engine: the next
    // known arrival, and in closed loop or sessions also any completion still
    // to be delivered or any other engine's next pass (which may finish one).
    const untilMs = dynamicArrivals ? Math.min(ta, tf, other) : ta;
    const eng = engines[best]!;
    const s = eng.step(bestT, { untilMs });
    counters.steps++;
    counters.passes += s.passes;
    for (const ev of s.kvEvents) {
      counters.kvEvents++;
      if (delay === 0) state.applyKvEvent(ev, s.startMs);
      else updates.push({ t: s.startMs + delay, kind: 'kv', ev });
    }
    for (const ft of s.firstTokens) updates.push({ t: ft.atMs, kind: 'prefill', id: ft.requestId });
    for (const { atMs, ...f } of s.finished) finishes.push({ t: atMs, record: { ...f, workerIndex: best, endMs: atMs } });
  }
  progress(true);
  counters.bookingsAtEnd = state.ledger.size;
  counters.prefillMarked = state.ledger.counters().prefillMarked;
  if (live.size > 0) throw new Error(`replay ended with ${live.size} requests unfinished`);
  return {
    router: routerName(spec),
    metrics: computeMetrics(records, W),
    records,
    counters,
    wallMs: performance.now() - wall0,
  };
}

/** A progress line on stderr, rewritten in place when stderr is a terminal. */
export function stderrProgress(label: string, write: (s: string) => void = (s) => void process.stderr.write(s)): (p: ReplayProgress) => void {
  const tty = process.stderr.isTTY === true;
  return (p) => {
    const pct = p.total > 0 ? ((100 * p.done) / p.total).toFixed(0) : '100';
    const line = `${label}: ${p.done}/${p.total} requests (${pct} %), sim ${(p.simMs / 1000).toFixed(1)} s, wall ${(p.wallMs / 1000).toFixed(1)} s`;
    if (tty) write(`\r${line}${p.final ? '\n' : ''}`);
    else if (p.final || p.done > 0) write(`${line}\n`);
  };
}
