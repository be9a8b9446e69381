/**
 * The whole study offline, each phase the code the live job runs (README "What it owns", `runStudy`);
 * only the fleet and the brokers are replaced by the discrete-event simulator.
 */
import { RECORD_VARIANT } from '@vantage/decision-core';
import {
  analyzeEvaluation,
  calibrationPlan,
  DEFAULT_BACKGROUND_TRAFFIC,
  evaluationSchedule,
  renderEvaluationHtml,
  type BackgroundTrafficSpec,
  type CalibrationPreset,
  type EvaluationAnalysis,
  type EvaluationSchedule,
  type StageProposalModel,
} from '@vantage/evaluation';
import { fitAll, parseCalibrationJsonl, renderFitReportHtml, variantParameterSet, type FitReport } from '@vantage/fitting';
import type { JsonRow, Variant as RecordVariant } from '@vantage/records';
import { DEFAULT_PARAMETER_SET, VARIANTS, type ParameterSet, type Variant } from '@vantage/rules';
import { polynomialTiming, scaledTiming } from '@vantage/sim';
import { runCalibrationOffline } from './calibrate';
import { runEvaluationOffline } from './evaluate';
import type { FleetSpec } from './fleet';

/**
 * The default two-pool fleet: an efficient pool of 4 workers at the mocker's speed with 64-token
 * blocks, and a capable pool of 4 workers at 0.6 of that speed (the live fleet's default) with
 * 32-token blocks and twice the blocks (the same KV capacity in tokens).
 */
export const DEFAULT_FLEET: FleetSpec = Object.freeze({
  efficient: { name: 'efficient', workers: 4, blockSize: 64, timing: polynomialTiming },
  capable: { name: 'capable', workers: 4, blockSize: 32, timing: scaledTiming(polynomialTiming, 0.6), numGpuBlocks: 32_768 },
});

interface StudyOptions {
  readonly fleet?: FleetSpec;
  readonly preset?: CalibrationPreset;
  readonly calibrationSeed?: number;
  readonly destinationLimit?: number;
  readonly attempts?: number;
  readonly sessions?: number;
  readonly scheduleSeed?: number;
  readonly proposal?: StageProposalModel;
  readonly background?: BackgroundTrafficSpec | null;
  readonly maxContextTokens?: number;
  readonly bootstrap?: number;
  readonly onProgress?: (line: string) => void;
}

export interface StudyResult {
  readonly calibrationRows: readonly JsonRow[];
  readonly fit: { readonly report: FitReport; readonly parameterSet: ParameterSet; readonly variants: Readonly<Record<Variant, ParameterSet>> };
  readonly schedule: EvaluationSchedule;
  readonly evaluationRows: readonly JsonRow[];
  readonly analysis: EvaluationAnalysis;
  readonly fitHtml: string;
  readonly reportHtml: string;
  readonly phasesMs: Readonly<Record<string, number>>;
}

export function toJsonl(rows: readonly JsonRow[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length > 0 ? '\n' : '');
}

/** The plan's block size: every warmed prefix must be whole blocks in both pools. */
function planBlockSize(f: FleetSpec): number {
  const a = f.efficient.blockSize;
  const b = f.capable.blockSize;
  const big = Math.max(a, b);
  if (big % Math.min(a, b) !== 0) throw new RangeError(`block sizes ${a} and ${b}: one must divide the other, so a warmed prefix is whole blocks in both pools`);
  return big;
}

/** Fit from outcome rows as `vantage fit` does (JSON Lines parse, then `fitAll`), and derive every variant's frozen set. */
export function fitFromRows(rows: readonly JsonRow[] | string, seed: number, destinationLimit: number, onProgress?: (line: string) => void): StudyResult['fit'] {
  const parsed = parseCalibrationJsonl(typeof rows === 'string' ? rows : toJsonl(rows));
  if (parsed.problems.length > 0) throw new Error(`calibration rows: ${parsed.problems.length} bad (first: line ${parsed.problems[0]!.line}: ${parsed.problems[0]!.message})`);
  const fit = fitAll(parsed.rows, { seed, gate: { ...DEFAULT_PARAMETER_SET.gate, destinationLimit }, createdAt: '2026-01-01T00:00:00Z', ...(onProgress ? { onProgress } : {}) });
  if (!fit.ok) throw new Error(`cannot fit: ${[...fit.errors, ...fit.problems.map((p) => `line ${p.line}: ${p.message}`)].join('; ')}`);
  const variants = {} as Record<Variant, ParameterSet>;
  for (const v of VARIANTS) {
    const set = variantParameterSet(fit.parameterSet, fit.report, v);
    if (!set.ok) throw new Error(`cannot derive the ${v} set: ${set.errors.join('; ')}`);
    variants[v] = set.value;
  }
  return { report: fit.report, parameterSet: fit.parameterSet, variants };
}

