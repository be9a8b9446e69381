export {
  PoolState,
  ROW_FIELDS,
  type ObserveRows,
  type RowSink,
  type PoolOptions,
  type PoolObservation,
  type WorkerObservation,
  type LoadReport,
  type ForwardPassReport,
  type Registration,
  type PoolCounters,
} from './pool';
