// @vantage/evaluation: calibration plan, evaluation schedule, analysis and report. See README.md.

export {
  CALIBRATION_FACTORS,
  CALIBRATION_PRESETS,
  calibrationPlan,
  calibrationParameterSet,
} from './calibration-plan';
export type {
  Role,
  CalibrationRun,
  CalibrationCondition,
  CalibrationPreset,
  CalibrationPlan,
} from './calibration-plan';

export {
  stageProposal,
  evaluationSchedule,
  evaluationSessionId,
  evaluationBackgroundSessionId,
  parseEvaluationSessionId,
  parseProposalSpec,
} from './schedule';
export type {
  StageProposalModel,
  ScheduledRun,
  EvaluationSchedule,
} from './schedule';

export { EVALUATION_LABEL_COLUMNS, parseEvaluationRows } from './rows';

export { isPaired, bootstrapDifference } from './bootstrap';
export type { Unit } from './bootstrap';

export { analyzeEvaluation } from './analysis';
export type { Difference, DifferenceMetricId, EvaluationAnalysis, VariantSummary } from './analysis';

export { renderEvaluationHtml } from './report-html';

export { DEFAULT_BACKGROUND_TRAFFIC, backgroundTraffic, formatBackgroundSpec, parseBackgroundSpec } from './background';
export type { BackgroundTrafficSpec, BackgroundRequestPlan } from './background';

