// The seeded generator every policy takes lives in @vantage/random; named here too for callers of the policies.
export type { Rng } from '@vantage/random';
export { seededRng, seed32 } from '@vantage/random';
export type {
  CandidateInput,
  SelectionResult,
} from './types';
export type { CandidateRecord, KvRouterPolicy } from './kv-router';
export {
  SelectionScratch,
  candidateRecord,
  softmaxProbabilities,
} from './kv-router';
export type { LlmdPolicy } from './llmd';
export { selectLlmd } from './llmd';
export type { SelectionPolicy, RoundRobinPolicy } from './select';
export { selectWorker, roundRobinPolicy } from './select';
