/**
 * The load generator: plays a workload against the live fleet as an agent gateway would, through the
 * real decision and indexer services (or, in `direct` mode, on Dynamo's own choice from the indexer),
 * following every request with its lifecycle events, with optional competing `background` traffic
 * beside it. Per request (Stage's proposal, routing and its fallback, serving, lifecycle, outcome) and
 * the summary: the README's "Load generator" section. Workload times (trace timestamps / speedup,
 * think times, background arrivals) are sim ms, waited in wall time divided by the fleet's time scale.
 */
import { setMaxListeners } from 'node:events';
import type { NatsConnection } from '@nats-io/transport-node';
import { ROUTE_SUBJECT, type ModelRole } from '@vantage/protocol';
import { type BackgroundRequestPlan } from '@vantage/evaluation';
import { freshTokens, seededRng } from '@vantage/random';
import { RouteError } from '@vantage/gateway-client';
import { VantageError } from '@vantage/runtime';
import { MooncakePromptHasher, openLoopArrivals, promptFromTokens, type AgenticSession, type MooncakeRecord, type PromptBlocks } from '@vantage/sim';
import type { WorkerId } from '@vantage/types';
import type { PromptPayload } from './generate';
import { followRequest, NOT_SERVED, observePool, perBlockSize, publishBooking, routeRequest, sleep, waitForPools, type LoadgenPool, type Served } from './gateway';

export type Workload =
  | { readonly kind: 'trace'; readonly records: readonly MooncakeRecord[]; readonly speedup: number }
  | { readonly kind: 'sessions'; readonly sessions: readonly AgenticSession[] };

export type RoutingMode = { readonly kind: 'route' } | { readonly kind: 'direct'; readonly role: ModelRole; readonly book: boolean };

export interface LoadgenOptions {
  readonly nc: NatsConnection;
  readonly pools: { readonly efficient: LoadgenPool; readonly capable: LoadgenPool };
  readonly workload: Workload;
  readonly mode: RoutingMode;
  /** Fraction of requests Stage proposes for the capable model (0: always efficient). */
  readonly capableFraction?: number;
  /**
   * Stage's proposal per turn, replacing `capableFraction` (the evaluation's proposal model). It sees
   * only what is the same in every variant of a matched run: the session's index in the workload,
   * the turn and the prompt length.
   */
  readonly proposal?: (ctx: { readonly sessionIndex: number; readonly turn: number; readonly promptTokens: number }) => ModelRole;
  /** Session ids of a sessions workload (default `<runId>-<generator's session id>`), e.g. the evaluation's `eval:<attempt>:<variant>:<i>`. */
  readonly sessionIdOf?: (sessionIndex: number) => string;
  readonly seed?: string | number;
  /** The fleet's sim ms per wall ms. */
  readonly timeScale?: number;
  /** Wall bound on the whole run; requests still open then are cancelled. */
  readonly maxDurationMs?: number;
  /** Wall bound per request from dispatch to done. */
  readonly requestTimeoutMs?: number;
  /** Wall bound on route and observe queries. */
  readonly routeTimeoutMs?: number;
  readonly progress?: (line: string) => void;
  readonly progressEveryMs?: number;
  readonly onOutcome?: (o: RequestOutcome) => void;
  /**
   * Before the first request, wait up to this long (wall ms) for the indexer of every pool the run
   * routes to to list a schedulable worker (a fleet or indexer still starting would otherwise fail
   * the first requests). 0: do not wait. Default 30,000.
   */
  readonly waitReadyMs?: number;
  /** Aborting ends the run early, like its deadline: nothing more is issued, open requests are cancelled. */
  readonly signal?: AbortSignal;
  /** Competing traffic played beside the workload (see the header). */
  readonly background?: {
    readonly requests: readonly BackgroundRequestPlan[];
    /** Session id of a stream, e.g. the evaluation's `evalbg:<attempt>:<variant>:<stream>`. */
    readonly sessionIdOf: (stream: number) => string;
  };
  readonly onBackgroundOutcome?: (o: RequestOutcome) => void;
}

