export { startDecision, DECISION_VERSION, type DecisionHandle } from './service';
export { decisionConfigSchema, type DecisionConfig, type DecisionSettings, type DecisionSection } from './config';
export { Router, buildRecord, gateChecks, type RouterDeps } from './route';
export { InFlight, type InFlightEntry } from './inflight';
export { ParameterFile, type ReloadOutcome } from './params';
export { RecordPublisher, type PublisherOptions } from './publisher';
export { decodeObserveReply, toCandidateReport, toWireObservation, toRecordObservation, suspicionsOf, type ProbeResult, type ProbeTarget, type MapOptions } from './observe';
export { RECORD_REASON, RECORD_VARIANT, replyReason } from './vocabulary';
export { decisionMetrics, type DecisionMetrics } from './metrics';
