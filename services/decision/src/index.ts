export { startDecision, type DecisionHandle } from './service';
export { decisionConfigSchema, type DecisionSettings } from './config';
export { buildRecord } from './route';
export { InFlight } from './inflight';
export { decodeObserveReply, toCandidateReport, toWireObservation, toRecordObservation, type ProbeResult, type ProbeTarget, type MapOptions } from './observe';
