/**
 * The fixed list of decision reasons. Every decision carries exactly one, so
 * the outcome records can be grouped without parsing free text: "how often
 * could the rule act, how often did it change the choice, how often and why
 * did it fall back to Stage" (seed 000, "How we would evaluate it").
 *
 * The order here is also the order in which the decision procedure checks
 * things (see `decide`), which is why the first problem found is the one
 * reported. The strings are a wire contract (decision records, metrics
 * labels): add new ones at the end of their group, never rename.
 */
export const REASONS = [
  // Stage's choice kept without evaluating a rule.
  'kept_capable_proposal',
  'kept_stage_variant',
  // Gate passed, trigger evaluated and false.
  'kept_no_trigger',
  // Gate passed, trigger evaluated and true: efficient changed to capable.
  'overrode',
  // Fallbacks: Stage's choice kept because the rule could not act safely.
  'fallback_indexer_unavailable',
  'fallback_capable_unschedulable',
  'fallback_missing_observation',
  'fallback_invalid_observation',
  'fallback_stale_observation',
  'fallback_suspect_index',
  'fallback_destination_limit',
  'fallback_local_limit',
  'fallback_prediction_out_of_range',
  'fallback_prediction_invalid',
] as const;

export type Reason = (typeof REASONS)[number];
