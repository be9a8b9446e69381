/**
 * @vantage/wire: decoders and encoders for the messages Dynamo publishes that
 * vantage consumes (event-plane envelope, RouterEvent in msgpack and legacy
 * JSON, ActiveLoad, ActiveSequenceEvent), and Dynamo's subject names.
 */
export {
  WIRE_ERROR_CODES,
  type WireErrorCode,
  type Result,
  type Rejection,
} from './result';
export { DEFAULT_WIRE_LIMITS, resolveLimits, type WireLimits, type DecodeOptions } from './limits';
export type { EventEnvelope } from './envelope';
export type { ForwardPassMetrics, ForwardPassRequests } from './forward-pass';
export { JsonFloat } from './values';
export {
  ROUTER_EVENT_GENERATIONS,
  CURRENT_ROUTER_EVENT_GENERATION,
  type RouterEventGeneration,
} from './router-event';
export {
  ACTIVE_LOAD_GENERATIONS,
  SCHEDULER_LOAD_SCOPES,
  type ActiveLoad,
  type ActiveLoadGeneration,
  type SchedulerLoadScope,
} from './active-load';
export {
  ACTIVE_SEQUENCE_GENERATIONS,
  type ActiveSequenceEvent,
  type ActiveSequenceEventData,
  type ActiveSequenceGeneration,
  type PrefillLoadHint,
  type WireDuration,
} from './active-sequence';
export {
  decodeEnvelope,
  encodeEnvelope,
  decodeRouterEventMsgpack,
  decodeRouterEventsMsgpack,
  encodeRouterEventBatchMsgpack,
  decodeForwardPassMetrics,
  encodeForwardPassMetrics,
  decodeJsonExact,
  decodeRouterEventJson,
  encodeRouterEventMsgpack,
  encodeRouterEventJson,
  decodeActiveLoad,
  encodeActiveLoad,
  decodeActiveSequenceEvent,
  decodeActiveSequenceEvents,
  encodeActiveSequenceEvent,
  encodeActiveSequenceBatch,
  decodeEventPlaneMessage,
  encodeEventPlaneMessage,
  sniffMessage,
  type PayloadFormat,
  type PayloadDecodeOptions,
  type RouterEventEncodeOptions,
  type ActiveLoadEncodeOptions,
  type ActiveSequenceEncodeOptions,
  type EventPlanePayload,
  type EventPlaneMessage,
  type EventPlaneDecodeOptions,
  type EnvelopeHeader,
  type EventPlaneEncodeOptions,
  type SniffedKind,
} from './codec';
export {
  TOPIC_KV_EVENTS,
  TOPIC_KV_METRICS,
  TOPIC_ACTIVE_SEQUENCES,
  TOPIC_FORWARD_PASS_METRICS,
  endpointSubjectPrefix,
  prefixedSubject,
  LEGACY_TOPIC_KV_EVENTS,
  encodeSubjectSegment,
  decodeSubjectSegment,
  eventPlaneSubject,
  kvEventsSubject,
  kvMetricsSubject,
  activeSequencesSubject,
  legacyKvEventsSubject,
  jetStreamKvStreamName,
  jetStreamKvSubject,
  parseSubject,
  type SubjectScope,
  type ParsedSubject,
} from './subjects';
