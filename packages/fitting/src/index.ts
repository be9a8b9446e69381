// @vantage/fitting: offline calibration of seed 000's rules from measured
// outcomes: Q tables, standardisation, ridge load corrections, count
// thresholds and estimator margins, written as a @vantage/rules parameter
// set with a report. Pure and synchronous; no transport.

export {
  ROLES,
  OUTCOME_COLUMNS,
  CALIBRATION_COLUMNS,
  CALIBRATION_SESSION_PREFIX,
  calibrationSessionId,
  rowFromOutcomeJson,
  parseCalibrationJsonl,
  validateCalibrationRows,
  pairRows,
} from './rows';
export type { Role, CalibrationRow, CalibrationPair, RowProblem, RowParse, RowSkipReason, ParseResult, Pairing } from './rows';

export { SPLIT_NAMES, DEFAULT_FRACTIONS, splitConditions, applySplit, findSplitLeaks, allocate, fractionProblems, conditionStrata } from './splits';
export type { SplitName, SplitFractions, ConditionSplit, SplitLeak } from './splits';

export { buildQTable, designGrid, cachedFraction, DEFAULT_F_TOLERANCE } from './qtable';
export type { QMeasurement, QBuildOptions, QBuild, QCell, CellSource } from './qtable';

export { fitStandardization, ridgeSolve, crossValidateRidge, groupFolds, DEFAULT_LAMBDAS, DEFAULT_CV_FOLDS } from './ridge';
export type { FeatureRow, FeatureName, StandardizationFit, RidgeResult, CvPoint, CvResult } from './ridge';

export { solveLinear } from './linalg';
export { mean, median, populationSd, percentileNearestRank, summarizeErrors } from './stats';
export type { ErrorSummary } from './stats';

export { buildDesign, fitEstimator } from './estimator-fit';
export type { Coefficients, EstimatorFit, ResidualPoint, EstimatorFitInput } from './estimator-fit';

export { searchThresholds, countRuleChoice, observedBoundaries, rankCandidates, simulate } from './thresholds';
export type { ThresholdMode, ThresholdCandidate, ThresholdSearch, RuleOutcome } from './thresholds';

export {
  ESTIMATORS,
  MARGIN_QUANTILE,
  predictRow,
  predictedAdvantage,
  marginFromErrors,
  calibrateMargin,
  estimatorRuleChoice,
  simulateEstimatorRule,
} from './margins';
export type { Estimator, EstimatorModels, AdvantageError, ConditionError, MarginFit } from './margins';

export { fitAll, FIT_VARIANTS, Q_SOURCES } from './fit';
export type { FitOptions, FitResult, FitReport, FitVariant, ModelReport, QSource, RuleComparison } from './fit';

export { renderFitReportHtml } from './report-html';
export { DISABLED_R, selectedThresholds, variantParameterSet } from './variants';
export type { VariantSetResult } from './variants';
