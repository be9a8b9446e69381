export {
  PoolState,
  ROW_FIELDS,
  type ObserveRows,
  type RowSink,
  type PoolOptions,
  type PoolObservation,
  type WorkerObservation,
  type LoadReport,
  type Registration,
  type PoolCounters,
  type PoolLimits,
  type PoolLimitName,
} from './pool';
