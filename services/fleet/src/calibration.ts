/**
 * The calibration harness: runs @vantage/evaluation's calibration plan (seed 000, "Collect GPU
 * calibration data") on the live fleet through the real decision and indexer services, so every
 * measurement lands in Kafka through the outcome service as an evaluation request does. One repeat
 * of a condition: wait for idle pools (R = 0), warm the probe's prefix, book and serve the background
 * load on every schedulable worker of each loaded pool, probe both candidates at once, wait for the
 * end; the README's "Calibration" section gives each step and why. Probe session ids follow the plan
 * (`cal:<condition>:<repeat>:<idle|loaded|qgrid>`), so `vantage fit` reads the outcome rows directly.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { CalibrationCondition, CalibrationPlan, CalibrationRun, Role } from '@vantage/evaluation';
import { concatTokens, freshTokens, labelSeed } from '@vantage/random';
import { ROUTE_SUBJECT, type ObserveReply } from '@vantage/protocol';
import { promptFromTokens, type PromptBlocks } from '@vantage/sim';
import type { WorkerId } from '@vantage/types';
import { followRequest, observePool, perBlockSize, publishBooking, routeRequest, sleep, waitForPools, type LoadgenPool, type Served } from './gateway';

interface CalibrationHarnessOptions {
  readonly nc: NatsConnection;
  readonly pools: { readonly efficient: LoadgenPool; readonly capable: LoadgenPool };
  readonly plan: CalibrationPlan;
  /** Route subject of the decision service (default `vantage.v1.route`). */
  readonly routeSubject?: string;
  /** Wall bound per request, dispatch to done. Default 60 s. */
  readonly requestTimeoutMs?: number;
  /** Wall bound of each wait for idle pools / visible bookings. Default 10 s. */
  readonly settleTimeoutMs?: number;
  /** Run only the first N repeats of the run order (smoke runs). */
  readonly maxRuns?: number;
  readonly progress?: (line: string) => void;
  /** One line per request (probe, warm-up, background). */
  readonly onRequest?: (r: CalibrationRequestLog) => void;
  readonly signal?: AbortSignal;
}

interface CalibrationRequestLog {
  readonly conditionId: string;
  readonly repeat: number;
  readonly kind: 'probe' | 'warmup' | 'background';
  readonly role: Role;
  readonly requestId: string;
  readonly sessionId: string;
  readonly background: boolean;
  readonly workerId: string | null;
  readonly status: 'done' | 'failed' | 'cancelled';
  readonly error: string | null;
  readonly isl: number;
  readonly osl: number;
  /** Sim ms as the engine measured them. */
  readonly ttftMs: number | null;
  readonly reusedTokens: number | null;
  /** For probes: the route reply's reason and the observed R, P, K of the measured candidate. */
  readonly reason: string | null;
  readonly observed: { readonly K: number | null; readonly R: number | null; readonly P: number | null } | null;
}

type ServeResult = Pick<Served, 'status' | 'error' | 'ttftMs' | 'reusedTokens'>;

/** A prompt of token ids and its blocks at each pool's block size (hashed once per block size). */
type TokenPrompt = { readonly tokens: Uint32Array; readonly blocks: (pool: LoadgenPool) => PromptBlocks };
const tokenPrompt = (tokens: Uint32Array): TokenPrompt => ({ tokens, blocks: perBlockSize((bs) => promptFromTokens(tokens, bs)) });

