/**
 * The main job's offline half and its closing comparison (infra/README.md, `job-study.ts`): the
 * offline operating point, the engine-side analysis of the live rows (routing and dispatch time
 * left out) and, per variant, the offline prediction beside the live measurement.
 */
import {
  analyzeEvaluation,
  parseEvaluationRows,
  type BackgroundTrafficSpec,
  type Difference,
  type EvaluationAnalysis,
  type StageProposalModel,
  type VariantSummary,
} from '@vantage/evaluation';
import { escapeHtml as esc, fmtG, intervalText, page, table, type FitReport } from '@vantage/fitting';
import { RECORD_VARIANT as CORE_RECORD_VARIANT } from '@vantage/decision-core';
import { VARIANTS } from '@vantage/rules';
import { polynomialTiming, scaledTiming } from '@vantage/sim';
import { calibrateAndFit, evaluateLoadPoint, loadBackground, renderLoadHtml, type FleetSpec, type LoadPointResult, type StudyResult } from '@vantage/study';
import type { CalibrationPreset } from '@vantage/evaluation';

/** The live fleet's pools (main.ts starts these): 4 + 4 workers, 64-token blocks, capable at 0.6 of the mocker's speed. */
export const LIVE_POOLS = Object.freeze({
  efficient: Object.freeze({ name: 'efficient', component: 'efficient', speed: 1.0, workers: 4 }),
  capable: Object.freeze({ name: 'capable', component: 'capable', speed: 0.6, workers: 4 }),
});

/** The same pools on the simulator (the fleet service's defaults: 16,384 KV blocks, 8,192 batch tokens). */
export const LIVE_FLEET: FleetSpec = Object.freeze({
  efficient: { name: 'efficient', workers: LIVE_POOLS.efficient.workers, blockSize: 64, timing: polynomialTiming },
  capable: { name: 'capable', workers: LIVE_POOLS.capable.workers, blockSize: 64, timing: scaledTiming(polynomialTiming, LIVE_POOLS.capable.speed) },
});

/** Competing-traffic levels the offline study tries: mean gap per stream (sim ms) on the efficient pool, none first. */
const OPERATING_GAPS_MS: readonly (number | null)[] = [null, 400, 200];
const STREAMS = 4;
/** Bootstrap replicates of each offline level (the analysis of heavy competing traffic dominates the offline time). */
const OFFLINE_BOOTSTRAP = 200;
const SPAN_MS = 60_000;

/** The job's settings the offline study reads (`JobConfig` has them, the proposal as a spec). */
export interface OfflineSettings {
  /** Calibration plan preset (default `job`). */
  readonly preset: CalibrationPreset;
  readonly calibrationSeed: number;
  /** Gate G's destination limit, the same in calibration (busy-capable level), the fit and every variant. */
  readonly destinationLimit: number;
  readonly attempts: number;
  readonly sessions: number;
  readonly scheduleSeed: number;
  readonly proposal: StageProposalModel;
  /** Largest prompt of a generated session. */
  readonly maxContextTokens: number;
  readonly bootstrap: number;
}

export interface OfflinePoint extends LoadPointResult {
  readonly background: BackgroundTrafficSpec | null;
  /** Sum over the four rules of min(overrode, kept efficient proposals). */
  readonly decisionBalance: number;
  readonly overrides: number;
}

export interface OfflineStudy {
  readonly fit: StudyResult['fit'];
  readonly points: readonly OfflinePoint[];
  readonly chosen: OfflinePoint;
  /** Why the chosen point, in one line. */
  readonly why: string;
  readonly loadHtml: string;
}

function capableFraction(p: StageProposalModel): number {
  return p.kind === 'fraction_capable' ? p.fraction : p.kind === 'always_efficient' ? 0 : NaN;
}

const RULE_RECORD_VARIANTS = VARIANTS.filter((v) => v !== 'stage').map((v) => CORE_RECORD_VARIANT[v]);

