import { predictBlind, predictCache, type ModelParameters, type Prediction } from './estimators';
import type {
  CandidateObservation,
  CandidateReport,
  DecisionInput,
  InputName,
  Observed,
  Role,
  SuspicionScope,
} from './observations';
import type { ParameterSet, Variant } from './parameter-set';
import type { Reason } from './reasons';

/**
 * The decision of seed 000 ("The five comparisons"):
 *
 *   choice = Stage's choice
 *   if choice == efficient AND G AND trigger: choice = capable
 *
 * Checks run in a fixed order and the first one that stops the rule is the reported reason
 * (exactly one per decision); the order and each check's reasons: README.md, "Decision procedure".
 */

/** Which candidate and input a reason is about, when it is about one. */
export interface ReasonDetail {
  readonly candidate?: Role;
  readonly input?: InputName;
  readonly message: string;
}

export interface CandidatePredictions {
  readonly blind: Prediction;
  readonly cache: Prediction;
}

export interface Decision {
  readonly proposal: Role;
  readonly choice: Role;
  readonly reason: Reason;
  readonly detail: ReasonDetail | null;
  readonly variant: Variant;
  /** The parameter set this decision read, for the record. */
  readonly parameterSetVersion: string;
  /** The gate passed and the rule evaluated its trigger to a definite answer. */
  readonly couldAct: boolean;
  /** The trigger was true (so the choice changed to capable). */
  readonly triggered: boolean;
  /**
   * Both estimators for both candidates whenever their inputs were present
   * (whatever the variant and outcome), for offline comparison. Only the
   * configured variant's estimator ever influences `choice`. null when the
   * candidate's indexer did not answer.
   */
  readonly predictions: { readonly efficient: CandidatePredictions | null; readonly capable: CandidatePredictions | null };
  /** T_efficient - T_capable per estimator, when both predictions succeeded. */
  readonly advantageMs: { readonly blind: number | null; readonly cache: number | null };
}

/** An input of one candidate that a variant reads. */
interface Requirement {
  readonly candidate: Role;
  readonly input: 'N' | 'K' | 'R' | 'P';
}

/**
 * The inputs each variant requires besides the capable candidate's R (the
 * destination limit) and schedulable flag, which G always needs.
 *
 * For count + prefill, a disabled (null) term requires nothing: it can never
 * trigger, and requiring its input would make an unused, possibly unknown
 * prefill pressure (no advertised capacity) block the rule that is left.
 * This also makes count_prefill with p = null behave exactly like count.
 */
function requirements(p: ParameterSet): Requirement[] {
  const req: Requirement[] = [];
  const both = (inputs: Requirement['input'][]): void => {
    for (const candidate of ['efficient', 'capable'] as const) for (const input of inputs) req.push({ candidate, input });
  };
  switch (p.variant) {
    case 'stage':
      break;
    case 'count':
      req.push({ candidate: 'efficient', input: 'R' });
      break;
    case 'count_prefill':
      if (p.thresholds.r !== null) req.push({ candidate: 'efficient', input: 'R' });
      if (p.thresholds.p !== null) req.push({ candidate: 'efficient', input: 'P' });
      break;
    case 'blind':
      both(['N', 'R', 'P']);
      break;
    case 'cache':
      both(['N', 'K', 'R', 'P']);
      break;
  }
  if (!req.some((r) => r.candidate === 'capable' && r.input === 'R')) req.push({ candidate: 'capable', input: 'R' });
  return req;
}

function observationOf(c: CandidateObservation, input: Requirement['input']): Observed<number> {
  switch (input) {
    case 'N':
      return c.promptTokens;
    case 'K':
      return c.reusablePrefixTokens;
    case 'R':
      return c.bookedRequests;
    case 'P':
      return c.prefillPressure;
  }
}

const SCOPE: Record<Requirement['input'], SuspicionScope | null> = { N: null, K: 'prefix', R: 'load', P: 'load' };

/** Range checks on values: the indexer's `ok` is not trusted blindly. */
function valueProblem(input: Requirement['input'], v: number): string | null {
  if (!Number.isFinite(v)) return `${input} = ${v} is not finite`;
  switch (input) {
    case 'N':
      return Number.isInteger(v) && v > 0 ? null : `N = ${v} must be a positive integer`;
    case 'K':
    case 'R':
      return Number.isInteger(v) && v >= 0 ? null : `${input} = ${v} must be a non-negative integer`;
    case 'P':
      return v >= 0 ? null : `P = ${v} must be non-negative`;
  }
}

function ageProblem(ageMs: number): string | null {
  return Number.isFinite(ageMs) && ageMs >= 0 ? null : `collection age ${ageMs} ms is not a non-negative finite time`;
}

type Check = { readonly reason: Reason; readonly detail: ReasonDetail } | null;

/** A check that stopped the rule on one candidate's input. */
function failed(reason: Reason, candidate: Role, input: InputName, message: string): Check {
  return { reason, detail: { candidate, input, message } };
}

