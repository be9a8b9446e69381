// The pool state lives in @vantage/observation so the offline replay runs the same code.
export { PoolState, type PoolOptions, type PoolObservation, type WorkerObservation, type LoadReport } from '@vantage/observation';
