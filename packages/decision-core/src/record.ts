/**
 * The decision service's call of the rules and its record, transport-free, so
 * the offline study makes the very same call: which pools a variant probes,
 * the rules' inputs built from the probes (`toCandidateReport`), `decide` with
 * the local capable in-flight count, and the decision record (gate checks,
 * predictions, vocabularies) built from the same values.
 */
import type { CandidatePrediction, DecisionRecord, GateChecks } from '@vantage/records';
import { decide, type CandidateReport, type Decision, type ParameterSet, type Role } from '@vantage/rules';
import type { WorkerId } from '@vantage/types';
import { toCandidateReport, toRecordObservation, type MapOptions, type ProbeResult, type ProbeTarget } from './probe';
import { RECORD_REASON, RECORD_VARIANT } from './vocabulary';

const ROLES = ['efficient', 'capable'] as const;

/**
 * The pools a route probes: the Stage baseline makes no extra probes (seed 000), only the proposed
 * model's pool is asked (the query Dynamo's own routing makes anyway, to know which worker to reserve).
 */
export function probeRoles(params: ParameterSet, proposal: Role): readonly Role[] {
  return params.variant === 'stage' ? [proposal] : ROLES;
}

interface RouteDecisionInput {
  readonly proposal: Role;
  readonly targets: Readonly<Record<Role, ProbeTarget>>;
  /** The probes made (`probeRoles`); an absent one is reported unavailable to the rules. */
  readonly probes: Partial<Record<Role, ProbeResult>>;
  readonly mapOpts: (p: ProbeResult) => MapOptions;
  /** This process's local in-flight count of the capable model (gate G's local limit). */
  readonly localCapableInFlight: number;
}

/** `decide` on the probes, exactly as a route calls it. */
export function decideRoute(x: RouteDecisionInput, params: ParameterSet): Decision {
  const report = (r: Role): CandidateReport => {
    const p = x.probes[r];
    return p === undefined ? { kind: 'unavailable', cause: 'not probed (stage variant)' } : toCandidateReport(x.targets[r], p, x.mapOpts(p));
  };
  return decide({ proposal: x.proposal, efficient: report('efficient'), capable: report('capable'), localCapableInFlight: x.localCapableInFlight }, params);
}

interface DecisionRecordInput extends RouteDecisionInput {
  readonly recordId: string;
  readonly requestId: string;
  readonly sessionId: string;
  readonly decision: Decision;
  readonly params: ParameterSet;
  readonly receivedAtMs: number;
  readonly placement: { readonly workerId: WorkerId; readonly dpRank: number } | null;
  readonly endpoint: string | null;
  readonly queryDurationUs: number;
  readonly decisionDurationUs: number;
  readonly instanceId: string;
  readonly probed: boolean;
}

const GATE_INPUT_FAILURES = new Set(['fallback_indexer_unavailable', 'fallback_missing_observation', 'fallback_invalid_observation', 'fallback_suspect_index']);

/** The gate's compared values, for the record; null when the gate was not evaluated. */
function gateChecks(x: Pick<DecisionRecordInput, 'decision' | 'params' | 'probes' | 'mapOpts' | 'localCapableInFlight'>): GateChecks | null {
  const { decision: d, params } = x;
  if (d.reason === 'kept_capable_proposal' || d.reason === 'kept_stage_variant') return null;
  const g = params.gate;
  const cap = x.probes.capable;
  const capWorker = cap?.kind === 'ok' ? cap.worker : null;
  const ages = ROLES.flatMap((r) => {
    const p = x.probes[r];
    return p === undefined || p.kind === 'failed' ? [] : [x.mapOpts(p).collectionAgeMs];
  });
  const age = ages.length === 0 ? null : Math.max(...ages);
  const passed = d.couldAct || d.reason === 'fallback_prediction_out_of_range' || d.reason === 'fallback_prediction_invalid';
  const withinMaxAge = age === null ? null : age <= g.maxAgeMs;
  const observationsValid = passed
    ? true
    : GATE_INPUT_FAILURES.has(d.reason) || (d.reason === 'fallback_stale_observation' && withinMaxAge === true)
      ? false
      : d.reason === 'fallback_destination_limit' || d.reason === 'fallback_local_limit' || d.reason === 'fallback_stale_observation'
        ? true
        : null;
  return {
    passed,
    capableSchedulable: capWorker === null ? null : capWorker.schedulable,
    observationsValid,
    collectionAgeMs: age === null ? null : Math.round(age),
    maxAgeMs: Math.round(g.maxAgeMs),
    withinMaxAge,
    capableBookedRequests: capWorker?.R ?? null,
    destinationLimit: g.destinationLimit,
    destinationBelowLimit: capWorker === null ? null : capWorker.R < g.destinationLimit,
    localInFlight: x.localCapableInFlight,
    localLimit: g.localLimit,
    localBelowLimit: x.localCapableInFlight < g.localLimit,
  };
}

function prediction(role: Role, model: string, d: Decision): CandidatePrediction {
  const p = d.predictions[role];
  return {
    role,
    model,
    blindTtftMs: p?.blind.ok === true ? p.blind.ms : null,
    cacheTtftMs: p?.cache.ok === true ? p.cache.ms : null,
  };
}

export function buildDecisionRecord(x: DecisionRecordInput): DecisionRecord {
  const { targets, probes, decision: d, params } = x;
  const observations = ROLES.flatMap((r) => {
    const p = probes[r];
    return p === undefined ? [] : [toRecordObservation(targets[r], p, x.mapOpts(p))];
  });
  const which = params.variant === 'blind' ? 'blind' : params.variant === 'cache' ? 'cache' : null;
  const detail = d.detail === null ? d.reason : `${d.reason}: ${d.detail.message}`;
  return {
    recordId: x.recordId,
    requestId: x.requestId,
    sessionId: x.sessionId,
    timestampMs: x.receivedAtMs,
    parameterSetVersion: params.version,
    variant: RECORD_VARIANT[params.variant],
    stageProposal: { model: targets[x.proposal].model, role: x.proposal },
    finalChoice: { model: targets[d.choice].model, role: d.choice },
    reason: RECORD_REASON[d.reason],
    detail,
    couldAct: d.couldAct,
    triggered: d.triggered,
    gate: gateChecks(x),
    observations,
    predictions: ROLES.filter((r) => probes[r] !== undefined).map((r) => prediction(r, targets[r].model, d)),
    advantageMs: which === null ? null : d.advantageMs[which],
    chosenWorkerId: x.placement?.workerId ?? null,
    chosenDpRank: x.placement?.dpRank ?? null,
    endpoint: x.endpoint,
    observeDurationUs: x.probed ? Math.round(x.queryDurationUs) : null,
    decisionDurationUs: x.decisionDurationUs,
    decisionInstanceId: x.instanceId,
    background: false,
  };
}
