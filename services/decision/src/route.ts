/**
 * One `route` query, start to finish:
 *
 *   decode ─▶ parameter set (read once) ─▶ observe both pools in parallel (deadline)
 *          ─▶ decide ─▶ reserve (booking event, local in-flight) ─▶ reply
 *          ─▶ (after the reply) decision record ─▶ JetStream, asynchronously
 *
 * A missing or slow indexer is a fallback reason in the reply and the record,
 * never an error; only a bad request is an error (BAD_REQUEST in headers).
 */
import { randomUUID } from 'node:crypto';
import { localBlockHashes } from '@vantage/hashing';
import {
  bookingEventCodec,
  bookingsSubject,
  encodeObserveRequestBinary,
  observeSubject,
  routeReplyCodec,
  routeRequestCodec,
  type Predictions,
  type RouteCandidate,
  type RouteReply,
} from '@vantage/protocol';
import { buildDecisionRecord, decideRoute, decodeObserveReply, probeRoles, RECORD_VARIANT, replyReason, type MapOptions, type ProbeResult, type ProbeTarget } from '@vantage/decision-core';
import { DECISION_RECORD_CURRENT, encodeSingleObject } from '@vantage/records';
import type { Decision, ParameterSet, Role } from '@vantage/rules';
import { toVantageError, VantageError, type Logger, type Outbox, type Requester } from '@vantage/runtime';
import type { DecisionSection } from './config';
import type { InFlight } from './inflight';
import type { DecisionMetrics } from './metrics';
import { failedProbe, toWireObservation } from './observe';
import type { RecordPublisher } from './publisher';
import { hrUs, type LocalPools } from './pools';

interface RouterDeps {
  readonly cfg: DecisionSection;
  readonly log: Logger;
  readonly metrics: DecisionMetrics;
  readonly inFlight: InFlight;
  readonly publisher: RecordPublisher | null;
  /** Request-reply for the observe queries of remote pools. */
  readonly requester: Requester;
  /** The pools this process holds (`source: "local"`); the others are asked over NATS. */
  readonly pools: LocalPools;
  /** Everything sent in one turn of the event loop leaves in one socket write (the booking, before the reply). */
  readonly outbox: Outbox;
  readonly instanceId: string;
  /** The active parameter set; called once per request. */
  readonly params: () => ParameterSet;
  /** Dispatch endpoint of a worker, from its registration; null when unknown. */
  readonly endpointOf: (pool: string, workerId: bigint) => string | null;
}

interface Prepared {
  readonly target: ProbeTarget;
  readonly localHashes: BigUint64Array;
  /** The request's token ids, when it sent them (to recognise the other candidate's identical prompt). */
  readonly tokenIds: Uint32Array | null;
  readonly loraName: string | null;
}

/** A route's decision record, to be built after the reply's write (`recordId` drawn then). */
type RecordInput = Omit<Parameters<typeof buildDecisionRecord>[0], 'recordId'> & { recordId: string };

export class Router {
  /** Records of routes answered since the last batch. */
  #records: RecordInput[] = [];
  #recordsScheduled = false;

  constructor(private readonly d: RouterDeps) {}

  /** Build and queue the records gathered so far (also called at shutdown, before the publisher flushes). */
  readonly flushRecords = (): void => {
    this.#recordsScheduled = false;
    const batch = this.#records;
    this.#records = [];
    const pub = this.d.publisher;
    if (pub === null) return;
    for (const x of batch) {
      try {
        x.recordId = randomUUID();
        pub.enqueue(x.recordId, x.requestId, encodeSingleObject(DECISION_RECORD_CURRENT, buildDecisionRecord(x)));
      } catch (e) {
        this.d.metrics.recordsDropped.inc({ cause: 'encode' });
        this.d.log.error({ err: e, requestId: x.requestId }, 'decision record could not be built or encoded: not published');
      }
    }
  };

