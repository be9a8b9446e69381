// The decision path without transport, shared by the decision service and the offline study.
export {
  decodeObserveReply,
  suspicionsOf,
  toCandidateReport,
  toRecordObservation,
  plus,
  round3,
  r3,
  type Mutable,
  type MapOptions,
  type ProbeResult,
  type ProbeTarget,
} from './probe';
export { probeRoles, decideRoute, gateChecks, buildDecisionRecord, type RouteDecisionInput, type DecisionRecordInput } from './record';
export { RECORD_REASON, RECORD_VARIANT, replyReason } from './vocabulary';
export { observeReplyOf, dynamoChoiceOf, choiceOf, policyName, type ReplyMeta } from './observe-reply';
