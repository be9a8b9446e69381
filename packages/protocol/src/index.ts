export {
  SUBJECT_PREFIX,
  ROUTE_SUBJECT,
  POOL_NAME_PATTERN,
  isValidPoolName,
  observeSubject,
  bookingsSubject,
  lifecycleSubject,
  workersSubject,
} from './subjects';
export { ID_MAX_LENGTH, isValidId } from './ids';
export {
  observeRequestCodec,
  observeReplyCodec,
  routeRequestCodec,
  routeReplyCodec,
  bookingEventCodec,
  lifecycleEventCodec,
  workerRegistrationCodec,
  candidateObservation,
  NO_WORKER_FACTS,
  type ProtocolErrorCode,
  type DecodeResult,
  type MessageCodec,
} from './codec';
export { encodeObserveRequestBinary, isObserveRequestBinary } from './observe-request-binary';
export { PROTOCOL_SCHEMAS } from './schemas';
export { encodeObserveReplyBinary, isObserveReplyBinary } from './observe-binary';
export {
  type BookingEvent,
  type CandidateObservation,
  type ForwardPassObservation,
  type LifecycleEvent,
  type LifecycleKind,
  type ModelRole,
  type ObserveReply,
  type ObserveRequest,
  type Predictions,
  type PromptSpec,
  type ReportedLoad,
  type RouteCandidate,
  type RouteReply,
  type RouteRequest,
  type Usage,
  type WorkerObservation,
  type WorkerRegistration,
} from './messages';