/** Every variant's frozen set under the records' variant names, as the evaluation runs them. */
export function recordVariantParams(fit: StudyResult['fit']): Record<RecordVariant, ParameterSet> {
  const params = {} as Record<RecordVariant, ParameterSet>;
  for (const v of VARIANTS) params[RECORD_VARIANT[v]] = fit.variants[v];
  return params;
}

/** The calibration plan on the simulated fleet, then the fit (the first two phases of `runStudy`; `--load` reuses them). */
export function calibrateAndFit(o: StudyOptions, phase: (name: string) => void = () => {}): { calibrationRows: JsonRow[]; fit: StudyResult['fit'] } {
  const progress = o.onProgress ?? (() => {});
  const fleet = o.fleet ?? DEFAULT_FLEET;
  const destinationLimit = o.destinationLimit ?? 8;
  const plan = calibrationPlan({ preset: o.preset ?? 'full', seed: o.calibrationSeed ?? 1, blockSize: planBlockSize(fleet), destinationLimit });
  progress(`calibration plan ${plan.preset}: ${plan.totals.conditions} conditions (${plan.totals.qSetConditions} Q set), ${plan.totals.runs} runs, ${plan.totals.probeRequests} probes`);
  const cal = runCalibrationOffline({ plan, fleet, seed: o.calibrationSeed ?? 1, onProgress: progress });
  phase('calibration');

  const fit = fitFromRows(cal.rows, o.calibrationSeed ?? 1, destinationLimit, (l) => progress(`fit: ${l}`));
  phase('fit');
  return { calibrationRows: cal.rows, fit };
}

export function runStudy(o: StudyOptions = {}): StudyResult {
  const progress = o.onProgress ?? (() => {});
  const fleet = o.fleet ?? DEFAULT_FLEET;
  const phasesMs: Record<string, number> = {};
  let t = performance.now();
  const phase = (name: string): void => {
    const now = performance.now();
    phasesMs[name] = Math.round(now - t);
    progress(`${name}: ${(phasesMs[name] / 1000).toFixed(1)} s`);
    t = now;
  };

  const { calibrationRows, fit } = calibrateAndFit(o, phase);

  const proposal = o.proposal ?? { kind: 'fraction_capable', fraction: 0.2, seed: 7 };
  const background = o.background === undefined ? DEFAULT_BACKGROUND_TRAFFIC : o.background;
  const schedule = evaluationSchedule({ attempts: o.attempts ?? 5, sessionsPerAttempt: o.sessions ?? 40, seed: o.scheduleSeed ?? 1, proposal, background });
  const params = recordVariantParams(fit);
  progress(`evaluation: ${schedule.runs.length} runs (${schedule.attempts} attempts x ${schedule.variants.length} variants in seeded random order, ${schedule.sessionsPerAttempt} matched sessions each)`);
  const ev = runEvaluationOffline({ schedule, fleet, params, proposal, background, maxContextTokens: o.maxContextTokens ?? 32_768, seed: o.scheduleSeed ?? 1, onProgress: progress });
  phase('evaluation');

  const analysis = analyzeEvaluation(ev.rows, { seed: o.scheduleSeed ?? 1, iterations: o.bootstrap ?? 1000 });
  const reportHtml = renderEvaluationHtml(analysis);
  const fitHtml = renderFitReportHtml(fit.report);
  phase('report');
  return { calibrationRows, fit, schedule, evaluationRows: ev.rows, analysis, fitHtml, reportHtml, phasesMs };
}
