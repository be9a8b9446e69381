// @vantage/discovery: NVIDIA Dynamo's discovery store read as vantage needs it. See README.md.
export type { DiscoveryChange, DiscoveryStore } from './store';
export {
  parseDiscoveryEntry,
} from './entries';
export { fileDiscoveryStore, fileNameToKey } from './file-store';
export {
  DiscoveryView,
  type DiscoveredWorker,
  type DiscoveryEvent,
} from './view';
export { etcdDiscoveryStore } from './etcd';
export type { EtcdDiscoveryStore } from './etcd';
export { logicalKeyOf } from './etcd-keys';
