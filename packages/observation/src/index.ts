export {
  PoolState,
  type PoolObservation,
  type ForwardPassReport,
  type PoolLimits,
  type PoolLimitName,
} from './pool';
