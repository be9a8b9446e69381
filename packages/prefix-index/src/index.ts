/**
 * @vantage/prefix-index: per-pool index of which (worker, dp rank) holds which KV blocks on which
 * storage tier, with Dynamo's radix-tree semantics, loss detection, match and exact snapshots.
 */
export { PrefixIndex } from './prefix-index';
export { SnapshotError } from './snapshot-io';
export type { ApplyResult, RecoverResult, MatchResult, SuspectInfo, WorkerMatch } from './types';
