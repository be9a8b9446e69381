// @vantage/rules: the destination gate G, the five rule variants, the TTFT
// estimators and the parameter sets that freeze them (seed 000). Pure and
// synchronous; services adapt indexer answers into `DecisionInput`.

export { REASONS } from './reasons';
export type { Reason } from './reasons';

export { observed } from './observations';
export type {
  Observed,
  IndexSuspicion,
  CandidateObservation,
  CandidateReport,
  Role,
  DecisionInput,
} from './observations';

export { standardize, lookupQ, predictBlind, predictCache } from './estimators';
export type {
  QTable,
  FeatureScale,
  Standardization,
  ModelParameters,
  Prediction,
} from './estimators';

export {
  VARIANTS,
  DEFAULT_PARAMETER_SET,
  loadParameterSet,
  validateParameterSet,
  createParameterSet,
  serializeParameterSet,
  ParameterStore,
} from './parameter-set';
export type {
  Variant,
  Thresholds,
  GateLimits,
  ParameterSet,
  FittedParameters,
} from './parameter-set';

export { decide } from './decide';
export type { Decision } from './decide';
