export { startIndexer, handleObserve, INDEXER_VERSION, type IndexerHandle } from './service';
export { indexerConfigSchema, type IndexerConfig, type PoolConfig } from './config';
export { OBSERVE_STEPS_CHANNEL, type ObserveSteps } from './diagnostics';
