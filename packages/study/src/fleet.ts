/**
 * Two model pools on the discrete-event simulator, behind the decision path the live services run:
 * README "What it owns" (`TwoPoolFleet`) gives each step of a routed and a direct request and the
 * booking lifecycle. Times are the simulated clock (ms) offset by a fixed epoch; no wall clock enters
 * the simulation.
 */
import { buildDecisionRecord, decideRoute, decodeObserveReply, observeReplyOf, probeRoles, type MapOptions, type ProbeResult, type ProbeTarget } from '@vantage/decision-core';
import { PoolState } from '@vantage/observation';
import { observeReplyCodec } from '@vantage/protocol';
import { joinOutcome, outcomeToJsonRow, type DecisionRecord, type JsonRow, type LifecycleEventInput, type OutcomeRecord } from '@vantage/records';
import type { Decision, ParameterSet, Role } from '@vantage/rules';
import { DEFAULT_KV_ROUTER, EventHeap, nextPass, promptFromTokens, registerEngines, type Engine, type Finished, type NextPass, type PromptBlocks, type ReplayEngineConfig, type RequestRecord, type TimingModel } from '@vantage/sim';
import type { WorkerId } from '@vantage/types';

const ROLES: readonly Role[] = ['efficient', 'capable'];

/** Outcome times: simulated ms after this epoch (2026-01-01T00:00:00Z). */
const SIM_EPOCH_MS = 1_767_225_600_000;

/** A pool: its name, its worker count and its engines' settings (block size and timing required). */
interface PoolSpec extends ReplayEngineConfig {
  /** Pool and model name (what decision records and outcome rows carry). */
  readonly name: string;
  readonly workers: number;
  readonly blockSize: number;
  readonly timing: TimingModel;
}

export interface FleetSpec {
  readonly efficient: PoolSpec;
  readonly capable: PoolSpec;
}

interface RoutedRequest {
  readonly requestId: string;
  readonly sessionId: string;
  readonly tokens: Uint32Array;
  readonly osl: number;
  readonly outputTokens?: Uint32Array;
  readonly proposal: Role;
  readonly params: ParameterSet;
}

interface DirectRequest {
  readonly requestId: string;
  readonly sessionId: string;
  readonly role: Role;
  readonly tokens: Uint32Array;
  readonly osl: number;
  /** A given worker; default Dynamo's own choice in the pool (`PoolState.observe`'s selection). */
  readonly workerId?: WorkerId;
  /** Booked with this expected output length (background load announces it). */
  readonly expectedOutputTokens?: number | null;
}

/** A finished request as the replay records it, with the pool it ran on and how it was routed. */
export interface ServedRequest extends Omit<RequestRecord, 'workerIndex'> {
  readonly role: Role;
  /** Null for direct (background) requests. */
  readonly decision: Decision | null;
  readonly record: DecisionRecord | null;
  /** The flattened outcome row (null when outcome rows are not kept). */
  readonly row: JsonRow | null;
}

interface Callbacks {
  readonly onFirstToken?: (atMs: number) => void;
  readonly onDone?: (r: ServedRequest) => void;
}

/** A request on an engine: what its outcome row and `onDone` need. */
interface Live {
  readonly requestId: string;
  readonly sessionId: string;
  readonly pool: SimPool;
  readonly workerId: WorkerId;
  readonly arrivalMs: number;
  /** Null for direct (background) requests. */
  readonly decision: Decision | null;
  readonly record: DecisionRecord | null;
  readonly cb: Callbacks;
}

class SimPool {
  readonly state: PoolState;
  readonly engines: Engine[];
  /** Worker ids high in the u64 range (as Dynamo's lease ids are), distinct per pool. */
  readonly workerIds: WorkerId[];
  readonly prompts = new WeakMap<Uint32Array, PromptBlocks>();