function statusCheck<T>(o: Observed<T>, candidate: Role, input: InputName): Check {
  switch (o.status) {
    case 'missing':
      return failed('fallback_missing_observation', candidate, input, `${candidate} ${input} missing${o.cause ? `: ${o.cause}` : ''}`);
    case 'invalid':
      return failed('fallback_invalid_observation', candidate, input, `${candidate} ${input} invalid: ${o.cause}`);
    case 'stale':
      return failed('fallback_stale_observation', candidate, input, `${candidate} ${input} marked stale by the indexer${o.cause ? `: ${o.cause}` : ''}`);
    case 'ok': {
      const bad = ageProblem(o.ageMs);
      return bad === null ? null : failed('fallback_invalid_observation', candidate, input, `${candidate} ${input}: ${bad}`);
    }
  }
}

function ageCheck<T>(o: Observed<T>, candidate: Role, input: InputName, maxAgeMs: number): Check {
  if (o.status !== 'ok' || o.ageMs <= maxAgeMs) return null;
  return failed('fallback_stale_observation', candidate, input, `${candidate} ${input} collected ${o.ageMs} ms ago, more than ${maxAgeMs} ms`);
}

/** The value of an observation that passed `statusCheck`. */
function usableValue<T>(o: Observed<T>): T {
  if (o.status !== 'ok') throw new Error('usableValue called on an unusable observation');
  return o.value;
}

/**
 * Whatever value an observation carries, for recording predictions; stale
 * values are included because the record states their status anyway.
 */
function recordedValue(o: Observed<number>): number | undefined {
  return o.status === 'ok' || o.status === 'stale' ? o.value : undefined;
}

function predictionsFor(model: ModelParameters, c: CandidateObservation): CandidatePredictions {
  const n = recordedValue(c.promptTokens);
  const k = recordedValue(c.reusablePrefixTokens);
  const r = recordedValue(c.bookedRequests);
  const p = recordedValue(c.prefillPressure);
  const missing = (what: string): Prediction => ({ ok: false, problem: 'invalid', message: `${what} not observed` });
  if (n === undefined || r === undefined || p === undefined) {
    const absent = [n === undefined ? 'N' : '', r === undefined ? 'R' : '', p === undefined ? 'P' : ''].filter(Boolean).join(', ');
    return { blind: missing(absent), cache: missing(k === undefined ? `${absent}, K` : absent) };
  }
  return {
    blind: predictBlind(model, { n, k: 0, r, p }),
    cache: k === undefined ? missing('K') : predictCache(model, { n, k, r, p }),
  };
}

function advantage(e: Prediction | undefined, c: Prediction | undefined): number | null {
  return e?.ok === true && c?.ok === true ? e.ms - c.ms : null;
}

function observationOrNull(r: CandidateReport): CandidateObservation | null {
  return r.kind === 'observed' ? r.observation : null;
}

/**
 * Decide one request. Pure and synchronous: everything it reads is in `input`
 * and `params`, which the caller must have taken from `ParameterStore.current()`
 * once, at the start of handling the request.
 */