  /** The responder's handler: reply bytes, or throws VantageError (sent as headers). */
  async handle(data: Uint8Array): Promise<Uint8Array> {
    const t0 = hrUs();
    const receivedAtMs = Date.now();
    const params = this.d.params(); // once per request: a reload never changes a decision in flight
    const decoded = routeRequestCodec.decode(data);
    if (!decoded.ok) throw new VantageError('BAD_REQUEST', `route: ${decoded.code}: ${decoded.reason}`, { details: { code: decoded.code } });
    const req = decoded.value;
    const efficient = this.prepare('efficient', req.candidates.efficient, null);
    // Both candidates often carry the same tokens: hash them once when the block size and LoRA agree too.
    const prepared = { efficient, capable: this.prepare('capable', req.candidates.capable, efficient) };

    // The Stage baseline makes no extra probes (seed 000): only the proposed model's pool is asked.
    const roles: readonly Role[] = probeRoles(params, req.stageProposal);
    // Remote pools: a reply is waited for maxAgeMs + observeTimeoutMs, so one later than maxAgeMs is
    // refused by the gate's age check rather than never seen (capped by the request's own deadline).
    const remoteBudgetMs = params.gate.maxAgeMs + this.d.cfg.observeTimeoutMs;
    const budgetMs = req.deadlineMs === null ? remoteBudgetMs : Math.min(remoteBudgetMs, req.deadlineMs);
    const tq = hrUs();
    // Remote observe queries leave first (in parallel); local pools are read while they are out.
    // Binary queries (and replies) carry local hashes (token ids were hashed once above; the booking needs them
    // too) and ask only for the worker Dynamo would choose. Identical prompts make identical queries: encoded once.
    const pending: Partial<Record<Role, Promise<ProbeResult>>> = {};
    let body: Uint8Array | null = null;
    for (const r of roles) {
      if (this.d.pools.get(r) !== undefined) continue;
      const p = prepared[r];
      const same = body !== null && r === 'capable' && p.target.promptTokens === prepared.efficient.target.promptTokens && p.localHashes === prepared.efficient.localHashes;
      if (!same) body = encodeObserveRequestBinary({ requestId: req.requestId, prompt: { kind: 'local_hashes', localHashes: p.localHashes, loraName: null }, promptTokens: p.target.promptTokens, workers: 'choice', replyEncoding: 'binary' });
      pending[r] = this.probe(p, body!, budgetMs);
    }
    const probes: Partial<Record<Role, ProbeResult>> = {};
    /** When each local pool's state was read (µs): its collection age runs from there to the decision. */
    const readAtUs: Partial<Record<Role, number>> = {};
    for (const r of roles) {
      if (pending[r] !== undefined) continue;
      readAtUs[r] = hrUs();
      probes[r] = this.counted(prepared[r].target.pool, this.d.pools.observe(r, prepared[r].localHashes, prepared[r].target.promptTokens));
    }
    for (const r of roles) if (pending[r] !== undefined) probes[r] = await pending[r];
    const decisionAtUs = hrUs();
    const queryDurationUs = decisionAtUs - tq;

    const nowMs = Date.now();
    // Remote: both queries left together, so both observations were collected (at most) this long before the decision.
    // Local: the state was read this long before the decision (near zero).
    const remote: MapOptions = { collectionAgeMs: queryDurationUs / 1000, nowMs, restoredLoadSuspectMs: this.d.cfg.restoredLoadSuspectMs };
    const byProbe = new Map<ProbeResult, MapOptions>();
    for (const r of roles) {
      const at = readAtUs[r];
      if (at !== undefined) byProbe.set(probes[r]!, { collectionAgeMs: (decisionAtUs - at) / 1000, nowMs, restoredLoadSuspectMs: this.d.cfg.restoredLoadSuspectMs });
    }
    const mapOpts = (p: ProbeResult): MapOptions => byProbe.get(p) ?? remote;
    const capableModel = prepared.capable.target.model;
    const localCapableInFlight = this.d.inFlight.count(capableModel);
    const targets = { efficient: prepared.efficient.target, capable: prepared.capable.target };
    const decision = decideRoute({ proposal: req.stageProposal, targets, probes, mapOpts, localCapableInFlight }, params);

    // Reserve the chosen worker: the worker Dynamo's cost picked in the chosen model's pool.
    const chosen = prepared[decision.choice];
    const chosenProbe = probes[decision.choice];
    const placement = chosenProbe?.kind === 'ok' && chosenProbe.reply.dynamoChoice !== null && chosenProbe.worker !== null ? chosenProbe.reply.dynamoChoice : null;
    const worker = placement !== null && chosenProbe?.kind === 'ok' ? chosenProbe.worker : null;
    let endpoint: string | null = null;
    if (placement !== null && worker !== null) {
      const subject = bookingsSubject(chosen.target.pool);
      const booking = {
        requestId: req.requestId,
        sessionId: req.sessionId,
        pool: chosen.target.pool,
        workerId: placement.workerId,
        dpRank: placement.dpRank,
        promptTokens: chosen.target.promptTokens,
        overlapBlocks: worker.deviceOverlapBlocks,
        // Local hashes: the indexer derives the sequence hashes it needs on its side.
        localHashes: chosen.localHashes,
        sequenceHashes: null,
        expectedOutputTokens: this.d.cfg.expectedOutputTokens > 0 ? this.d.cfg.expectedOutputTokens : null,
        prefillTokens: worker.effectivePrefillTokens,
        atMs: nowMs,
      };
      const encoded = bookingEventCodec.encode(booking);
      // A local pool books at once: the next route sees it, whichever replica's booking echo comes first.
      if (this.d.pools.get(decision.choice) !== undefined) this.d.pools.book(decision.choice, booking);
      // Queued before the reply (which is queued once this handler returns): both leave in one socket write, the
      // booking first, so the indexer has it before the gateway can report the request's end.
      this.d.outbox.publish(subject, encoded, undefined, this.d.pools.size > 0 ? this.d.pools.bookingHeaders() : undefined, (e) => this.d.log.warn({ err: e, pool: chosen.target.pool }, 'booking not sent'));
      this.d.metrics.bookings.inc(chosen.target.pool);
      this.d.inFlight.add(req.requestId, chosen.target.model, chosen.target.pool, nowMs);
      endpoint = this.d.endpointOf(chosen.target.pool, placement.workerId);
    }

    const predictions = replyPredictions(decision, params);
    const fallback = decision.reason.startsWith('fallback_') ? decision.reason : null;
    const reply: RouteReply = {
      requestId: req.requestId,
      sessionId: req.sessionId,
      stageProposal: req.stageProposal,
      model: chosen.target.model,
      modelRole: decision.choice,
      pool: chosen.target.pool,
      workerId: placement?.workerId ?? null,
      dpRank: placement?.dpRank ?? null,
      endpoint,
      reason: replyReason(decision.reason),
      fallback,
      detail: decision.detail === null ? null : decision.detail.message.slice(0, 1024),
      variant: RECORD_VARIANT[params.variant],
      observations: {
        efficient: probes.efficient === undefined ? null : toWireObservation(prepared.efficient.target, probes.efficient, mapOpts(probes.efficient)),
        capable: probes.capable === undefined ? null : toWireObservation(prepared.capable.target, probes.capable, mapOpts(probes.capable)),
      },
      predictions,
      parameterVersion: params.version,
      queryDurationUs: Math.round(queryDurationUs),
      decisionDurationUs: Math.round(hrUs() - t0),
    };
    const bytes = routeReplyCodec.encode(reply);
    const decisionDurationUs = Math.round(hrUs() - t0);
    this.d.metrics.routes.inc(decision.reason, params.variant, decision.choice);
    this.d.metrics.routeSeconds.observe(decisionDurationUs / 1e6, 'ok');

    // The record is built and encoded right after the reply's socket write, so Avro encoding never sits on
    // the reply path; the replies of one write share a batch, sent in batches (README, "Decision records").
    if (this.d.publisher !== null) {
      this.#records.push({ recordId: '', requestId: req.requestId, sessionId: req.sessionId, proposal: req.stageProposal, targets, probes, mapOpts, localCapableInFlight, decision, params, receivedAtMs, placement, endpoint, queryDurationUs, decisionDurationUs, instanceId: this.d.instanceId, probed: roles.length > 0 });
      if (!this.#recordsScheduled) {
        this.#recordsScheduled = true;
        this.d.outbox.afterNextFlush(this.flushRecords);
      }
    }
    return bytes;
  }