export async function runCalibration(o: CalibrationHarnessOptions) {
  const nc = o.nc;
  const routeSubject = o.routeSubject ?? ROUTE_SUBJECT;
  const routeTimeoutMs = 5_000;
  const requestTimeoutMs = o.requestTimeoutMs ?? 60_000;
  const settleTimeoutMs = o.settleTimeoutMs ?? 10_000;
  /** Request id prefix, unique per harness run. */
  const runId = `cal${Date.now().toString(36)}`;
  /** Mixed into every repeat's content seed, so two harness runs never share prompts. */
  const salt = Date.now() % 1_000_000_007;
  const progress = o.progress ?? (() => {});
  const started = performance.now();
  const byId = new Map(o.plan.conditions.map((c) => [c.id, c]));
  const order = o.plan.runOrder.slice(0, o.maxRuns ?? o.plan.runOrder.length);
  // loadNotVisible: probes whose observation did not show the background load the condition asked for.
  const counts = { probes: 0, probesCompleted: 0, warmups: 0, background: 0, failed: 0, settleTimeouts: 0, loadNotVisible: 0 };

  /**
   * Polls both pools until `ok(pool, reply)` holds for each, or the settle bound passes. `pollMs` is short
   * for the bookings check: at time scale 4 a 2,048-token backlog drains in about 10 wall ms, and a
   * probe sent after it has drained measures no contention.
   */
  const settle = async (what: string, ok: (pool: LoadgenPool, r: ObserveReply) => boolean, pollMs = 50): Promise<boolean> => {
    const failing = await waitForPools(nc, [o.pools.efficient, o.pools.capable], ok, { waitMs: settleTimeoutMs, everyMs: pollMs, timeoutMs: routeTimeoutMs, ...(o.signal ? { signal: o.signal } : {}) });
    if (failing.length === 0) return true;
    counts.settleTimeouts++;
    progress(`calibration: ${what} not reached within ${settleTimeoutMs} ms; going on`);
    return false;
  };
  const idle = (): Promise<boolean> => settle('idle pools (R = 0 everywhere)', (_p, rep) => {
    const live = rep.workers.filter((w) => w.schedulable);
    return live.length > 0 && live.every((w) => w.R === 0);
  });

  /** Sends one request to a worker and follows it to its end, publishing lifecycle events as a gateway does. */
  const serve = async (
    pool: LoadgenPool,
    workerId: WorkerId,
    req: { requestId: string; sessionId: string; tokens: Uint32Array; osl: number; background?: boolean },
    onFirstToken?: () => void,
  ): Promise<ServeResult> => {
    const { status, error, ttftMs, reusedTokens } = await followRequest(
      nc,
      pool.name,
      workerId,
      { requestId: req.requestId, sessionId: req.sessionId, osl: req.osl, prompt: { kind: 'token_ids', tokens: req.tokens }, outputTokens: null },
      { timeoutMs: requestTimeoutMs, ...(req.background === true ? { mark: { background: true, arrivalMs: Date.now() } } : {}), ...(onFirstToken ? { onFirstToken } : {}) },
    );
    return { status, error, ttftMs, reusedTokens };
  };

  /** Route through the decision service with Stage proposing `role`, then serve where it says. */
  const routed = async (
    c: CalibrationCondition,
    run: CalibrationRun,
    kind: 'probe' | 'warmup',
    role: Role,
    sessionId: string,
    prompt: TokenPrompt,
    osl: number,
    /** Awaited once the route reply is in (or the route failed), before the request is served. */
    routedBarrier?: () => Promise<void>,
  ): Promise<void> => {
    const requestId = `${runId}-${c.id}-${run.repeat}-${kind}-${role}`;
    let arrived = false;
    const arrive = async (): Promise<void> => {
      if (arrived || routedBarrier === undefined) return;
      arrived = true;
      await routedBarrier();
    };
    let log: CalibrationRequestLog;
    const base = { conditionId: c.id, repeat: run.repeat, kind, role, requestId, sessionId, background: false, isl: prompt.tokens.length, osl };
    try {
      const v = await routeRequest(
        nc,
        routeSubject,
        { requestId, sessionId, stageProposal: role, pools: o.pools, localHashes: (p) => prompt.blocks(p).local, promptTokens: prompt.tokens.length },
        routeTimeoutMs,
      );
      if (v.modelRole !== role) throw new Error(`the decision service changed ${role} to ${v.modelRole}: calibration needs a parameter set that never overrides`);
      if (v.workerId === null) throw new Error(`route reply without a worker (${v.reason}${v.fallback === null ? '' : `, ${v.fallback}`})`);
      const pool = o.pools[role];
      await arrive();
      const res = await serve(pool, v.workerId, { requestId, sessionId, tokens: prompt.tokens, osl });
      const obs = v.observations[role];
      log = { ...base, ...res, workerId: v.workerId.toString(), reason: v.fallback === null ? v.reason : `${v.reason}:${v.fallback}`, observed: obs === null ? null : { K: obs.K, R: obs.R, P: obs.P } };
    } catch (e) {
      await arrive();
      log = { ...base, workerId: null, status: 'failed', error: e instanceof Error ? e.message : String(e), ttftMs: null, reusedTokens: null, reason: null, observed: null };
    }
    if (log.status !== 'done') counts.failed++;
    o.onRequest?.(log);
    if (kind === 'probe') {
      counts.probes++;
      if (log.status === 'done') counts.probesCompleted++;
      const want = c.background.filter((b) => b.pool === role).reduce((s, b) => s + b.count, 0);
      if (want > 0 && log.observed !== null && (log.observed.R ?? 0) < want) counts.loadNotVisible++;
    } else counts.warmups++;
  };

  for (let i = 0; i < order.length && !o.signal?.aborted; i++) {
    const { conditionId, repeat } = order[i]!;
    const c = byId.get(conditionId);
    const run = c?.runs[repeat];
    if (c === undefined || run === undefined) throw new Error(`plan run order names ${conditionId}:${repeat}, which the plan does not hold`);
    progress(`calibration ${i + 1}/${order.length}: ${c.id} repeat ${repeat} (${c.factor})`);
    await idle();
    const seed = (label: string, k = 0): number => labelSeed(run.contentSeed ^ salt, label, k);
    const prefix = tokenPrompt(freshTokens(seed('prefix'), c.probe.prefixTokens));
    const probe = tokenPrompt(concatTokens(prefix.tokens, freshTokens(seed('suffix'), c.probe.promptTokens - c.probe.prefixTokens)));

    // 2. Warm the reusable prefix on both candidates.
    if (c.probe.prefixTokens > 0) {
      await Promise.all(c.warm.map((role) => routed(c, run, 'warmup', role, run.warmupSessionId, prefix, 1)));
      await idle();
    }

    // 3. Background load on every schedulable worker of each loaded pool: booked now; served now for
    // generation contention, and for `immediate` probes only once both probes are routed (below).
    const bg: Promise<void>[] = [];
    const bgStarts: (() => void)[] = [];
    let firstTokensDue = 0;
    let firstTokensSeen = 0;
    /** Background requests still open per worker: the indexers must count at least these. */
    const open = new Map<string, number>();
    for (const [si, spec] of c.background.entries()) {
      const pool = o.pools[spec.pool];
      const workers = (await observePool(nc, pool.name, routeTimeoutMs)).workers.filter((w) => w.schedulable);
      for (const w of workers) {
        const key = `${pool.name}/${w.workerId.toString()}`;
        for (let j = 0; j < spec.count; j++) {
          const t = freshTokens(seed(`bg-${si}-${w.workerId.toString()}`, j), spec.promptTokens);
          const requestId = `${runId}-${c.id}-${repeat}-bg-${spec.pool}-${si}-${w.workerId.toString()}-${j}`;
          publishBooking(nc, pool.name, {
            requestId,
            sessionId: run.backgroundSessionId,
            workerId: w.workerId,
            dpRank: w.dpRank,
            promptTokens: t.length,
            overlapBlocks: 0,
            sequenceHashes: promptFromTokens(t, pool.blockSize).sequence,
            expectedOutputTokens: spec.outputTokens,
          });
          firstTokensDue++;
          open.set(key, (open.get(key) ?? 0) + 1);
          bgStarts.push(() => bg.push(
            serve(pool, w.workerId, { requestId, sessionId: run.backgroundSessionId, tokens: t, osl: spec.outputTokens, background: true }, () => firstTokensSeen++).then((res) => {
              open.set(key, (open.get(key) ?? 1) - 1);
              counts.background++;
              if (res.status !== 'done') counts.failed++;
              const ids = { conditionId: c.id, repeat, kind: 'background', role: spec.pool, requestId, sessionId: run.backgroundSessionId, background: true } as const;
              o.onRequest?.({ ...ids, workerId: w.workerId.toString(), isl: t.length, osl: spec.outputTokens, ...res, reason: null, observed: null });
            }),
          ));
        }
      }
    }
    const startBackground = (): void => {
      for (const start of bgStarts.splice(0)) start();
    };

    // 4. Probe both candidates at the same instant, when the condition says. An `immediate` probe is
    // routed while the background is booked but not yet served (the observations show its R and P),
    // and the background is served the moment both probes are routed, just ahead of them: the probes
    // land while the backlog is all still there, however long routing took on a loaded host.
    let barrier: (() => Promise<void>) | undefined;
    if (bgStarts.length > 0 && c.probeTiming === 'after_background_first_tokens') startBackground();
    if (bgStarts.length > 0) {
      let waiting = c.measure.length;
      let release!: () => void;
      const all = new Promise<void>((r) => (release = r));
      barrier = async (): Promise<void> => {
        if (--waiting === 0) {
          startBackground();
          release();
        }
        await all;
      };
    }
    if (firstTokensDue > 0) {
      if (c.probeTiming === 'after_background_first_tokens') {
        const until = performance.now() + settleTimeoutMs;
        while (firstTokensSeen < firstTokensDue && performance.now() < until) await sleep(5);
        if (firstTokensSeen < firstTokensDue) counts.settleTimeouts++;
      } else {
        // The bookings must be applied by the indexers before the probes' observe queries.
        // Requests that already finished are no longer booked, so the check is against those still open.
        await settle('background bookings visible', (pool, rep) => rep.workers.every((w) => w.R >= (open.get(`${pool.name}/${w.workerId.toString()}`) ?? 0)), 2);
      }
    }
    await Promise.all(c.measure.map((role) => routed(c, run, 'probe', role, run.sessionId, probe, c.probe.outputTokens, barrier)));
    startBackground();
    await Promise.all(bg);
  }
  await nc.flush();
  return { runs: order.length, ...counts, durationMs: Math.round(performance.now() - started) };
}