/** One offline five-variant evaluation with the live job's schedule at one competing-traffic level. */
function offlineEvaluation(s: OfflineSettings, fit: StudyResult['fit'], background: BackgroundTrafficSpec | null, gapMs: number | null, iterations: number): OfflinePoint {
  const label = background === null ? 'no competing traffic' : `competing traffic ${background.streams} streams x ${background.requestsPerStream}, mean gap ${background.meanGapMs} ms, ${Math.round(100 * (1 - background.capableFraction))} % on efficient`;
  const settings = { fleet: LIVE_FLEET, fit, attempts: s.attempts, sessions: s.sessions, seed: s.scheduleSeed, proposal: s.proposal, background, maxContextTokens: s.maxContextTokens, bootstrap: iterations };
  const p = evaluateLoadPoint(settings, { gapMs, capableFraction: capableFraction(s.proposal) }, label);
  let balance = 0;
  let overrides = 0;
  for (const v of p.analysis.variants) {
    if (!(RULE_RECORD_VARIANTS as readonly string[]).includes(v.variant)) continue;
    balance += Math.min(v.rules.overrode, v.rules.efficientProposals - v.rules.overrode);
    overrides += v.rules.overrode;
  }
  return { ...p, background, decisionBalance: balance, overrides };
}

/**
 * Calibrate and fit offline with the job's plan, then evaluate at each level of `OPERATING_GAPS_MS` (or
 * only at `fixed`, when the job was given its competing traffic) and choose the operating point.
 */
export function offlineOperatingPoint(s: OfflineSettings, o: { readonly fixed?: BackgroundTrafficSpec | null; readonly progress: (line: string) => void }): OfflineStudy {
  const t0 = performance.now();
  const { fit } = calibrateAndFit({ preset: s.preset, fleet: LIVE_FLEET, calibrationSeed: s.calibrationSeed, destinationLimit: s.destinationLimit });
  const t1 = performance.now();
  const c = fit.report.chosen;
  o.progress(`offline fit: count r=${String(fit.report.thresholds.count.best.r)}, count+prefill r=${String(fit.report.thresholds.countPrefill.best.r)} p=${String(fit.report.thresholds.countPrefill.best.p)}, margins blind ${fit.report.margins.blind.marginMs.toFixed(0)} ms, cache ${fit.report.margins.cache.marginMs.toFixed(0)} ms; selection chose ${c.thresholdRule.rule} and ${c.estimator.rule} (${((t1 - t0) / 1000).toFixed(1)} s)`);
  const candidates: { bg: BackgroundTrafficSpec | null; gap: number | null }[] =
    o.fixed !== undefined ? [{ bg: o.fixed, gap: o.fixed?.meanGapMs ?? null }] : OPERATING_GAPS_MS.map((gap) => ({ bg: loadBackground(gap, STREAMS, SPAN_MS), gap }));
  const points: OfflinePoint[] = [];
  for (const cand of candidates) {
    const p = offlineEvaluation(s, fit, cand.bg, cand.gap, Math.min(s.bootstrap, OFFLINE_BOOTSTRAP));
    points.push(p);
    const d = p.analysis.differences.filter((x) => x.metric === 'ttft_mean_ms').map((x) => `${x.variant} ${fmtG(x.estimate)}`);
    o.progress(`offline ${points.length}/${candidates.length}: ${p.label}: efficient pool ${(100 * p.efficientUtilisation).toFixed(0)} % busy, ${p.overrides} overrides, decision balance ${p.decisionBalance}; mean TTFT - Stage (sim ms): ${d.join(', ')}`);
  }
  let best = points[0]!;
  for (const p of points) if (p.decisionBalance > best.decisionBalance) best = p;
  let why = `the most decisions that could go either way (${best.decisionBalance}: per rule the smaller of overrides and kept efficient proposals, summed)`;
  if (best.decisionBalance === 0) {
    for (const p of points) if (p.overrides > best.overrides) best = p;
    why = best.overrides > 0 ? `no level leaves a rule both overriding and keeping; the most overrides (${best.overrides})` : 'no rule overrode at any level offline; the first level';
  }
  return { fit, points, chosen: best, why, loadHtml: renderLoadHtml(points) };
}

