// @vantage/rules: the destination gate G, the five rule variants, the TTFT
// estimators and the parameter sets that freeze them (seed 000). Pure and
// synchronous; services adapt indexer answers into `DecisionInput`.

export { REASONS, FALLBACK_REASONS, isReason, isFallbackReason } from './reasons';
export type { Reason, FallbackReason } from './reasons';

export { observed } from './observations';
export type {
  Observed,
  ObservedStatus,
  IndexSuspicion,
  SuspicionScope,
  Placement,
  CandidateObservation,
  CandidateDiagnostics,
  CandidateReport,
  Role,
  InputName,
  DecisionInput,
} from './observations';

export { standardize, lookupQ, predictBlind, predictCache } from './estimators';
export type {
  QTable,
  FeatureScale,
  Standardization,
  BlindCoefficients,
  CacheCoefficients,
  ModelParameters,
  EstimatorInputs,
  LookupResult,
  Prediction,
  PredictionProblem,
} from './estimators';

export {
  VARIANTS,
  PARAMETER_SET_SCHEMA,
  PARAMETER_SET_SCHEMA_VERSION,
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
  Margins,
  GateLimits,
  ParameterSet,
  ParameterSetResult,
  FittedParameters,
  ReplaceResult,
} from './parameter-set';

export { decide } from './decide';
export type { Decision, ReasonDetail, CandidatePredictions } from './decide';
