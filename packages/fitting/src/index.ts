// @vantage/fitting: offline calibration of seed 000's rules from measured outcomes. See README.md.

export {
  OUTCOME_COLUMNS,
  CALIBRATION_COLUMNS,
  parseOutcomeRows,
  calibrationSessionId,
  rowFromOutcomeJson,
  parseCalibrationJsonl,
  validateCalibrationRows,
  pairRows,
  compareStrings,
} from './rows';
export type { Role, RowParse, RowsParse, CalibrationRow, CalibrationPair } from './rows';

export { SPLIT_NAMES, splitConditions, applySplit, allocate } from './splits';

export { buildQTable } from './qtable';
export type { QMeasurement } from './qtable';

export { fitStandardization, ridgeSolve, crossValidateRidge, groupFolds } from './ridge';

export { solveLinear } from './linalg';
export { mean, percentileNearestRank, quantileSorted } from './stats';

export { searchThresholds, countRuleChoice, rankCandidates } from './thresholds';

export {
  calibrateMargin,
  estimatorRuleChoice,
} from './margins';

export { fitAll, FIT_VARIANTS, Q_SOURCES } from './fit';
export type { FitOptions, FitResult, FitReport } from './fit';

export { renderFitReportHtml } from './report-html';
export { escapeHtml, fmt, fmtG, padded, page, svg, table, xTicks } from './html';
export { DISABLED_R, variantParameterSet } from './variants';