/**
 * The live outcome rows with each foreground request's TTFT replaced by the engine's (sim ms), joined by
 * request id with the load generator's lines; rows without an engine figure keep none (`ttftMs` null).
 */
export function engineSideRows(outcomeLines: readonly string[], engineTtftById: ReadonlyMap<string, number | null>): Record<string, unknown>[] {
  return outcomeLines.map((l) => {
    const o = JSON.parse(l) as Record<string, unknown>;
    const id = o['requestId'];
    if (typeof id === 'string' && engineTtftById.has(id) && o['ttftMs'] !== null && o['ttftMs'] !== undefined) o['ttftMs'] = engineTtftById.get(id) ?? null;
    return o;
  });
}

export function engineSideAnalysis(outcomeLines: readonly string[], engineTtftById: ReadonlyMap<string, number | null>, seed: number, iterations: number): EvaluationAnalysis {
  return analyzeEvaluation(parseEvaluationRows(engineSideRows(outcomeLines, engineTtftById)), { seed, iterations });
}

function diff(a: EvaluationAnalysis, variant: string, metric: Difference['metric']): Difference | undefined {
  return a.differences.find((d) => d.variant === variant && d.metric === metric);
}

/** Lowered / raised / no resolved difference, from a difference's interval. */
export function verdict(d: Difference | undefined): 'lowered' | 'raised' | 'no resolved difference' | 'not measured' {
  if (d === undefined || d.lo === null || d.hi === null) return 'not measured';
  if (d.hi < 0) return 'lowered';
  if (d.lo > 0) return 'raised';
  return 'no resolved difference';
}

function rules(v: VariantSummary | undefined): string {
  if (v === undefined) return '—';
  const r = v.rules;
  return `${r.couldAct} / ${r.overrode} / ${r.fallbackTotal} of ${r.efficientProposals}`;
}

interface Comparison {
  readonly offline: OfflineStudy;
  readonly liveWall: EvaluationAnalysis;
  readonly liveEngine: EvaluationAnalysis;
  readonly liveFit: FitReport;
  readonly liveBackground: string;
}

function ruleOf(fit: FitReport, variant: string): string {
  const t = fit.thresholds;
  switch (variant) {
    case 'request_count':
      return `r=${String(t.count.best.r)}`;
    case 'count_prefill':
      return `r=${String(t.countPrefill.best.r)} p=${String(t.countPrefill.best.p)}`;
    case 'cache_blind':
      return `delta=${fit.margins.blind.marginMs.toFixed(0)} ms`;
    case 'cache_aware':
      return `delta=${fit.margins.cache.marginMs.toFixed(0)} ms`;
    default:
      return 'Stage';
  }
}

