/**
 * The three vocabularies that name a variant and a reason: the rules' own
 * (`@vantage/rules`, parameter sets, metric labels, the reply's `fallback`),
 * and the decision record's documented strings (`@vantage/records` README).
 * The record keeps the rules' exact reason in `detail` so nothing is lost by
 * the coarser record vocabulary.
 */
import type { DecisionReason, Variant as RecordVariant } from '@vantage/records';
import type { Reason, Variant } from '@vantage/rules';

export const RECORD_VARIANT: Readonly<Record<Variant, RecordVariant>> = {
  stage: 'baseline',
  count: 'request_count',
  count_prefill: 'count_prefill',
  blind: 'cache_blind',
  cache: 'cache_aware',
};

export const RECORD_REASON: Readonly<Record<Reason, DecisionReason>> = {
  kept_capable_proposal: 'stage_capable',
  kept_stage_variant: 'baseline',
  kept_no_trigger: 'kept',
  overrode: 'overrode',
  fallback_indexer_unavailable: 'fallback_observe_failed',
  fallback_capable_unschedulable: 'fallback_destination_unschedulable',
  fallback_missing_observation: 'fallback_observations_invalid',
  fallback_invalid_observation: 'fallback_observations_invalid',
  fallback_stale_observation: 'fallback_observations_stale',
  fallback_suspect_index: 'fallback_observations_invalid',
  fallback_destination_limit: 'fallback_destination_limit',
  fallback_local_limit: 'fallback_local_limit',
  fallback_prediction_out_of_range: 'fallback_prediction_invalid',
  fallback_prediction_invalid: 'fallback_prediction_invalid',
};

/** The route reply's coarse reason. */
export function replyReason(r: Reason): 'kept' | 'overrode' | 'fallback' {
  return r === 'overrode' ? 'overrode' : r.startsWith('fallback_') ? 'fallback' : 'kept';
}