/** A request's outcome: how it was placed and (`Served`) how it ended. */
export interface RequestOutcome extends Served {
  readonly requestId: string;
  readonly sessionId: string;
  readonly stageProposal: ModelRole;
  readonly modelRole: ModelRole | null;
  readonly model: string | null;
  readonly pool: string | null;
  readonly workerId: string | null;
  /** kept / overrode / fallback (decision service), direct, or route_error. */
  readonly reason: string;
  readonly fallback: string | null;
  readonly isl: number;
  readonly osl: number;
  /** Wall ms of routing; the wall times of `Served` count from dispatch (before routing). */
  readonly routeWallMs: number | null;
}

/** The run's summary (README, "Load generator": Output). */
export type LoadgenSummary = ReturnType<typeof summarize>;

interface Job {
  /** Position of the session in a sessions workload, and the turn (null for trace requests). */
  readonly sessionIndex: number | null;
  readonly turn: number;
  readonly requestId: string;
  readonly sessionId: string;
  readonly isl: number;
  readonly osl: number;
  readonly payload: PromptPayload;
  readonly outputTokens: Uint32Array | null;
  /** Prompt blocks at a pool's block size (hashed once per pool). */
  blocks(pool: LoadgenPool): PromptBlocks;
}

function distribution(xs: readonly number[]) {
  if (xs.length === 0) return { n: 0, mean: null, p50: null, p90: null, p99: null };
  const a = [...xs].sort((x, y) => x - y);
  // Nearest-rank percentiles: every reported value is one that was measured.
  const q = (p: number): number => a[Math.min(a.length - 1, Math.max(0, Math.ceil(p * a.length) - 1))]!;
  const r = (v: number): number => Math.round(v * 1000) / 1000;
  return { n: a.length, mean: r(a.reduce((s, x) => s + x, 0) / a.length), p50: r(q(0.5)), p90: r(q(0.9)), p99: r(q(0.99)) };
}

function summarize(
  outcomes: readonly RequestOutcome[],
  background: readonly RequestOutcome[] | null,
  meta: { mode: string; workload: string; planned: number; routeErrors: number; timeScale: number; durationMs: number },
) {
  const done = outcomes.filter((o) => o.status === 'done');
  const bgDone = background?.filter((o) => o.status === 'done') ?? [];
  const count = (key: (o: RequestOutcome) => string | null): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const o of outcomes) {
      const k = key(o);
      if (k !== null) out[k] = (out[k] ?? 0) + 1;
    }
    return out;
  };
  const isl = done.reduce((s, o) => s + o.isl, 0);
  const reused = done.reduce((s, o) => s + (o.reusedTokens ?? 0), 0);
  return {
    mode: meta.mode,
    workload: meta.workload,
    requests: outcomes.length,
    completed: done.length,
    errors: outcomes.filter((o) => o.status === 'failed').length,
    cancelled: outcomes.filter((o) => o.status === 'cancelled').length,
    routeErrors: meta.routeErrors,
    notIssued: meta.planned - outcomes.length,
    ttftMs: distribution(done.map((o) => o.ttftMs!)),
    e2eMs: distribution(done.map((o) => o.e2eMs!)),
    wallTtftMs: distribution(done.map((o) => o.wallTtftMs!)),
    routeWallMs: distribution(outcomes.flatMap((o) => (o.routeWallMs === null ? [] : [o.routeWallMs]))),
    perModel: count((o) => o.model),
    perWorker: count((o) => (o.workerId === null ? null : `${o.pool}/${o.workerId}`)),
    reasons: count((o) => o.reason),
    errorCodes: count((o) => o.error),
    prefixReuseRatio: isl > 0 ? Math.round((reused / isl) * 1e6) / 1e6 : null,
    timeScale: meta.timeScale,
    durationMs: meta.durationMs,
    // Competing traffic, when the run played some (engine-measured sim ms).
    ...(background === null
      ? {}
      : { background: { requests: background.length, completed: bgDone.length, ttftMs: distribution(bgDone.map((x) => x.ttftMs!)), e2eMs: distribution(bgDone.map((x) => x.e2eMs!)) } }),
  };
}