  constructor(
    readonly role: Role,
    readonly spec: PoolSpec,
    seed: number,
  ) {
    if (!Number.isInteger(spec.workers) || spec.workers < 1) throw new RangeError(`${role} pool: workers must be a positive integer, got ${spec.workers}`);
    this.state = new PoolState({ pool: spec.name, blockSize: spec.blockSize, selection: DEFAULT_KV_ROUTER, bookingTtlMs: 3_600_000, workerTtlMs: 3_600_000_000, seed });
    this.workerIds = Array.from({ length: spec.workers }, (_, i) => ((role === 'efficient' ? 0xe000_0000_0000_0000n : 0xc000_0000_0000_0000n) + BigInt(i + 1)) as WorkerId);
    // The spec names the engine settings as the engine does (blockSize, timing, numGpuBlocks, ...).
    this.engines = registerEngines(this.state, this.workerIds, spec);
  }

  prompt(tokens: Uint32Array): PromptBlocks {
    let p = this.prompts.get(tokens);
    if (p === undefined) this.prompts.set(tokens, (p = promptFromTokens(tokens, this.spec.blockSize)));
    return p;
  }

  target(n: number): ProbeTarget {
    return { role: this.role, model: this.spec.name, pool: this.spec.name, blockSize: this.spec.blockSize, promptTokens: n };
  }

  /**
   * The observe query of the decision service, answered as the indexer answers it: the reply for
   * Dynamo's chosen worker (`workers: 'choice'`), through the protocol codec both ways.
   */
  probe(p: PromptBlocks, nowMs: number): ProbeResult {
    const obs = this.state.observe(p.local, p.isl, nowMs, p.sequence);
    // The reply's clock is whole ms (the indexer stamps Date.now()); ages below 1 ms round to 0.
    const bytes = observeReplyCodec.encode(observeReplyOf(obs, { nowMs: Math.round(nowMs), queryDurationUs: 0, restoredAtMs: null, workers: 'choice' }));
    const r = decodeObserveReply(bytes);
    if (!r.ok) return { kind: 'failed', status: 'error', code: r.code.toUpperCase(), reason: `observe reply: ${r.reason}`, rttUs: 0 };
    return { kind: 'ok', reply: r.reply, worker: r.worker, rttUs: 0 };
  }
}

type Timed = { readonly t: number; readonly fn: () => void };

interface FleetOptions {
  readonly seed?: number;
  /** Keep outcome rows (default true). */
  readonly rows?: boolean;
  /** The decision instance id in records. Default `study`. */
  readonly instanceId?: string;
}

export class TwoPoolFleet {
  readonly pools: Readonly<Record<Role, SimPool>>;
  readonly rows: JsonRow[] = [];
  /** The outcome records the rows flatten (what the outcome service writes to Kafka as Avro). */
  readonly outcomes: OutcomeRecord[] = [];
  nowMs = 0;
  /** Local in-flight routed requests per pool, held from routing until completion (as the decision service). */
  readonly #inFlight: Record<Role, number> = { efficient: 0, capable: 0 };
  readonly #callbacks = new EventHeap<Timed>();
  readonly #live = new Map<string, Live>();
  readonly #keepRows: boolean;
  readonly #instanceId: string;
  /** Engine busy time per pool (sum of forward-pass durations over its workers), sim ms. */
  readonly #busyMs: Record<Role, number> = { efficient: 0, capable: 0 };

  constructor(
    readonly spec: FleetSpec,
    options: FleetOptions = {},
  ) {
    const seed = options.seed ?? 1;
    if (spec.efficient.name === spec.capable.name) throw new RangeError(`the two pools need different names (both "${spec.efficient.name}")`);
    this.pools = { efficient: new SimPool('efficient', spec.efficient, seed), capable: new SimPool('capable', spec.capable, seed + 1) };
    this.#keepRows = options.rows ?? true;
    this.#instanceId = options.instanceId ?? 'study';
  }

  /** Busy fraction of a pool's engines over [0, now]: the pool's utilisation. */
  utilisation(role: Role): number {
    return this.nowMs > 0 ? this.#busyMs[role] / (this.nowMs * this.pools[role].engines.length) : 0;
  }

