/**
 * `fitAll`: every calibration step of seed 000 in order, from measurements
 * to a validated parameter set and the report that justifies it (the steps:
 * README). The thresholds are fitted parameters like the coefficients, so
 * they are searched on the fitting split; the selection split only compares
 * the fitted rules and chooses one threshold rule and one estimator (seed
 * 000: "Use separate measurements for fitting, estimating uncertainty and
 * selecting candidates"). Pure and synchronous; the same rows, options and
 * seed give the same result (createdAt aside, which does not enter the
 * version's hash).
 */
import {
  createParameterSet,
  DEFAULT_PARAMETER_SET,
  type GateLimits,
  type ModelParameters,
  type ParameterSet,
  type QTable,
  type Thresholds,
  type Variant,
} from '@vantage/rules';
import { fitEstimator, withCoefficients, type EstimatorFit } from './estimator-fit';
import { calibrateMargin, ESTIMATORS, MARGIN_QUANTILE, simulateEstimatorRule, type Estimator, type MarginFit } from './margins';
import { buildQTable, F_TOLERANCE, designGrid, type QCell } from './qtable';
import { DEFAULT_CV_FOLDS, DEFAULT_LAMBDAS, fitStandardization, type FeatureName } from './ridge';
import { compareStrings, pairRows, ROLES, validateCalibrationRows, type CalibrationRow, type Role, type RowProblem } from './rows';
import { applySplit, DEFAULT_FRACTIONS, fractionProblems, SPLIT_NAMES, splitConditions, type SplitFractions, type SplitName } from './splits';
import { countRuleChoice, searchThresholds, simulate, type RuleOutcome, type ThresholdSearch } from './thresholds';

export type FitVariant = Exclude<Variant, 'stage'>;
export const Q_SOURCES = ['qset', 'fitting', 'all'] as const;
export type QSource = (typeof Q_SOURCES)[number];
export const FIT_VARIANTS: readonly FitVariant[] = ['count', 'count_prefill', 'blind', 'cache'];

export interface FitOptions {
  /** Seed of the split and the CV folds. Default 1. */
  readonly seed?: number;
  readonly fractions?: SplitFractions;
  /** Rule variant of the parameter set. Default `cache`. */
  readonly variant?: FitVariant;
  /** Which no-contention measurements fill the Q tables (README, "Q tables"). Default `qset`. */
  readonly qSource?: QSource;
  /** Gate G (not fitted; fixed across variants). Default: the rules package's development gate. */
  readonly gate?: GateLimits;
  readonly createdAt?: Date | string;
  readonly onProgress?: (line: string) => void;
}

export interface ModelReport {
  readonly role: Role;
  readonly name: string;
  readonly rows: Readonly<Record<SplitName, number>>;
  readonly qTable: QTable;
  readonly qCells: readonly QCell[];
  readonly qMeasurements: number;
  readonly standardization: ModelParameters['standardization'];
  readonly constantFeatures: readonly FeatureName[];
  readonly estimators: Readonly<Record<Estimator, EstimatorFit>>;
}

/** A rule scored on the selection split; `rule` names it, e.g. `count r=3` or `cache delta=41.2`. */
export interface RuleComparison extends RuleOutcome {
  readonly rule: string;
}

/** One rule chosen on the selection split, with the score it was chosen by and the selection pairs it was scored on. */
export interface ChosenRule extends RuleComparison {
  readonly variant: FitVariant;
  readonly pairs: number;
}

export interface FitReport {
  readonly seed: number;
  readonly variant: FitVariant;
  /** Lambda grid, folds and f tolerance are the defaults; the rules reconsider efficient proposals only. */
  readonly options: {
    readonly fractions: SplitFractions;
    readonly lambdas: readonly number[];
    readonly cvFolds: number;
    readonly qSource: QSource;
    readonly fTolerance: number;
    readonly proposals: 'efficient';
    readonly gate: GateLimits;
    readonly marginQuantile: number;
  };
  /** `conditions`, `pairs` and `unpairedRows` count the contention conditions (the ones split); the Q set is counted apart. */
  readonly input: {
    readonly rows: number;
    readonly pairs: number;
    readonly unpairedRows: number;
    readonly conditions: number;
    readonly qSetConditions: number;
    readonly qSetRows: number;
  };
  readonly splits: Readonly<
    Record<SplitName, { readonly conditionIds: readonly string[]; readonly rows: number; readonly pairs: number }>
  >;
  readonly models: Readonly<Record<Role, ModelReport>>;
  /** Searched on the fitting split's pairs. */
  readonly thresholds: { readonly count: ThresholdSearch; readonly countPrefill: ThresholdSearch };
  readonly margins: Readonly<Record<Estimator, MarginFit>>;
  /** Mean selected TTFT on the selection split: Stage, the fitted rules, and the estimators at zero margin. */
  readonly selection: readonly RuleComparison[];
  /** The threshold rule and the estimator the selection split chooses (fitted thresholds and margins). */
  readonly chosen: { readonly thresholdRule: ChosenRule; readonly estimator: ChosenRule };
  readonly warnings: readonly string[];
  readonly parameterSetVersion: string;
}

