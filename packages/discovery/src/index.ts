export type { DiscoveryChange, DiscoveryStore } from './store';
