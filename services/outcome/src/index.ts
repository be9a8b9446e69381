/** @vantage/outcome: joins decisions with lifecycle events and writes them to Kafka exactly once. See README.md. */
export { outcomeConfigSchema, checkOutcomeConfig } from './config';
export type { OutcomeConfig, OutcomeConfigShape } from './config';
export { startOutcome } from './service';
export type { OutcomeService } from './service';
export { sendRequests, SEND_CHUNK_RECORDS } from './batch';
export type { Held } from './intake';
export { Joiner } from './joiner';
export { decodeLifecycle } from './lifecycle';
export { parseDelivery } from './delivery';
export { ReadPosition } from './readposition';
export { acceptProgress, CommittedSet, parseProgress, progressRecord } from './progress';
export type { ProgressRecord } from './progress';
export { toRanges, inRanges, mergeRanges } from './ranges';
export { outcomeMetrics } from './metrics';