export function comparisonHtml(c: Comparison): string {
  const off = c.offline.chosen.analysis;
  const names = off.variants.map((v) => v.variant);
  const ruleVariants = names.filter((v) => v !== 'baseline');
  const fits = [c.offline.fit.report, c.liveFit];
  const out: string[] = [
    '<h1>Offline prediction and live measurement</h1>',
    `<p>The offline study ran the job's calibration plan, fit and schedule on the simulator with the live fleet's pools at ${c.offline.points.length} competing-traffic level(s) and chose <b>${esc(c.offline.chosen.label)}</b> (${esc(c.offline.why)}); the live calibration, fit and five-variant evaluation then ran at that level (<code>--background ${esc(c.liveBackground)}</code>). Engine-side TTFT is the engines' own measure: offline the discrete-event clock, live the fleet's simulated clock, which leaves routing and dispatch out but follows the wall clock at time scale 4, so a stalled host still lengthens it; wall-clock TTFT is the outcome records' (time scale 4), routing and dispatch included. Variants that never or rarely overrode routed as Stage did, so their differences from Stage show the runs' own variation. Intervals are session-bootstrap (paired by matched session) percentile intervals. Session completion (every turn served) stands in for task success.</p>`,
    '<h2>Fitted rules</h2>',
    table(['variant', 'offline fit', 'live fit'], [
      ...ruleVariants.map((v) => [esc(v), ...fits.map((f) => ruleOf(f, v))]),
      ['selection chose', ...fits.map((f) => `${esc(f.chosen.thresholdRule.rule)}; ${esc(f.chosen.estimator.rule)}`)],
    ]),
    '<h2>Per variant</h2>',
    table(
      ['variant', 'offline TTFT mean (sim ms)', 'live engine TTFT mean (sim ms)', 'live wall TTFT mean (ms)', 'offline mean TTFT − Stage', 'live engine mean TTFT − Stage', 'live wall mean TTFT − Stage', 'offline session time − Stage (sim ms)', 'live session time − Stage (wall ms)', 'offline could act / overrode / fell back', 'live could act / overrode / fell back', 'live sessions completed'],
      names.map((v) => {
        const [ov, le, lw] = [off, c.liveEngine, c.liveWall].map((a) => a.variants.find((x) => x.variant === v));
        const across = (as: readonly EvaluationAnalysis[], metric: Difference['metric']): string[] => as.map((a) => intervalText(diff(a, v, metric)));
        return [
          esc(v),
          ...[ov, le, lw].map((x) => fmtG(x?.ttftMs.mean)),
          ...across([off, c.liveEngine, c.liveWall], 'ttft_mean_ms'),
          ...across([off, c.liveWall], 'session_completion_mean_ms'),
          rules(ov),
          rules(lw),
          lw === undefined ? '—' : `${lw.sessions.completed}/${lw.sessions.total}`,
        ];
      }),
    ),
    '<h2>p90 TTFT − Stage</h2>',
    table(['variant', 'offline (sim ms)', 'live engine (sim ms)', 'live wall (ms)'], ruleVariants.map((v) => [esc(v), ...[off, c.liveEngine, c.liveWall].map((a) => intervalText(diff(a, v, 'ttft_p90_ms')))])),
    '<h2>Offline levels tried</h2>',
    table(['level', 'efficient busy', 'overrides (4 rules)', 'decision balance'], c.offline.points.map((p) => [esc(p.label), `${(100 * p.efficientUtilisation).toFixed(0)} %`, String(p.overrides), String(p.decisionBalance)])),
  ];
  return page('vantage main job: offline prediction and live measurement', out.join('\n'));
}

/** One sentence per rule variant: what the live run measured (engine side), beside the offline prediction. */
export function findingLines(c: Comparison): string[] {
  const off = c.offline.chosen.analysis;
  const out: string[] = [];
  for (const v of off.variants.map((x) => x.variant)) {
    if (v === 'baseline') continue;
    const le = diff(c.liveEngine, v, 'ttft_mean_ms');
    const lw = diff(c.liveWall, v, 'ttft_mean_ms');
    const ls = diff(c.liveWall, v, 'session_completion_mean_ms');
    const od = diff(off, v, 'ttft_mean_ms');
    const r = c.liveWall.variants.find((x) => x.variant === v)?.rules;
    const acts = r === undefined ? 'no decisions recorded' : `overrode ${r.overrode} and fell back on ${r.fallbackTotal} of ${r.efficientProposals} efficient proposals`;
    // With no override every route was Stage's: a difference is then the runs' own variation (host load, timing), not the rule.
    const cause = r !== undefined && r.overrode === 0 ? ', so every route was Stage\'s and any difference is run-to-run variation, not the rule' : '';
    out.push(
      `${v} (${ruleOf(c.liveFit, v)}): ${verdict(le)} engine-side mean TTFT against Stage, ${intervalText(le)} sim ms (offline predicted ${intervalText(od)}); wall clock ${intervalText(lw)} ms; session time ${intervalText(ls)} ms (${verdict(ls)}); it ${acts}${cause}.`,
    );
  }
  return out;
}