export function decide(input: DecisionInput, params: ParameterSet): Decision {
  const eff = observationOrNull(input.efficient);
  const cap = observationOrNull(input.capable);
  const predictions = {
    efficient: eff === null ? null : predictionsFor(params.models.efficient, eff),
    capable: cap === null ? null : predictionsFor(params.models.capable, cap),
  };
  const advantageMs = {
    blind: advantage(predictions.efficient?.blind, predictions.capable?.blind),
    cache: advantage(predictions.efficient?.cache, predictions.capable?.cache),
  };
  // Written member by member rather than spread from a shared base (`{ ...base, more }`): this runs on every route.
  const make = (choice: Role, reason: Reason, detail: ReasonDetail | null, couldAct: boolean, triggered: boolean): Decision => ({
    proposal: input.proposal,
    variant: params.variant,
    parameterSetVersion: params.version,
    predictions,
    advantageMs,
    choice,
    reason,
    detail,
    couldAct,
    triggered,
  });
  const keep = (reason: Reason, detail: ReasonDetail | null, couldAct = false): Decision => make(input.proposal, reason, detail, couldAct, false);

  // 1-2. Nothing to decide.
  if (input.proposal === 'capable') return keep('kept_capable_proposal', null);
  if (params.variant === 'stage') return keep('kept_stage_variant', null);

  // 3. Every experimental variant needs both candidates: the capable one for
  // the gate, the efficient one for the trigger.
  for (const [candidate, report] of [
    ['efficient', input.efficient],
    ['capable', input.capable],
  ] as const) {
    if (report.kind === 'unavailable') {
      return keep('fallback_indexer_unavailable', { candidate, message: `${candidate} indexer: ${report.cause}` });
    }
  }
  if (eff === null || cap === null) throw new Error('unreachable: reports checked above');

  // Observations must be about the models the parameters were fitted for.
  for (const [candidate, obs] of [
    ['efficient', eff],
    ['capable', cap],
  ] as const) {
    const expected = params.models[candidate].name;
    if (obs.model !== expected) {
      return keep('fallback_invalid_observation', {
        candidate,
        input: 'model',
        message: `${candidate} observation is for model "${obs.model}", parameters are for "${expected}"`,
      });
    }
  }

  const { gate } = params;

  // 4. Capable worker schedulable. No placement at all (an empty capable pool: nothing is
  // observed about a worker because there is none) is unschedulable, not a missing observation.
  if (cap.placement === null) {
    const cause = cap.schedulable.status === 'missing' || cap.schedulable.status === 'invalid' ? cap.schedulable.cause : undefined;
    return keep('fallback_capable_unschedulable', {
      candidate: 'capable',
      input: 'schedulable',
      message: `no capable worker was selected${cause === undefined ? '' : `: ${cause}`}`,
    });
  }
  const sched = statusCheck(cap.schedulable, 'capable', 'schedulable') ?? ageCheck(cap.schedulable, 'capable', 'schedulable', gate.maxAgeMs);
  if (sched !== null) return keep(sched.reason, sched.detail);
  if (!usableValue(cap.schedulable)) {
    return keep('fallback_capable_unschedulable', { candidate: 'capable', input: 'schedulable', message: 'the selected capable worker is not schedulable' });
  }

  // 5. Required observations valid (status, value range, index suspicion).
  const req = requirements(params);
  const obsOf = (r: Requirement): Observed<number> => observationOf(r.candidate === 'efficient' ? eff : cap, r.input);
  for (const r of req) {
    const o = obsOf(r);
    const bad = statusCheck(o, r.candidate, r.input);
    if (bad !== null) return keep(bad.reason, bad.detail);
    const range = valueProblem(r.input, usableValue(o));
    if (range !== null) return keep('fallback_invalid_observation', { candidate: r.candidate, input: r.input, message: `${r.candidate} ${range}` });
    // A suspect index is its own reason rather than "invalid": the value
    // itself looked fine, and operators need to see index health separately
    // from bad reports when reading fallback rates.
    const scope = SCOPE[r.input];
    const c = r.candidate === 'efficient' ? eff : cap;
    const suspicion = scope === null ? undefined : c.suspicions.find((s) => s.scope === scope);
    if (suspicion !== undefined) {
      return keep('fallback_suspect_index', {
        candidate: r.candidate,
        input: r.input,
        message: `${r.candidate} index suspect (${suspicion.scope}: ${suspicion.code}) for ${r.input}`,
      });
    }
  }

  // 6. Collection age.
  for (const r of req) {
    const old = ageCheck(obsOf(r), r.candidate, r.input, gate.maxAgeMs);
    if (old !== null) return keep(old.reason, old.detail);
  }

  // 7. Destination limit on the capable worker's booked requests.
  const capR = usableValue(cap.bookedRequests);
  if (!(capR < gate.destinationLimit)) {
    return keep('fallback_destination_limit', {
      candidate: 'capable',
      input: 'R',
      message: `capable worker has ${capR} booked requests, limit ${gate.destinationLimit}`,
    });
  }

  // 8. Local in-flight limit.
  const local = input.localCapableInFlight;
  if (!(Number.isFinite(local) && local >= 0 && local < gate.localLimit)) {
    return keep('fallback_local_limit', {
      candidate: 'capable',
      message: `local in-flight capable calls ${local}, limit ${gate.localLimit}`,
    });
  }

  // 9-10. Trigger.
  let triggered: boolean;
  switch (params.variant) {
    case 'count': {
      const { r } = params.thresholds;
      triggered = r !== null && usableValue(eff.bookedRequests) >= r;
      break;
    }
    case 'count_prefill': {
      const { r, p } = params.thresholds;
      triggered = (r !== null && usableValue(eff.bookedRequests) >= r) || (p !== null && usableValue(eff.prefillPressure) > p);
      break;
    }
    case 'blind':
    case 'cache': {
      const which = params.variant;
      const pe = predictions.efficient?.[which];
      const pc = predictions.capable?.[which];
      for (const [candidate, pr] of [
        ['efficient', pe],
        ['capable', pc],
      ] as const) {
        if (pr === undefined) throw new Error('unreachable: both candidates observed');
        if (!pr.ok) {
          return keep(pr.problem === 'out_of_range' ? 'fallback_prediction_out_of_range' : 'fallback_prediction_invalid', {
            candidate,
            message: `${candidate} ${which} prediction: ${pr.message}`,
          });
        }
      }
      const adv = advantageMs[which];
      if (adv === null) throw new Error('unreachable: both predictions succeeded');
      const margin = which === 'blind' ? params.margins.deltaBlindMs : params.margins.deltaCacheMs;
      triggered = adv > margin;
      break;
    }
  }

  if (!triggered) return keep('kept_no_trigger', null, true);
  return make('capable', 'overrode', null, true, true);
}
