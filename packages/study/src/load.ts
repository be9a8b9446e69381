/**
 * Load as an axis (`vantage study --load`): calibrate and fit once, then the five-variant evaluation
 * at each load point (competing traffic on the efficient pool crossed with Stage's capable-proposal
 * fraction), reported against the measured, not designed, busy fraction of the efficient pool's
 * engines under the Stage baseline.
 */
import {
  analyzeEvaluation,
  DEFAULT_BACKGROUND_TRAFFIC,
  evaluationSchedule,
  type BackgroundTrafficSpec,
  type DifferenceMetricId,
  type EvaluationAnalysis,
  type StageProposalModel,
} from '@vantage/evaluation';
import { escapeHtml, intervalText, lineChartSvg, mean, page, table } from '@vantage/fitting';
import { runEvaluationOffline } from './evaluate';
import type { FleetSpec } from './fleet';
import { recordVariantParams, type StudyResult } from './study';

export interface LoadPoint {
  /** Competing traffic on the efficient pool: mean gap between a stream's requests (sim ms); null for none. */
  readonly gapMs: number | null;
  readonly capableFraction: number;
}

/** One load point's evaluation: the schedule's size and seed (also the fleet's and the bootstrap's), the Stage proposal and the competing traffic. */
interface LoadPointSettings {
  readonly fleet: FleetSpec;
  readonly fit: StudyResult['fit'];
  readonly attempts: number;
  readonly sessions: number;
  readonly seed: number;
  readonly proposal: StageProposalModel;
  readonly background: BackgroundTrafficSpec | null;
  readonly maxContextTokens: number;
  readonly bootstrap: number;
}

interface LoadOptions extends Pick<LoadPointSettings, 'fleet' | 'fit'>, Partial<Omit<LoadPointSettings, 'fleet' | 'fit' | 'proposal' | 'background'>> {
  readonly gapsMs?: readonly (number | null)[];
  readonly capableFractions?: readonly number[];
  /** The span the competing traffic's requests cover (default 60 s of sim time; 4 streams). */
  readonly spanMs?: number;
  readonly onProgress?: (line: string) => void;
}

export interface LoadPointResult {
  readonly point: LoadPoint;
  readonly label: string;
  /** Mean busy fraction of the efficient (capable) pool over the baseline's runs. */
  readonly efficientUtilisation: number;
  readonly capableUtilisation: number;
  readonly analysis: EvaluationAnalysis;
}

interface LoadResult {
  readonly points: readonly LoadPointResult[];
  readonly html: string;
}

const DEFAULT_LOAD_GAPS_MS: readonly (number | null)[] = [null, 1600, 800, 400, 200];
const DEFAULT_LOAD_FRACTIONS: readonly number[] = [0.2, 0.5];

/** Competing traffic on the efficient pool only (the pool the rules move requests away from). */
export function loadBackground(gapMs: number | null, streams: number, spanMs: number): BackgroundTrafficSpec | null {
  if (gapMs === null) return null;
  return { ...DEFAULT_BACKGROUND_TRAFFIC, streams, requestsPerStream: Math.max(1, Math.ceil(spanMs / gapMs)), meanGapMs: gapMs, capableFraction: 0, seed: 3 };
}

/** The five-variant evaluation at one load point, with the Stage baseline's mean busy fractions. */
export function evaluateLoadPoint(s: LoadPointSettings, point: LoadPoint, label: string): LoadPointResult {
  const { proposal, background } = s;
  const schedule = evaluationSchedule({ attempts: s.attempts, sessionsPerAttempt: s.sessions, seed: s.seed, proposal, background });
  const ev = runEvaluationOffline({ schedule, fleet: s.fleet, params: recordVariantParams(s.fit), proposal, background, maxContextTokens: s.maxContextTokens, seed: s.seed });
  const analysis = analyzeEvaluation(ev.rows, { seed: s.seed, iterations: s.bootstrap });
  const base = ev.runs.filter((r) => r.variant === 'baseline');
  return {
    point,
    label,
    efficientUtilisation: mean(base.map((x) => x.utilisation.efficient)),
    capableUtilisation: mean(base.map((x) => x.utilisation.capable)),
    analysis,
  };
}

