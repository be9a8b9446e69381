import type { KvRouterPolicy, SelectionScratch } from './kv-router';
import { selectKvRouter } from './kv-router';
import type { LlmdPolicy } from './llmd';
import { selectLlmd } from './llmd';
import type { Rng } from '@vantage/random';
import { randomInt } from '@vantage/random';
import type { CandidateInput, SelectionRequest, SelectionResult } from './types';
import { candidateOrder, validateRequest } from './util';

/**
 * Round robin needs a cursor that outlives one call; it lives in the policy
 * value the caller keeps (one per pool), so selection itself stays a
 * function of its arguments.
 */
export interface RoundRobinPolicy {
  readonly kind: 'round_robin';
  readonly state: { next: number };
}

export interface RandomPolicy {
  readonly kind: 'random';
}

export type SelectionPolicy = KvRouterPolicy | LlmdPolicy | RoundRobinPolicy | RandomPolicy;

export function roundRobinPolicy(): RoundRobinPolicy {
  return { kind: 'round_robin', state: { next: 0 } };
}

/**
 * Choose a worker for `request` among `candidates` under `policy`.
 * Every candidate's score and inputs come back with the choice, so the caller
 * can report what each policy would have done, not only its winner.
 * `rng` is consumed only for sampling and tie-breaks. `scratch`: see `selectKvRouter` (only the
 * kv_router policy uses it; the others answer as without it).
 */
export function selectWorker(
  policy: SelectionPolicy,
  request: SelectionRequest,
  candidates: readonly CandidateInput[],
  rng: Rng,
  scratch?: SelectionScratch,
): SelectionResult {
  switch (policy.kind) {
    case 'kv_router':
      return selectKvRouter(policy, request, candidates, rng, scratch);
    case 'llmd':
      return selectLlmd(policy, request, candidates, rng);
    case 'round_robin':
    case 'random': {
      validateRequest(request);
      if (candidates.length === 0) return { chosen: null, sense: 'lower-is-better', scores: [], reason: 'no_candidates' };
      const order = candidateOrder(candidates);
      let k: number;
      if (policy.kind === 'round_robin') {
        k = policy.state.next % order.length;
        policy.state.next = (k + 1) % order.length;
      } else k = randomInt(rng, order.length);
      const i = order[k]!;
      const c = candidates[i]!;
      const scores = candidates.map((x) => ({ workerId: x.workerId, dpRank: x.dpRank, score: NaN, terms: {}, eligible: true, input: x }));
      return { chosen: { workerId: c.workerId, dpRank: c.dpRank, index: i }, sense: 'lower-is-better', scores, reason: policy.kind };
    }
  }
}
