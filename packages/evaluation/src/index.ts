// @vantage/evaluation: the transport-free parts of seed 000's calibration and
// five-variant evaluation: the calibration plan (workload conditions, session
// ids `vantage fit` reads), the evaluation schedule (attempts, matched
// sessions, seeded variant order, Stage proposal model), the analysis of
// outcome rows with session-bootstrap intervals, and the HTML report.

export {
  ROLES,
  CALIBRATION_FACTORS,
  CALIBRATION_PRESETS,
  DEFAULT_COST_MODEL,
  WARMUP_SESSION_PREFIX,
  BACKGROUND_SESSION_PREFIX,
  calibrationPlan,
  calibrationParameterSet,
  estimateRunMs,
} from './calibration-plan';
export type {
  Role,
  CalibrationFactor,
  BackgroundLoadSpec,
  ProbeSpec,
  ProbeTiming,
  CalibrationRun,
  CalibrationCondition,
  PresetSpec,
  CalibrationPreset,
  CalibrationPlanOptions,
  CostModel,
  CalibrationPlan,
} from './calibration-plan';

export {
  EVALUATION_SESSION_PREFIX,
  EVALUATION_BACKGROUND_PREFIX,
  stageProposal,
  evaluationSchedule,
  evaluationSessionId,
  evaluationBackgroundSessionId,
  parseEvaluationSessionId,
  parseProposalSpec,
  formatProposalSpec,
} from './schedule';
export type {
  StageProposalModel,
  ProposalContext,
  EvaluationScheduleOptions,
  ScheduledSession,
  ScheduledRun,
  EvaluationSchedule,
  ParsedEvaluationSessionId,
} from './schedule';

export { EVALUATION_COLUMNS, EVALUATION_LABEL_COLUMNS, evaluationRowFromJson, parseEvaluationRows, parseEvaluationJsonl } from './rows';
export type { EvaluationRow, DecisionFacts, EvaluationRowParse, RowProblem, EvaluationParse } from './rows';

export { quantile, quantileSorted, isPaired, bootstrapDifference } from './bootstrap';
export type { BootstrapOptions, BootstrapResult, Unit } from './bootstrap';

export { DIFFERENCE_METRICS, RECORD_GAPS, analyzeEvaluation, distribution, ruleCounts } from './analysis';
export type { AnalysisOptions, Distribution, RuleCounts, VariantSummary, DifferenceMetricId, Difference, EvaluationAnalysis } from './analysis';

export { renderEvaluationHtml } from './report-html';

export { DEFAULT_BACKGROUND_TRAFFIC, backgroundTraffic, formatBackgroundSpec, parseBackgroundSpec } from './background';
export type { BackgroundTrafficSpec, BackgroundRequestPlan } from './background';

export { hash32, streamFor } from './random';
export type { Rand } from './random';
