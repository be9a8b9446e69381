// The decision path without transport, shared by the decision service and the offline study.
export {
  decodeObserveReply,
  toCandidateReport,
  toRecordObservation,
  plus,
  round3,
  r3,
  type MapOptions,
  type ProbeResult,
  type ProbeTarget,
} from './probe';
export { probeRoles, decideRoute, buildDecisionRecord } from './record';
export { RECORD_REASON, RECORD_VARIANT, replyReason } from './vocabulary';
export { observeReplyOf } from './observe-reply';