export type FitResult =
  | { readonly ok: true; readonly parameterSet: ParameterSet; readonly report: FitReport }
  | { readonly ok: false; readonly errors: readonly string[]; readonly problems: readonly RowProblem[] };

function optionProblems(o: FitOptions): string[] {
  const out: string[] = [];
  if (o.seed !== undefined && !(Number.isSafeInteger(o.seed) && o.seed >= 0)) out.push(`seed ${o.seed} must be a non-negative integer`);
  if (o.fractions !== undefined) out.push(...fractionProblems(o.fractions));
  if (o.variant !== undefined && !FIT_VARIANTS.includes(o.variant)) out.push(`variant ${String(o.variant)} must be one of ${FIT_VARIANTS.join(', ')}`);
  if (o.qSource !== undefined && !Q_SOURCES.includes(o.qSource)) out.push(`qSource ${String(o.qSource)} must be one of ${Q_SOURCES.join(', ')}`);
  return out;
}

/**
 * Canonical order (condition, repeat, role, request id, line): every sum in
 * the fit then runs in the same order whatever order the file had, so the
 * same measurements give bit-identical numbers and the same version hash.
 */
function canonicalOrder(rows: readonly CalibrationRow[]): CalibrationRow[] {
  return [...rows].sort(
    (a, b) =>
      compareStrings(a.conditionId, b.conditionId) ||
      a.repeat - b.repeat ||
      compareStrings(a.role, b.role) ||
      compareStrings(a.requestId, b.requestId) ||
      a.line - b.line,
  );
}