  private prepare(role: Role, c: RouteCandidate, other: Prepared | null): Prepared {
    const conf = this.d.cfg.pools[role];
    if (c.pool !== null && c.pool !== conf.pool) {
      throw new VantageError('BAD_REQUEST', `route: ${role} candidate names pool "${c.pool}", this decision service serves "${conf.pool}" for ${role}`, {
        details: { role, pool: c.pool },
      });
    }
    const p = c.prompt;
    let localHashes: BigUint64Array;
    if (p.kind === 'local_hashes') localHashes = p.localHashes;
    else if (other !== null && other.tokenIds === p.tokenIds && other.target.blockSize === conf.blockSize && other.loraName === p.loraName) localHashes = other.localHashes;
    else localHashes = localBlockHashes(p.tokenIds, conf.blockSize, p.loraName);
    return {
      target: { role, model: c.model, pool: conf.pool, blockSize: conf.blockSize, promptTokens: c.promptTokens },
      localHashes,
      tokenIds: p.kind === 'token_ids' ? p.tokenIds : null,
      loraName: p.loraName,
    };
  }

  /** A probe's outcome, counted (a local pool still restoring is a failed probe, as an unreachable indexer is). */
  private counted(pool: string, result: ProbeResult): ProbeResult {
    this.d.metrics.observeSeconds.observe(result.rttUs / 1e6, pool, result.kind === 'ok' ? 'ok' : result.status);
    if (result.kind === 'failed') this.d.metrics.indexerUnavailable.inc({ pool, status: result.status });
    return result;
  }

