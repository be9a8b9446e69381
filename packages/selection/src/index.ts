// The seeded generator every policy takes lives in @vantage/random; named here too for callers of the policies.
export type { Rng } from '@vantage/random';
export { seededRng, seed32, randomInt } from '@vantage/random';
export type {
  SelectionRequest,
  CandidateInput,
  CandidateScore,
  ChosenWorker,
  ScoreSense,
  SelectionReason,
  SelectionResult,
} from './types';
export type { CandidateRecord, KvRouterPolicy, KvRouterOverlapWeightPolicy, KvRouterPrefillScalePolicy } from './kv-router';
export {
  KV_ROUTER_DEFAULTS,
  KvRouterRows,
  SelectionScratch,
  candidateRecord,
  overlapWeightCost,
  prefillScaleCost,
  softmaxProbabilities,
  selectKvRouter,
  selectKvRouterRows,
} from './kv-router';
export type { LlmdPolicy } from './llmd';
export { LLMD_DEFAULTS, selectLlmd } from './llmd';
export type { SelectionPolicy, RoundRobinPolicy, RandomPolicy } from './select';
export { selectWorker, roundRobinPolicy } from './select';
export { requestBlocksOf } from './util';