  /** Run `fn` at simulated time `t` (not before now). */
  at(t: number, fn: () => void): void {
    this.#callbacks.push({ t: Math.max(t, this.nowMs), fn });
  }

  /**
   * Route one request as the decision service does, now, and serve it where the decision says.
   * Returns the decision (null when the chosen pool offered no worker: the request is not served).
   */
  route(req: RoutedRequest, cb: Callbacks = {}): Decision | null {
    const t = this.nowMs;
    const prompts = { efficient: this.pools.efficient.prompt(req.tokens), capable: this.pools.capable.prompt(req.tokens) };
    const targets = { efficient: this.pools.efficient.target(req.tokens.length), capable: this.pools.capable.target(req.tokens.length) };
    const roles = probeRoles(req.params, req.proposal);
    const probes: Partial<Record<Role, ProbeResult>> = {};
    for (const r of roles) probes[r] = this.pools[r].probe(prompts[r], t);
    const collection: MapOptions = { collectionAgeMs: 0, nowMs: SIM_EPOCH_MS + t, restoredLoadSuspectMs: 0 };
    const mapOpts = (): MapOptions => collection;
    const localCapableInFlight = this.#inFlight.capable;
    const decision = decideRoute({ proposal: req.proposal, targets, probes, mapOpts, localCapableInFlight }, req.params);
    const chosenProbe = probes[decision.choice];
    const placement = chosenProbe?.kind === 'ok' && chosenProbe.worker !== null ? chosenProbe.reply.dynamoChoice : null;
    const record = buildDecisionRecord({
      recordId: `rec-${req.requestId}`,
      requestId: req.requestId,
      sessionId: req.sessionId,
      proposal: req.proposal,
      targets,
      probes,
      mapOpts,
      localCapableInFlight,
      decision,
      params: req.params,
      // Whole ms, as the decision service stamps Date.now() (the record's timestamp is an Avro long).
      receivedAtMs: Math.round(SIM_EPOCH_MS + t),
      placement: placement === null ? null : { workerId: placement.workerId, dpRank: placement.dpRank },
      endpoint: null,
      queryDurationUs: 0,
      decisionDurationUs: 0,
      instanceId: this.#instanceId,
      probed: roles.length > 0,
    });
    if (placement === null || chosenProbe?.kind !== 'ok' || chosenProbe.worker === null) return null;
    const pool = this.pools[decision.choice];
    const l: Live = { requestId: req.requestId, sessionId: req.sessionId, pool, workerId: placement.workerId, arrivalMs: t, decision, record, cb };
    if (this.#serve(l, prompts[decision.choice], req.osl, req.outputTokens, chosenProbe.worker.deviceOverlapBlocks, null)) this.#inFlight[pool.role]++;
    return decision;
  }

  /** Book and serve a request directly (background traffic): on `workerId`, or on Dynamo's choice in the pool. */
  direct(req: DirectRequest, cb: Callbacks = {}): void {
    const pool = this.pools[req.role];
    const p = pool.prompt(req.tokens);
    let workerId = req.workerId;
    let overlap = 0;
    if (workerId === undefined) {
      const obs = pool.state.observe(p.local, p.isl, this.nowMs, p.sequence);
      const c = obs.selection.chosen;
      if (c === null) throw new Error(`${req.role} pool offered no worker`);
      workerId = c.workerId;
      for (const w of obs.workers) if (w.workerId === workerId) overlap = w.match?.deviceBlocks ?? 0;
    }
    const l: Live = { requestId: req.requestId, sessionId: req.sessionId, pool, workerId, arrivalMs: this.nowMs, decision: null, record: null, cb };
    this.#serve(l, p, req.osl, undefined, overlap, req.expectedOutputTokens ?? null);
  }

  /** Book `l` in its pool's ledger and add it to its worker's engine; false when the engine refused it (a failed outcome). */
  #serve(l: Live, prompt: PromptBlocks, osl: number, outputTokens: Uint32Array | undefined, overlapBlocks: number, expectedOutputTokens: number | null): boolean {
    const { pool, requestId, workerId, arrivalMs: t } = l;
    const i = pool.workerIds.indexOf(workerId);
    if (i < 0) throw new RangeError(`worker ${workerId} is not in the ${pool.role} pool`);
    pool.state.ledger.book({ requestId, workerId, dpRank: 0, promptTokens: prompt.isl, overlapBlocks, sequenceHashes: prompt.sequence, expectedOutputTokens, source: 'decision_service', nowMs: t });
    const added = pool.engines[i]!.addRequest({ id: requestId, arrivalMs: t, prompt, osl, ...(outputTokens ? { outputTokens } : {}) });
    if (!added.ok) {
      pool.state.ledger.release(requestId, 'failed', t);
      this.#emitRow(l, [{ kind: 'failed', atMs: t, error: `${added.code}: ${added.reason}` }]);
      return false;
    }
    this.#live.set(requestId, l);
    return true;
  }