  private async probe(p: Prepared, body: Uint8Array, budgetMs: number): Promise<ProbeResult> {
    const pool = p.target.pool;
    const t = hrUs();
    if (budgetMs <= 0) {
      this.d.metrics.indexerUnavailable.inc({ pool, status: 'timeout' });
      return { kind: 'failed', status: 'timeout', code: 'DEADLINE_EXCEEDED', reason: 'no time budget left for the observe query', rttUs: 0 };
    }
    let result: ProbeResult;
    try {
      const msg = await this.d.requester.request(observeSubject(pool), body, budgetMs);
      const rttUs = hrUs() - t;
      const r = decodeObserveReply(msg.data);
      result = r.ok ? { kind: 'ok', reply: r.reply, worker: r.worker, rttUs } : { kind: 'failed', status: 'error', code: r.code.toUpperCase(), reason: `observe reply: ${r.reason}`, rttUs };
      if (!r.ok) this.d.log.warn({ pool, code: r.code, reason: r.reason }, 'observe reply rejected');
    } catch (e) {
      result = failedProbe(toVantageError(e), hrUs() - t);
    }
    return this.counted(pool, result);
  }
}

function replyPredictions(d: Decision, params: ParameterSet): Predictions {
  const which = params.variant === 'blind' ? 'blind' : params.variant === 'cache' ? 'cache' : null;
  if (which === null) return { estimator: 'none', efficientTtftMs: null, capableTtftMs: null, advantageMs: null, marginMs: null };
  const e = d.predictions.efficient?.[which];
  const c = d.predictions.capable?.[which];
  return {
    estimator: which,
    efficientTtftMs: e?.ok === true ? e.ms : null,
    capableTtftMs: c?.ok === true ? c.ms : null,
    advantageMs: d.advantageMs[which],
    marginMs: which === 'blind' ? params.margins.deltaBlindMs : params.margins.deltaCacheMs,
  };
}
