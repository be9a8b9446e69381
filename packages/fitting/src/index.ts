// @vantage/fitting: offline calibration of seed 000's rules from measured outcomes. See README.md.

export { OUTCOME_COLUMNS, parseOutcomeRows, calibrationSessionId, rowFromOutcomeJson, parseCalibrationJsonl, compareStrings } from './rows';
export type { RowParse, RowsParse, CalibrationRow } from './rows';

export { mean, quantileSorted } from './stats';

export { fitAll, FIT_VARIANTS, Q_SOURCES } from './fit';
export type { FitOptions, FitResult, FitReport } from './fit';

export { renderFitReportHtml } from './report-html';
export { escapeHtml, fmt, fmtG, intervalText, lineChartSvg, padded, page, svg, table, ticks, xTicks } from './html';
export { variantParameterSet } from './variants';