export function runLoadStudy(o: LoadOptions): LoadResult {
  const progress = o.onProgress ?? (() => {});
  const settings = { fleet: o.fleet, fit: o.fit, attempts: o.attempts ?? 2, sessions: o.sessions ?? 10, seed: o.seed ?? 1, maxContextTokens: o.maxContextTokens ?? 32_768, bootstrap: o.bootstrap ?? 500 };
  const points: LoadPointResult[] = [];
  const gaps = o.gapsMs ?? DEFAULT_LOAD_GAPS_MS;
  const fractions = o.capableFractions ?? DEFAULT_LOAD_FRACTIONS;
  for (const capableFraction of fractions) {
    for (const gapMs of gaps) {
      const label = `${gapMs === null ? 'no competing traffic' : `competing gap ${gapMs} ms`}, capable proposals ${Math.round(100 * capableFraction)} %`;
      const proposal = { kind: 'fraction_capable' as const, fraction: capableFraction, seed: 7 };
      const background = loadBackground(gapMs, 4, o.spanMs ?? 60_000);
      const r = evaluateLoadPoint({ ...settings, proposal, background }, { gapMs, capableFraction }, label);
      points.push(r);
      const ttft = r.analysis.differences.filter((d) => d.metric === 'ttft_mean_ms').map((d) => `${d.variant} ${d.estimate.toFixed(0)} ms`).join(', ');
      progress(`load ${points.length}/${gaps.length * fractions.length}: ${label}: efficient pool ${busyPct(r.efficientUtilisation)} busy; mean TTFT vs Stage: ${ttft}`);
    }
  }
  return { points, html: renderLoadHtml(points) };
}

const busyPct = (u: number): string => `${(100 * u).toFixed(0)} %`;

const CHARTS: readonly { metric: DifferenceMetricId; title: string }[] = [
  { metric: 'ttft_mean_ms', title: 'Mean TTFT − Stage (ms)' },
  { metric: 'ttft_p90_ms', title: 'p90 TTFT − Stage (ms)' },
  { metric: 'session_completion_mean_ms', title: 'Mean session completion time − Stage (ms)' },
];

/** The load report: per capable fraction, one chart per metric (a line per variant, bootstrap intervals), and the rules' activity. */
export function renderLoadHtml(points: readonly LoadPointResult[]): string {
  const out: string[] = [];
  out.push('<h1>Offline study: the rules against load</h1>');
  out.push(
    '<p>Each point is a five-variant evaluation on fresh simulated pools (repeated attempts, variants in seeded random order, matched sessions and Stage proposals within an attempt), with competing traffic booked on the efficient pool by Dynamo\'s own choice. The x axis is the measured busy fraction of the efficient pool\'s engines under the Stage baseline. Each line is a variant\'s difference from Stage with its session-bootstrap interval; below zero the rule helped. TTFT is engine time on the simulated clock. Session completion (every turn served) stands in for task success.</p>',
  );
  const fractions = [...new Set(points.map((p) => p.point.capableFraction))];
  for (const f of fractions) {
    const ps = points.filter((p) => p.point.capableFraction === f).sort((a, b) => a.efficientUtilisation - b.efficientUtilisation);
    out.push(`<h2>Stage proposes capable for ${Math.round(100 * f)} % of turns</h2>`);
    const variants = [...new Set(ps.flatMap((p) => p.analysis.differences.map((d) => d.variant)))];
    for (const c of CHARTS) {
      const series = variants.map((v) => {
        const ds = ps.map((p) => p.analysis.differences.find((d) => d.variant === v && d.metric === c.metric));
        return {
          name: v,
          points: ps.map((p, i) => [100 * p.efficientUtilisation, ds[i]?.estimate ?? NaN] as const),
          errors: ds.map((d) => (d === undefined || d.lo === null || d.hi === null ? null : ([d.lo, d.hi] as const))),
        };
      });
      out.push(lineChartSvg({ title: c.title, xLabel: 'efficient pool busy (%)', yLabel: 'difference from Stage (ms)', series, zeroLine: true, width: 700, height: 320 }));
    }
    const rows = ps.flatMap((p) =>
      p.analysis.variants.map((v) => {
        const d = (m: DifferenceMetricId): string => intervalText(p.analysis.differences.find((y) => y.variant === v.variant && y.metric === m));
        return [p.label, busyPct(p.efficientUtilisation), busyPct(p.capableUtilisation), v.variant, d('ttft_mean_ms'), d('ttft_p90_ms'), d('session_completion_mean_ms'), ...[v.rules.couldAct, v.rules.overrode, v.rules.fallbackTotal, v.rules.efficientProposals].map(String), `${v.sessions.completed}/${v.sessions.total}`];
      }),
    );
    const head = ['load point', 'efficient busy', 'capable busy', 'variant', 'mean TTFT − Stage [interval]', 'p90 TTFT − Stage', 'session time − Stage', 'could act', 'overrode', 'fell back', 'efficient proposals', 'sessions completed'];
    out.push(table(head, rows, escapeHtml));
  }
  return page('vantage offline study: load curve', out.join('\n'));
}