export function fitAll(input: readonly CalibrationRow[], options: FitOptions = {}): FitResult {
  const rows = canonicalOrder(input);
  const fail = (errors: string[], problems: RowProblem[] = []): FitResult => ({ ok: false, errors, problems });
  const bad = optionProblems(options);
  if (bad.length > 0) return fail(bad);
  const seed = options.seed ?? 1;
  const fractions = options.fractions ?? DEFAULT_FRACTIONS;
  const variant = options.variant ?? 'cache';
  const qSource = options.qSource ?? 'qset';
  const gate = options.gate ?? DEFAULT_PARAMETER_SET.gate;
  const progress = options.onProgress ?? (() => {});
  const warnings: string[] = [];

  const problems = validateCalibrationRows(rows);
  if (problems.length > 0) return fail([`${problems.length} bad calibration row(s)`], problems);
  const names = {} as Record<Role, string>;
  for (const role of ROLES) {
    const r = rows.find((x) => x.role === role);
    if (r === undefined) return fail([`no ${role} measurements: both candidates must be measured`]);
    names[role] = r.model;
  }

  // The Q set apart; pairs and grouped splits of the contention conditions.
  const qSetRows = rows.filter((r) => r.qSet === true);
  const contention = rows.filter((r) => r.qSet !== true);
  const qSetConditions = new Set(qSetRows.map((r) => r.conditionId)).size;
  if (qSource === 'qset' && qSetRows.length === 0) {
    return fail(["no Q-set measurements (session ids cal:<condition>:<repeat>:qgrid): the Q tables come from the no-contention grid measured as its own set; for data without one, choose qSource 'fitting'"]);
  }
  if (qSource === 'fitting' && qSetRows.length > 0) warnings.push(`Q from the fitting split's no-contention rows: the ${qSetRows.length} Q-set measurements are not used`);
  if (qSource === 'all') warnings.push('Q from every no-contention row, uncertainty and selection splits included: margins and selection are optimistic');
  const { pairs, unpaired } = pairRows(contention);
  if (unpaired.length > 0) warnings.push(`${unpaired.length} measurement(s) without their other candidate: used for Q and regression, not for margins or thresholds`);
  const split = splitConditions(contention, fractions, seed);
  const rowSplits = applySplit(contention, split);
  const pairSplits = applySplit(pairs, split);
  const conditions = SPLIT_NAMES.reduce((n, s) => n + split[s].length, 0);
  progress(`Q set: ${qSetConditions} conditions, ${qSetRows.length} rows`);
  progress(`split ${conditions} contention conditions: ${SPLIT_NAMES.map((s) => `${s} ${split[s].length} (${rowSplits[s].length} rows, ${pairSplits[s].length} pairs)`).join(', ')}`);
  for (const s of SPLIT_NAMES) if (split[s].length === 0) return fail([`the ${s} split has no workload condition (${conditions} conditions in total)`]);

  // Per model: Q table, standardisation, both estimators.
  const models = {} as Record<Role, ModelReport>;
  const params = {} as Record<Role, ModelParameters>;
  const errors: string[] = [];
  for (const role of ROLES) {
    const name = names[role];
    const mine = Object.fromEntries(SPLIT_NAMES.map((s) => [s, rowSplits[s].filter((r) => r.role === role)])) as Record<SplitName, CalibrationRow[]>;
    const allQuiet = rows.filter((r) => r.role === role && r.noContention);
    const mineQ = qSetRows.filter((r) => r.role === role);
    const qRows = qSource === 'qset' ? mineQ.filter((r) => r.noContention) : qSource === 'all' ? allQuiet : mine.fitting.filter((r) => r.noContention);
    if (qSource === 'qset' && qRows.length < mineQ.length) {
      warnings.push(`${role} Q set: ${mineQ.length - qRows.length} measurement(s) saw booked requests (R > 0) at probe time and are left out of Q`);
    }
    const grid = designGrid(qSource === 'qset' ? qRows : allQuiet);
    const q = buildQTable(qRows, grid);
    if (!q.ok) {
      errors.push(...q.errors.map((e) => `${role} (${name}) Q from ${qSource} no-contention rows: ${e}`));
      continue;
    }
    const filled = q.cells.filter((c) => c.source !== 'measured').length;
    if (filled > 0) warnings.push(`${role} Q table: ${filled} of ${q.cells.length} cells interpolated (no ${qSource} measurement)`);
    progress(`${role} ${name}: Q table ${grid.nGrid.length} N x ${grid.fGrid.length} f from ${qRows.length} no-contention rows (${filled} cells interpolated)`);
    const std = fitStandardization(mine.fitting);
    warnings.push(...std.warnings.map((w) => `${role} standardisation ${w}`));
    const fits = {} as Record<Estimator, EstimatorFit>;
    for (const estimator of ESTIMATORS) {
      const f = fitEstimator({ estimator, name, qTable: q.table, standardization: std.standardization, constant: std.constant, rows: mine, seed });
      if (!f.ok) {
        errors.push(`${role} ${f.reason}`);
        continue;
      }
      fits[estimator] = f.value;
      const u = f.value.errors.uncertainty;
      progress(`${role} ${estimator}: lambda ${f.value.lambda} by ${f.value.cvFolds}-fold grouped CV on ${f.value.trainingRows} rows; uncertainty MAE ${u.maeMs.toFixed(1)} ms, RMSE ${u.rmseMs.toFixed(1)} ms (n ${u.n})`);
    }
    if (fits.blind === undefined || fits.cache === undefined) continue;
    params[role] = withCoefficients({ name, qTable: q.table, standardization: std.standardization }, fits.blind.coefficients, fits.cache.coefficients);
    models[role] = {
      role,
      name,
      rows: { fitting: mine.fitting.length, uncertainty: mine.uncertainty.length, selection: mine.selection.length },
      qTable: q.table,
      qCells: q.cells,
      qMeasurements: qRows.length,
      standardization: std.standardization,
      constantFeatures: std.constant,
      estimators: fits,
    };
  }
  if (errors.length > 0) return fail(errors);

  // Margins on the uncertainty split.
  const margins = {} as Record<Estimator, MarginFit>;
  for (const estimator of ESTIMATORS) {
    try {
      margins[estimator] = calibrateMargin(pairSplits.uncertainty, params, estimator);
    } catch (err) {
      errors.push(`${estimator} margin: ${err instanceof Error ? err.message : String(err)} (${pairSplits.uncertainty.length} uncertainty pairs)`);
      continue;
    }
    progress(`${estimator} margin: ${margins[estimator].marginMs.toFixed(1)} ms (p${MARGIN_QUANTILE * 100} of ${margins[estimator].perCondition.length} conditions' max advantage error)`);
  }
  if (errors.length > 0) return fail(errors);

  // Thresholds on the fitting split; the rule comparison and choice on the selection split.
  const fitPairs = pairSplits.fitting;
  if (fitPairs.length === 0) return fail(['the fitting split has no pair of measurements: thresholds cannot be searched']);
  const sel = pairSplits.selection;
  if (sel.length === 0) return fail(['the selection split has no pair of measurements: the rules cannot be compared']);
  const count = searchThresholds(fitPairs, 'count', gate.destinationLimit);
  const countPrefill = searchThresholds(fitPairs, 'count_prefill', gate.destinationLimit);
  progress(`thresholds on ${fitPairs.length} fitting pairs: count r=${String(count.best.r)}; count+prefill r=${String(countPrefill.best.r)} p=${String(countPrefill.best.p)}`);
  const score = (r: number | null, p: number | null): RuleOutcome => simulate(sel, (pair) => countRuleChoice(pair, r, p, gate.destinationLimit));
  const countSel = score(count.best.r, null);
  const countPrefillSel = score(countPrefill.best.r, countPrefill.best.p);
  const countRule = `count r=${String(count.best.r)}`;
  const countPrefillRule = `count_prefill r=${String(countPrefill.best.r)} p=${String(countPrefill.best.p)}`;
  const selection: RuleComparison[] = [
    { rule: 'stage', meanSelectedTtftMs: simulate(sel, (pair) => pair.proposal).meanSelectedTtftMs, overrides: 0 },
    { rule: countRule, ...countSel },
    { rule: countPrefillRule, ...countPrefillSel },
  ];
  const fittedEstimator = {} as Record<Estimator, ChosenRule>;
  for (const estimator of ESTIMATORS) {
    const delta = margins[estimator].marginMs;
    const fitted = { rule: `${estimator} delta=${delta.toFixed(1)}`, ...simulateEstimatorRule(sel, params, estimator, delta, gate.destinationLimit) };
    selection.push(fitted, { rule: `${estimator} delta=0`, ...simulateEstimatorRule(sel, params, estimator, 0, gate.destinationLimit) });
    fittedEstimator[estimator] = { variant: estimator, ...fitted, pairs: sel.length };
  }
  // Lower mean selected TTFT; ties (within 1e-9 relative) to fewer overrides, then to the simpler rule (listed first).
  const pick = (a: ChosenRule, b: ChosenRule): ChosenRule => {
    const tie = Math.abs(a.meanSelectedTtftMs - b.meanSelectedTtftMs) <= 1e-9 * Math.max(1, Math.abs(a.meanSelectedTtftMs));
    if (!tie) return b.meanSelectedTtftMs < a.meanSelectedTtftMs ? b : a;
    return b.overrides < a.overrides ? b : a;
  };
  const chosen = {
    thresholdRule: pick(
      { variant: 'count', rule: countRule, ...countSel, pairs: sel.length },
      { variant: 'count_prefill', rule: countPrefillRule, ...countPrefillSel, pairs: sel.length },
    ),
    estimator: pick(fittedEstimator.blind, fittedEstimator.cache),
  };
  progress(`selection on ${sel.length} pairs: chosen threshold rule ${chosen.thresholdRule.rule}, chosen estimator ${chosen.estimator.rule}`);

  // The parameter set.
  let thresholds: Thresholds = { r: countPrefill.best.r, p: countPrefill.best.p };
  if (variant === 'count') {
    if (count.best.r === null) return fail(['count: no request-count threshold beats Stage on the fitting split (the disabled term is best); use the Stage baseline']);
    thresholds = { r: count.best.r, p: null };
  }
  if (variant === 'count_prefill' && thresholds.r === null && thresholds.p === null) {
    return fail(['count_prefill: no threshold beats Stage on the fitting split (both terms disabled is best); use the Stage baseline']);
  }
  const created = createParameterSet({
    variant,
    models: params,
    thresholds,
    margins: { deltaBlindMs: margins.blind.marginMs, deltaCacheMs: margins.cache.marginMs },
    gate,
    provenance: {
      tool: '@vantage/fitting fitAll',
      seed,
      fractions,
      qSource,
      conditions: { fitting: split.fitting.length, uncertainty: split.uncertainty.length, selection: split.selection.length },
      rows: rows.length,
      pairs: pairs.length,
      lambdas: Object.fromEntries(ROLES.map((r) => [r, { blind: models[r].estimators.blind.lambda, cache: models[r].estimators.cache.lambda }])),
    },
    ...(options.createdAt === undefined ? {} : { createdAt: options.createdAt }),
  });
  if (!created.ok) return fail(created.errors.map((e) => `parameter set refused: ${e}`));
  progress(`parameter set ${created.value.version} (variant ${variant})`);

  const report: FitReport = {
    seed,
    variant,
    options: { fractions, lambdas: DEFAULT_LAMBDAS, cvFolds: DEFAULT_CV_FOLDS, qSource, fTolerance: F_TOLERANCE, proposals: 'efficient', gate, marginQuantile: MARGIN_QUANTILE },
    input: { rows: rows.length, pairs: pairs.length, unpairedRows: unpaired.length, conditions, qSetConditions, qSetRows: qSetRows.length },
    splits: Object.fromEntries(
      SPLIT_NAMES.map((s) => [s, { conditionIds: split[s], rows: rowSplits[s].length, pairs: pairSplits[s].length }]),
    ) as FitReport['splits'],
    models,
    thresholds: { count, countPrefill },
    margins,
    selection,
    chosen,
    warnings,
    parameterSetVersion: created.value.version,
  };
  return { ok: true, parameterSet: created.value, report };
}
