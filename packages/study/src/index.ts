// @vantage/study: seed 000's study offline — the calibration plan, fitting, rules and analysis of the
// live job, on two simulated model pools behind the decision service's own decision path.
export { TwoPoolFleet, type FleetSpec, type ServedRequest } from './fleet';
export { runCalibrationOffline } from './calibrate';
export { runStudy, calibrateAndFit, fitFromRows, toJsonl, DEFAULT_FLEET, type StudyResult } from './study';
export { runLoadStudy, evaluateLoadPoint, renderLoadHtml, loadBackground, type LoadPointResult } from './load';
export { runLimitationStudy, limitationCases, type LimitationOptions } from './limitation';