  #emitRow(l: Live, events: readonly Omit<LifecycleEventInput, 'requestId' | 'sessionId' | 'pool'>[]): JsonRow | null {
    if (!this.#keepRows) return null;
    const { requestId, sessionId } = l;
    const evs: LifecycleEventInput[] = events.map((e) => ({ requestId, sessionId, pool: l.pool.spec.name, ...e, atMs: SIM_EPOCH_MS + e.atMs }));
    const outcome = joinOutcome(l.record, evs, { requestId, closedBy: 'complete', background: l.decision === null, arrivalMs: SIM_EPOCH_MS + l.arrivalMs });
    const row = outcomeToJsonRow(outcome);
    this.outcomes.push(outcome);
    this.rows.push(row);
    return row;
  }

  #finish({ atMs, ...f }: Finished): void {
    const l = this.#live.get(f.requestId);
    if (l === undefined) return;
    this.#live.delete(f.requestId);
    l.pool.state.ledger.release(f.requestId, 'completed', atMs);
    if (l.decision !== null) this.#inFlight[l.pool.role]--;
    const usage = { inputTokens: f.isl, outputTokens: f.outputTokens, cachedTokens: f.reusedTokens };
    const row = this.#emitRow(l, [
      { kind: 'first_token', atMs: f.firstTokenMs },
      { kind: 'done', atMs, usage },
    ]);
    l.cb.onDone?.({ ...f, endMs: atMs, role: l.pool.role, decision: l.decision, record: l.record, row });
  }

  /** Drive the simulation until nothing is left to happen (every request served, every callback run). */
  run(): void {
    const pools = ROLES.flatMap((role) => this.pools[role].engines.map(() => this.pools[role]));
    const engines = ROLES.flatMap((role) => this.pools[role].engines);
    const next: NextPass = { best: -1, bestT: Infinity, other: Infinity };
    for (;;) {
      const { best, bestT, other } = nextPass(engines, next);
      const tc = this.#callbacks.peekTime();
      // Callbacks first at equal times: a completion or arrival at t is seen by a pass starting at t.
      if (tc < Infinity && tc <= bestT) {
        const c = this.#callbacks.pop()!;
        this.nowMs = c.t;
        c.fn();
        continue;
      }
      if (best < 0) break;
      const pool = pools[best]!;
      this.nowMs = bestT;
      // Anything could be added before the next callback or another engine's next pass.
      const s = engines[best]!.step(bestT, { untilMs: Math.min(tc, other) });
      this.#busyMs[pool.role] += s.endMs - s.startMs;
      for (const ev of s.kvEvents) pool.state.applyKvEvent(ev, s.startMs);
      for (const ft of s.firstTokens) {
        this.at(ft.atMs, () => {
          pool.state.ledger.markPrefillComplete(ft.requestId, ft.atMs);
          this.#live.get(ft.requestId)?.cb.onFirstToken?.(ft.atMs);
        });
      }
      for (const f of s.finished) this.at(f.atMs, () => this.#finish(f));
    }
    if (this.#live.size > 0) throw new Error(`simulation ended with ${this.#live.size} requests unfinished`);
  }
}
