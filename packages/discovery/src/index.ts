/**
 * @vantage/discovery: NVIDIA Dynamo's discovery store read as vantage needs it. Backends speak
 * `DiscoveryStore` (key puts and deletes); `parseDiscoveryEntry` turns one entry into a typed value;
 * `DiscoveryView` keeps one endpoint's workers, subject prefixes and publisher ids current.
 */
export type { DiscoveryChange, DiscoveryStore } from './store';
export {
  DISCOVERY_PREFIX,
  parseDiscoveryEntry,
  type CardCapacity,
  type DiscoveryEntry,
  type DiscoveryRejectCode,
  type EndpointScope,
  type EventChannelEntry,
  type EventSourceEntry,
  type InstanceEntry,
  type ModelCardEntry,
  type OtherEntry,
  type ParseResult,
  type RecoveryTarget,
} from './entries';
export { fileDiscoveryStore, fileNameToKey, keyToFilePath, type FileStoreOptions } from './file-store';
export {
  DiscoveryView,
  type DiscoveredWorker,
  type DiscoveryCounters,
  type DiscoveryEvent,
  type DiscoveryViewOptions,
  type PublisherInfo,
} from './view';
export { etcdDiscoveryStore } from './etcd';
export type { EtcdDiscoveryOptions, EtcdDiscoveryStore, EtcdStoreStats } from './etcd';
export { etcdKeyOf, etcdPrefixRange, logicalKeyOf } from './etcd-keys';
export type { EtcdKeyRejection, EtcdKeyResult } from './etcd-keys';
