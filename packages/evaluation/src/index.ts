// @vantage/evaluation: calibration plan, evaluation schedule, analysis and report. See README.md.

export {
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
  parseProposalSpec,
} from './schedule';
export type {
  StageProposalModel,
  ScheduledRun,
  EvaluationSchedule,
} from './schedule';

export { parseEvaluationRows } from './rows';

export { analyzeEvaluation } from './analysis';
export type { Difference, DifferenceMetricId, EvaluationAnalysis, VariantSummary } from './analysis';

export { renderEvaluationHtml } from './report-html';

export { DEFAULT_BACKGROUND_TRAFFIC, backgroundTraffic, formatBackgroundSpec, parseBackgroundSpec } from './background';
export type { BackgroundTrafficSpec, BackgroundRequestPlan } from './background';

