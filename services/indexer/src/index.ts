export { startIndexer, handleObserve, INDEXER_VERSION, type IndexerHandle } from './service';
export { indexerConfigSchema, type IndexerConfig, type PoolConfig } from './config';
export { WriterQueue } from './queue';
export { encodeSnapshot, decodeSnapshot, SNAPSHOT_VERSION } from './snapshot';
export { OBSERVE_STEPS_CHANNEL, type ObserveSteps } from './diagnostics';