function traceJobs(records: readonly MooncakeRecord[], runId: string, speedup: number): { job: Job; arrivalMs: number }[] {
  const hashers = new Map<number, MooncakePromptHasher>();
  return openLoopArrivals(records, { speedup }).map(({ index, arrivalMs }) => {
    const rec = records[index]!;
    const requestId = `${runId}-${index}`;
    const job: Job = {
      requestId,
      sessionId: requestId, // Mooncake lines carry no session: each request is its own.
      sessionIndex: null,
      turn: 0,
      isl: rec.inputLength,
      osl: rec.outputLength,
      payload: { kind: 'mooncake', hashIds: rec.hashIds, inputLength: rec.inputLength },
      outputTokens: null,
      blocks: perBlockSize((bs) => {
        let h = hashers.get(bs);
        if (!h) hashers.set(bs, (h = new MooncakePromptHasher(bs)));
        return h.prompt(rec.hashIds, rec.inputLength);
      }),
    };
    return { job, arrivalMs };
  });
}

/** A request of token ids: a session's turn (its output tokens given), or a competing request (`osl` tokens of the engine's own). */
function tokenJob(
  ids: Pick<Job, 'requestId' | 'sessionId' | 'sessionIndex' | 'turn'>,
  tokens: Uint32Array,
  out: { readonly osl: number; readonly outputTokens: Uint32Array | null },
): Job {
  return { ...ids, isl: tokens.length, ...out, payload: { kind: 'token_ids', tokens }, blocks: perBlockSize((bs) => promptFromTokens(tokens, bs)) };
}

function sessionJob(s: AgenticSession, t: number, requestPrefix: string, sessionId: string, sessionIndex: number): Job {
  const turn = s.turns[t]!;
  return tokenJob({ requestId: `${requestPrefix}-${t}`, sessionId, sessionIndex, turn: t }, turn.promptTokens, { osl: turn.outputTokens.length, outputTokens: turn.outputTokens });
}

/** A competing request: fresh seeded tokens (nothing shared with the sessions or other requests). */
function backgroundJob(b: BackgroundRequestPlan, requestId: string, sessionId: string): Job {
  return tokenJob({ requestId, sessionId, sessionIndex: null, turn: b.index }, freshTokens(b.contentSeed, b.promptTokens), { osl: b.outputTokens, outputTokens: null });
}

/** The failed outcome of a request that never reached a worker (no route, no Dynamo choice). */
function unrouted(
  common: Pick<RequestOutcome, 'requestId' | 'sessionId' | 'stageProposal' | 'isl' | 'osl'>,
  reason: string,
  e: unknown,
): RequestOutcome {
  const code = e instanceof VantageError ? e.code : 'no_route';
  const detail = e instanceof Error ? e.message : String(e);
  return { ...common, ...NOT_SERVED, detail, modelRole: null, model: null, pool: null, workerId: null, reason, fallback: code, status: 'failed', error: code, routeWallMs: null };
}

/** Waits until the indexer of every pool the run uses lists a schedulable worker, or `waitReadyMs` is over. */
async function waitReady(o: LoadgenOptions, timeoutMs: number, signal: AbortSignal): Promise<void> {
  const waitMs = o.waitReadyMs ?? 30_000;
  if (waitMs <= 0) return;
  const pools = o.mode.kind === 'direct' ? [o.pools[o.mode.role]] : [o.pools.efficient, o.pools.capable];
  const pending = await waitForPools(o.nc, pools, (_p, r) => r.workers.some((w) => w.schedulable), { waitMs, everyMs: 250, timeoutMs, signal });
  if (pending.length > 0) o.progress?.(`loadgen: no schedulable worker on ${pending.join(', ')} after ${waitMs} ms; starting anyway`);
}

