/** @vantage/outcome: joins decisions with lifecycle events and writes them to Kafka exactly once. See README.md. */
export { outcomeConfigSchema, checkOutcomeConfig } from './config';
export type { OutcomeConfig, OutcomeConfigShape } from './config';
export { startOutcome, sendRequests, SEND_CHUNK_RECORDS } from './service';
export type { OutcomeService, OutcomeContext, Held } from './service';
export { Joiner } from './joiner';
export type { ClosedJoin, JoinerOptions, Source, AddResult } from './joiner';
export { decodeLifecycle } from './lifecycle';
export { parseDelivery } from './delivery';
export type { Delivery } from './delivery';
export { ReadPosition } from './readposition';
export type { DecodedLifecycle, LifecycleDecode, LifecycleRejectionCode } from './lifecycle';
export { deadLetterMessage, DLQ_HEADERS } from './deadletter';
export type { DeadLetterReason } from './deadletter';
export { acceptProgress, CommittedSet, parseProgress, progressRecord } from './progress';
export type { ProgressRecord } from './progress';
export { toRanges, inRanges, mergeRanges } from './ranges';
export { outcomeMetrics } from './metrics';
export type { OutcomeMetrics } from './metrics';
