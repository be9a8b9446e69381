// @vantage/study: seed 000's study offline — the calibration plan, fitting, rules and analysis of the
// live job, on two simulated model pools behind the decision service's own decision path.
export { TwoPoolFleet, type PoolSpec, type FleetSpec, type FleetOptions, type RoutedRequest, type DirectRequest, type ServedRequest, type Callbacks } from './fleet';
export { runCalibrationOffline, type CalibrationOptions, type CalibrationResult } from './calibrate';
export { runStudy, calibrateAndFit, fitFromRows, toJsonl, DEFAULT_FLEET, type StudyOptions, type StudyResult } from './study';
export { runLoadStudy, evaluateLoadPoint, renderLoadHtml, loadBackground, type LoadPoint, type LoadOptions, type LoadPointResult, type LoadResult } from './load';
export { runLimitationStudy, limitationCases, type LimitationCase, type LimitationOptions, type LimitationCaseResult, type LimitationResult } from './limitation';