/** Runs the workload; resolves with every outcome and the summary once the last request ends (or the run's deadline). */
export async function runLoadgen(o: LoadgenOptions): Promise<{ outcomes: RequestOutcome[]; backgroundOutcomes: RequestOutcome[]; summary: LoadgenSummary }> {
  const nc = o.nc;
  const timeScale = o.timeScale ?? 1;
  const requestTimeoutMs = o.requestTimeoutMs ?? 120_000;
  const routeTimeoutMs = o.routeTimeoutMs ?? 5_000;
  const capableFraction = o.capableFraction ?? 0;
  const seed = String(o.seed ?? 1);
  /** Request id prefix, unique per run. */
  const runId = `lg${Date.now().toString(36)}`;
  const deadline = new AbortController();
  // Every waiting session, every background request waiting for its arrival and every request in
  // flight listens for the deadline, and each removes its listener when it ends: many at once is
  // the design, not a leak (Node warns past 10 by default).
  setMaxListeners(0, deadline.signal);
  const started = performance.now();
  const deadlineTimer = setTimeout(() => deadline.abort(), o.maxDurationMs ?? 600_000);
  o.signal?.addEventListener('abort', () => deadline.abort(), { once: true });
  const outcomes: RequestOutcome[] = [];
  const backgroundOutcomes: RequestOutcome[] = [];
  let routeErrors = 0;
  let issued = 0;
  let inflight = 0;

  const planned = o.workload.kind === 'trace' ? o.workload.records.length : o.workload.sessions.reduce((s, x) => s + x.turns.length, 0);
  const progress = o.progress;
  const progressTimer = progress
    ? setInterval(() => {
        const done = outcomes.filter((x) => x.status === 'done').length;
        progress(
          `loadgen ${((performance.now() - started) / 1000).toFixed(1)}s issued ${issued}/${planned} done ${done} failed ${outcomes.length - done} in-flight ${inflight} route-errors ${routeErrors}`,
        );
      }, o.progressEveryMs ?? 1000)
    : null;

  const stageOf = (job: Job): ModelRole => {
    if (o.proposal !== undefined && job.sessionIndex !== null) return o.proposal({ sessionIndex: job.sessionIndex, turn: job.turn, promptTokens: job.isl });
    return capableFraction > 0 && seededRng(`${seed}:${job.requestId}`).next() < capableFraction ? 'capable' : 'efficient';
  };

  /** Dynamo's own choice on one pool, from the indexer; books it when asked to (as Dynamo's router does). */
  const dynamoChoice = async (job: Job, pool: LoadgenPool, book: boolean): Promise<WorkerId> => {
    const blocks = job.blocks(pool);
    const r = await observePool(nc, pool.name, routeTimeoutMs, { requestId: job.requestId, localHashes: blocks.local, promptTokens: job.isl });
    const choice = r.dynamoChoice;
    if (!choice) throw new Error(`observe ${pool.name}: no worker to choose (${r.workers.length} known)`);
    if (book) {
      const w = r.workers.find((x) => x.workerId === choice.workerId && x.dpRank === choice.dpRank);
      publishBooking(nc, pool.name, {
        requestId: job.requestId,
        sessionId: job.sessionId,
        workerId: choice.workerId,
        dpRank: choice.dpRank,
        promptTokens: job.isl,
        overlapBlocks: w?.deviceOverlapBlocks ?? 0,
        sequenceHashes: blocks.sequence,
        expectedOutputTokens: job.osl,
      });
    }
    return choice.workerId;
  };

  interface Routed {
    role: ModelRole;
    pool: LoadgenPool;
    model: string;
    workerId: WorkerId;
    reason: string;
    fallback: string | null;
  }

  /** Placed by Dynamo's own choice on the pool of `role`. */
  const onDynamoChoice = async (job: Job, role: ModelRole, book: boolean, reason: string, fallback: string | null): Promise<Routed> => {
    const pool = o.pools[role];
    return { role, pool, model: pool.model, workerId: await dynamoChoice(job, pool, book), reason, fallback };
  };

  const route = async (job: Job, stage: ModelRole): Promise<Routed> => {
    if (o.mode.kind === 'direct') return onDynamoChoice(job, o.mode.role, o.mode.book, 'direct', null);
    try {
      const v = await routeRequest(
        nc,
        ROUTE_SUBJECT,
        { requestId: job.requestId, sessionId: job.sessionId, stageProposal: stage, pools: o.pools, localHashes: (p) => job.blocks(p).local, promptTokens: job.isl },
        routeTimeoutMs,
      );
      const pool = v.pool === o.pools.capable.name ? o.pools.capable : v.pool === o.pools.efficient.name ? o.pools.efficient : o.pools[v.modelRole];
      // A route without a worker (a fallback that names only the model) is placed by Dynamo's own choice, as its router would.
      const workerId = v.workerId ?? (await dynamoChoice(job, pool, false));
      return { role: v.modelRole, pool, model: v.model, workerId, reason: v.reason, fallback: v.fallback };
    } catch (e) {
      routeErrors++;
      return onDynamoChoice(job, stage, false, 'route_error', e instanceof RouteError && e.kind !== 'bad_reply' ? e.code : 'route_failed');
    }
  };

  /** Places a request (`place`), sends it there and follows it until done, failed, timeout or the run's deadline. */
  const play = async (job: Job, stage: ModelRole, place: () => Promise<Routed>, unroutedReason: string, mark?: { background: true; arrivalMs: number }): Promise<RequestOutcome> => {
    const t0 = performance.now();
    const common = { requestId: job.requestId, sessionId: job.sessionId, stageProposal: stage, isl: job.isl, osl: job.osl };
    try {
      const to = await place();
      const routeWallMs = performance.now() - t0;
      const r = await followRequest(
        nc,
        to.pool.name,
        to.workerId,
        { requestId: job.requestId, sessionId: job.sessionId, osl: job.osl, prompt: job.payload, outputTokens: job.outputTokens },
        { timeoutMs: requestTimeoutMs, signal: deadline.signal, t0, ...(mark ? { mark } : {}) },
      );
      return { ...common, modelRole: to.role, model: to.model, pool: to.pool.name, workerId: to.workerId.toString(), ...r, routeWallMs, reason: to.reason, fallback: to.fallback };
    } catch (e) {
      // No worker could be chosen at all: nothing was sent, so there is no lifecycle to report.
      return unrouted(common, unroutedReason, e);
    }
  };

  const runOne = async (job: Job): Promise<RequestOutcome> => {
    issued++;
    inflight++;
    const stage = stageOf(job);
    const out = await play(job, stage, () => route(job, stage), 'route_error');
    inflight--;
    outcomes.push(out);
    o.onOutcome?.(out);
    return out;
  };

  /** One competing request: Dynamo's choice on its pool, booked, served with background lifecycle events. */
  const runBackground = async (job: Job, role: ModelRole): Promise<RequestOutcome> => {
    const out = await play(job, role, () => onDynamoChoice(job, role, true, 'background', null), 'background', { background: true, arrivalMs: Date.now() });
    backgroundOutcomes.push(out);
    o.onBackgroundOutcome?.(out);
    return out;
  };

  await waitReady(o, routeTimeoutMs, deadline.signal);
  const t0run = performance.now();
  const jobs: Promise<unknown>[] = [];
  const wallOf = (simMs: number): number => simMs / timeScale;
  if (o.background !== undefined) {
    const bgo = o.background;
    for (const b of bgo.requests) {
      const sessionId = bgo.sessionIdOf(b.stream);
      jobs.push(
        (async () => {
          await sleep(t0run + wallOf(b.arrivalMs) - performance.now(), deadline.signal);
          if (deadline.signal.aborted) return;
          await runBackground(backgroundJob(b, `${runId}-${sessionId}-${b.index}`, sessionId), b.role);
        })(),
      );
    }
  }
  if (o.workload.kind === 'trace') {
    for (const { job, arrivalMs } of traceJobs(o.workload.records, runId, o.workload.speedup)) {
      await sleep(t0run + wallOf(arrivalMs) - performance.now(), deadline.signal);
      if (deadline.signal.aborted) break;
      jobs.push(runOne(job));
    }
  } else {
    for (const [si, s] of o.workload.sessions.entries()) {
      const sessionId = o.sessionIdOf?.(si) ?? `${runId}-${s.sessionId}`;
      // Request ids stay unique across runs even when session ids are the evaluation's own.
      const requestPrefix = o.sessionIdOf === undefined ? sessionId : `${runId}-${sessionId}`;
      jobs.push(
        (async () => {
          await sleep(t0run + wallOf(s.startMs) - performance.now(), deadline.signal);
          for (let t = 0; t < s.turns.length && !deadline.signal.aborted; t++) {
            if (t > 0) await sleep(wallOf(s.turns[t]!.thinkTimeMs), deadline.signal);
            if (deadline.signal.aborted) break;
            const r = await runOne(sessionJob(s, t, requestPrefix, sessionId, si));
            if (r.status !== 'done') break; // an agent stops when a turn fails
          }
        })(),
      );
    }
  }
  await Promise.all(jobs);
  clearTimeout(deadlineTimer);
  if (progressTimer) clearInterval(progressTimer);
  await nc.flush();
  const summary = summarize(outcomes, o.background === undefined ? null : backgroundOutcomes, {
    mode: o.mode.kind === 'direct' ? `direct:${o.pools[o.mode.role].name}` : 'route',
    workload: o.workload.kind,
    planned,
    routeErrors,
    timeScale,
    durationMs: Math.round(performance.now() - started),
  });
  return { outcomes, backgroundOutcomes, summary };
}
