export { startIndexer, type IndexerHandle } from './service';
export { indexerConfigSchema } from './config';
export { OBSERVE_STEPS_CHANNEL, type ObserveSteps } from './diagnostics';
