export {
  PoolState,
  type PoolObservation,
  type PoolLimits,
  type PoolLimitName,
} from './pool';
