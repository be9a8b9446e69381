// @vantage/wire: Dynamo's messages and subject names. See README.md.
export {
  WIRE_ERROR_CODES,
  type WireErrorCode,
  type Result,
} from './result';
export type { ForwardPassMetrics } from './forward-pass';
export { JsonFloat } from './values';
export type { ActiveLoad } from './active-load';
export type { ActiveSequenceEvent } from './active-sequence';
export {
  decodeEnvelope,
  encodeEnvelope,
  decodeRouterEventMsgpack,
  decodeRouterEventsMsgpack,
  decodeForwardPassMetrics,
  decodeJsonExact,
  decodeRouterEventJson,
  encodeRouterEventMsgpack,
  decodeActiveLoad,
  encodeActiveLoad,
  decodeActiveSequenceEvents,
  decodeEventPlaneMessage,
  encodeEventPlaneMessage,
  sniffMessage,
} from './codec';
export {
  TOPIC_KV_EVENTS,
  TOPIC_KV_METRICS,
  TOPIC_ACTIVE_SEQUENCES,
  TOPIC_FORWARD_PASS_METRICS,
  endpointSubjectPrefix,
  prefixedSubject,
  encodeSubjectSegment,
  decodeSubjectSegment,
  eventPlaneSubject,
  kvEventsSubject,
  kvMetricsSubject,
  activeSequencesSubject,
  legacyKvEventsSubject,
  jetStreamKvStreamName,
  jetStreamKvSubject,
} from './subjects';
export {
  encodeTcpRequest,
  encodeTwoPart,
  FrameReader,
  encodeRequestControl,
  decodeStreamHandshake,
  decodeStreamPrologue,
  isStreamSentinel,
  encodeWorkerKvQueryRequest,
  decodeWorkerKvQueryStreamItem,
  type TwoPartMessage,
  type WorkerKvQueryResponse,
} from './request-plane';
