export {
  PoolState,
  type ObserveRows,
  type RowSink,
  type PoolObservation,
  type ForwardPassReport,
  type PoolLimits,
  type PoolLimitName,
} from './pool';
