export { PoolState, type PoolOptions, type PoolObservation, type WorkerObservation, type LoadReport, type Registration, type PoolCounters } from './pool';
