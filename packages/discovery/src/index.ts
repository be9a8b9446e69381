export type { DiscoveryChange, DiscoveryStore } from './store';
export { etcdDiscoveryStore } from './etcd';
export type { EtcdDiscoveryOptions, EtcdDiscoveryStore, EtcdStoreStats } from './etcd';
export { etcdKeyOf, etcdPrefixRange, logicalKeyOf } from './etcd-keys';
export type { EtcdKeyRejection, EtcdKeyResult } from './etcd-keys';
