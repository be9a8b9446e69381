/**
 * Analysis of a five-variant evaluation from its outcome rows (seed 000,
 * "Measured outcomes": complete task durations, actual TTFT, full-response
 * latency, uncached input by model, routing overhead and effects on
 * competing traffic; "Report how often each rule could act, changed the
 * choice or fell back to Stage"), with differences of each variant from the
 * Stage baseline and seeded session-bootstrap confidence intervals.
 *
 * Pure and synchronous; the same rows (in any order), seed and options give
 * the same analysis.
 */
import { VARIANTS, type RowProblem } from '@vantage/records';
import { compareStrings, mean, quantileSorted, type RowsParse } from '@vantage/fitting';
import { bootstrapDifference, type BootstrapResult, type Unit } from './bootstrap';
import { streamFor } from '@vantage/random';
import { parseEvaluationRows, type EvaluationRow } from './rows';

interface AnalysisOptions {
  /** Bootstrap seed (default 1). */
  readonly seed?: number;
  /** Bootstrap replicates (default 2000). */
  readonly iterations?: number;
  /** Two-sided level of the intervals (default 0.95). */
  readonly confidence?: number;
  /** The variant differences are taken against (default `baseline`, Stage's). */
  readonly baseline?: string;
  readonly onProgress?: (line: string) => void;
}

export interface Distribution {
  readonly n: number;
  readonly mean: number;
  readonly min: number;
  readonly p5: number;
  readonly p25: number;
  readonly p50: number;
  readonly p75: number;
  readonly p90: number;
  readonly p95: number;
  readonly max: number;
}

export interface RuleCounts {
  /** Foreground requests with a decision record. */
  readonly decisions: number;
  /** Foreground requests without one (their outcome is `incomplete`). */
  readonly withoutDecision: number;
  readonly efficientProposals: number;
  readonly capableProposals: number;
  /** `couldAct`: G passed, the trigger was evaluated. */
  readonly couldAct: number;
  /** reason `overrode`: efficient changed to capable. */
  readonly overrode: number;
  /** reason `kept`: could act, trigger false. */
  readonly kept: number;
  /** reason `stage_capable`: capable proposals are never reconsidered. */
  readonly stageCapable: number;
  /** reason `baseline`: the Stage variant, no probes. */
  readonly baseline: number;
  /** Fell back to Stage, by reason. */
  readonly fallback: Readonly<Record<string, number>>;
  readonly fallbackTotal: number;
  /** Reasons this build does not know (a newer writer). */
  readonly other: Readonly<Record<string, number>>;
  readonly finalCapable: number;
  /** Shares of efficient proposals (NaN when there were none). */
  readonly couldActRate: number;
  readonly overrodeRate: number;
  readonly fallbackRate: number;
}

export interface VariantSummary {
  readonly variant: string;
  readonly sessions: { readonly total: number; readonly completed: number; readonly withFailures: number; readonly matched: number };
  readonly requests: { readonly total: number; readonly executed: number; readonly byStatus: Readonly<Record<string, number>> };
  /** Executed (completed) foreground requests. */
  readonly ttftMs: Distribution;
  readonly latencyMs: Distribution;
  /** First arrival to last completion, sessions whose requests all completed. */
  readonly sessionCompletionMs: Distribution;
  readonly uncachedInput: {
    readonly byModel: Readonly<Record<string, { readonly requests: number; readonly tokens: number; readonly missingUsage: number }>>;
    readonly totalTokens: number;
    /** Executed requests without a usage report (excluded from the sums). */
    readonly missingUsage: number;
    /** Mean over sessions whose executed requests all reported usage. */
    readonly perSession: Distribution;
  };
  /** `routingOverheadUs` of foreground requests with a decision. */
  readonly routingOverheadUs: Distribution;
  /** `decision.observeDurationUs` (null for the baseline: no probes). */
  readonly observeDurationUs: Distribution;
  readonly rules: RuleCounts;
  readonly background: {
    readonly requests: number;
    readonly executed: number;
    readonly streams: number;
    readonly byStatus: Readonly<Record<string, number>>;
    readonly ttftMs: Distribution;
    readonly latencyMs: Distribution;
  };
  /** Sorted TTFTs of executed foreground requests (for distribution plots). */
  readonly ttftValues: readonly number[];
}

export type DifferenceMetricId = (typeof DIFFERENCE_METRICS)[number]['id'];

/** `estimate` is variantValue − baselineValue. */
export interface Difference extends BootstrapResult {
  readonly metric: DifferenceMetricId;
  readonly label: string;
  readonly unit: string;
  readonly variant: string;
  readonly baseline: string;
  readonly variantValue: number;
  readonly baselineValue: number;
  readonly confidence: number;
}

export interface EvaluationAnalysis {
  readonly options: { readonly seed: number; readonly iterations: number; readonly confidence: number; readonly baseline: string };
  readonly input: { readonly rows: number; readonly used: number; readonly skipped: Readonly<Record<string, number>>; readonly problems: readonly RowProblem[] };
  readonly variants: readonly VariantSummary[];
  readonly differences: readonly Difference[];
  /** What the records cannot show (see README), always listed. */
  readonly gaps: readonly string[];
  readonly warnings: readonly string[];
}

const RECORD_GAPS: readonly string[] = Object.freeze([
  'Task success (the Harbor score) is not in the outcome records: failures are per-request statuses; a session counts as failed when any of its requests did not complete.',
  'Session completion runs from the first request\'s arrival (its decision timestamp) to the last request\'s end; agent time before the first request and after the last response (tool runs, scoring) is not recorded.',
  'Background traffic has no decision, hence no variant field: its variant comes from its session id (evalbg:<attempt>:<variant>:<stream>) or an evaluation.variant column.',
  'Attempts and matched sessions come from the session id convention (eval:<attempt>:<variant>:<index>); the records have no attempt field.',
  'Routing overhead is routingOverheadUs (the gateway\'s measurement, or the decision duration by default); Stage\'s own proposal time is not recorded. The observation query is decision.observeDurationUs.',
  'Uncached input is the engine\'s usage report (input − cached) attributed to servedPool (else the final model); requests without a usage report are counted as missing, not as zero.',
]);

// ---------------------------------------------------------------------------
// Units: one per session (foreground) or background stream.
// ---------------------------------------------------------------------------

interface SessionUnit extends Unit {
  readonly key: string;
  readonly ttft: number[];
  readonly latency: number[];
  readonly overheadUs: number[];
  firstArrival: number;
  lastEnd: number;
  requests: number;
  completed: number;
  uncached: number;
  uncachedMissing: number;
  efficientProposals: number;
  overrides: number;
}

function newUnit(key: string, matchKey: string | null): SessionUnit {
  return { key, matchKey, ttft: [], latency: [], overheadUs: [], firstArrival: Infinity, lastEnd: -Infinity, requests: 0, completed: 0, uncached: 0, uncachedMissing: 0, efficientProposals: 0, overrides: 0 };
}

function addRow(u: SessionUnit, r: EvaluationRow): void {
  u.requests++;
  if (r.arrivalMs !== null) u.firstArrival = Math.min(u.firstArrival, r.arrivalMs);
  if (r.routingOverheadUs !== null && r.decision !== null) u.overheadUs.push(r.routingOverheadUs);
  if (r.decision?.proposal === 'efficient') {
    u.efficientProposals++;
    if (r.decision.reason === 'overrode') u.overrides++;
  }
  if (r.status !== 'completed') return;
  u.completed++;
  if (r.endMs !== null) u.lastEnd = Math.max(u.lastEnd, r.endMs);
  if (r.ttftMs !== null) u.ttft.push(r.ttftMs);
  if (r.latencyMs !== null) u.latency.push(r.latencyMs);
  if (r.uncachedInputTokens !== null) u.uncached += r.uncachedInputTokens;
  else u.uncachedMissing++;
}

function completionMs(u: SessionUnit): number | null {
  return u.completed === u.requests && Number.isFinite(u.firstArrival) && Number.isFinite(u.lastEnd) ? u.lastEnd - u.firstArrival : null;
}

const pooledMean = (units: readonly SessionUnit[], pick: (u: SessionUnit) => readonly number[]): number => mean(units.flatMap(pick));
const pooledQuantile = (units: readonly SessionUnit[], pick: (u: SessionUnit) => readonly number[], q: number): number =>
  quantileSorted(units.flatMap(pick).sort((a, b) => a - b), q);
/** The mean of `value` over the units it is defined (not null) for. */
const meanOf = (units: readonly SessionUnit[], value: (u: SessionUnit) => number | null): number => mean(definedOf(units.map(value)));
const definedOf = (xs: readonly (number | null)[]): number[] => xs.filter((x): x is number => x !== null);

/** Each difference the analysis reports, with the statistic of one arm's units it is taken of. */
export const DIFFERENCE_METRICS = [
  { id: 'ttft_mean_ms', label: 'Mean TTFT', unit: 'ms', scope: 'sessions', stat: (us) => pooledMean(us, (u) => u.ttft) },
  { id: 'ttft_p90_ms', label: 'p90 TTFT', unit: 'ms', scope: 'sessions', stat: (us) => pooledQuantile(us, (u) => u.ttft, 0.9) },
  { id: 'latency_mean_ms', label: 'Mean full-response latency', unit: 'ms', scope: 'sessions', stat: (us) => pooledMean(us, (u) => u.latency) },
  { id: 'session_completion_mean_ms', label: 'Mean session completion time', unit: 'ms', scope: 'sessions', stat: (us) => meanOf(us, completionMs) },
  { id: 'session_failure_rate', label: 'Sessions with a failed request', unit: 'fraction', scope: 'sessions', stat: (us) => meanOf(us, (u) => (u.completed === u.requests ? 0 : 1)) },
  { id: 'uncached_input_per_session', label: 'Uncached input per session', unit: 'tokens', scope: 'sessions', stat: (us) => meanOf(us, (u) => (u.uncachedMissing === 0 ? u.uncached : null)) },
  { id: 'routing_overhead_mean_us', label: 'Mean routing overhead', unit: 'µs', scope: 'sessions', stat: (us) => pooledMean(us, (u) => u.overheadUs) },
  { id: 'override_rate', label: 'Overrides per efficient proposal', unit: 'fraction', scope: 'sessions', stat: overrideRate },
  { id: 'background_ttft_mean_ms', label: 'Competing traffic: mean TTFT', unit: 'ms', scope: 'background', stat: (us) => pooledMean(us, (u) => u.ttft) },
  { id: 'background_ttft_p90_ms', label: 'Competing traffic: p90 TTFT', unit: 'ms', scope: 'background', stat: (us) => pooledQuantile(us, (u) => u.ttft, 0.9) },
  { id: 'background_latency_mean_ms', label: 'Competing traffic: mean full-response latency', unit: 'ms', scope: 'background', stat: (us) => pooledMean(us, (u) => u.latency) },
  { id: 'background_latency_p90_ms', label: 'Competing traffic: p90 full-response latency', unit: 'ms', scope: 'background', stat: (us) => pooledQuantile(us, (u) => u.latency, 0.9) },
] as const satisfies readonly { id: string; label: string; unit: string; scope: 'sessions' | 'background'; stat: (units: readonly SessionUnit[]) => number }[];

function overrideRate(us: readonly SessionUnit[]): number {
  let p = 0;
  let o = 0;
  for (const u of us) {
    p += u.efficientProposals;
    o += u.overrides;
  }
  return p === 0 ? NaN : o / p;
}

// ---------------------------------------------------------------------------

function distribution(values: readonly number[]): Distribution {
  const s = [...values].sort((a, b) => a - b);
  const q = (p: number): number => quantileSorted(s, p);
  return {
    n: s.length,
    mean: mean(s),
    min: s.length === 0 ? NaN : (s[0] as number),
    p5: q(0.05),
    p25: q(0.25),
    p50: q(0.5),
    p75: q(0.75),
    p90: q(0.9),
    p95: q(0.95),
    max: s.length === 0 ? NaN : (s[s.length - 1] as number),
  };
}

function count(m: Record<string, number>, k: string): void {
  m[k] = (m[k] ?? 0) + 1;
}

function sortedRecord<T>(m: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => compareStrings(a, b)));
}

function statusCounts(rows: readonly EvaluationRow[]): Record<string, number> {
  const m: Record<string, number> = {};
  for (const r of rows) count(m, r.status);
  return sortedRecord(m);
}

/** The reasons counted by name; every other one is a fallback (`fallback_*`) or unknown. */
const NAMED_REASONS: ReadonlyMap<string, 'overrode' | 'kept' | 'stageCapable' | 'baseline'> = new Map([
  ['overrode', 'overrode'],
  ['kept', 'kept'],
  ['stage_capable', 'stageCapable'],
  ['baseline', 'baseline'],
]);

function ruleCounts(rows: readonly EvaluationRow[]): RuleCounts {
  const n = { decisions: 0, withoutDecision: 0, efficientProposals: 0, capableProposals: 0, couldAct: 0, overrode: 0, kept: 0, stageCapable: 0, baseline: 0 };
  let finalCapable = 0;
  const fallback: Record<string, number> = {};
  const other: Record<string, number> = {};
  for (const r of rows) {
    const d = r.decision;
    if (d === null) {
      n.withoutDecision++;
      continue;
    }
    n.decisions++;
    if (d.proposal === 'efficient') n.efficientProposals++;
    else if (d.proposal === 'capable') n.capableProposals++;
    if (d.couldAct) n.couldAct++;
    if (d.finalRole === 'capable') finalCapable++;
    const named = NAMED_REASONS.get(d.reason);
    if (named !== undefined) n[named]++;
    else count(d.reason.startsWith('fallback_') ? fallback : other, d.reason);
  }
  const fallbackTotal = Object.values(fallback).reduce((a, b) => a + b, 0);
  const rate = (x: number): number => (n.efficientProposals === 0 ? NaN : x / n.efficientProposals);
  return {
    ...n,
    fallback: sortedRecord(fallback),
    fallbackTotal,
    other: sortedRecord(other),
    finalCapable,
    couldActRate: rate(n.couldAct),
    overrodeRate: rate(n.overrode),
    fallbackRate: rate(fallbackTotal),
  };
}

function unitsOf(rows: readonly EvaluationRow[]): SessionUnit[] {
  const byKey = new Map<string, SessionUnit>();
  for (const r of rows) {
    const key = r.sessionId ?? `request:${r.requestId}`;
    let u = byKey.get(key);
    if (u === undefined) {
      u = newUnit(key, r.matchKey);
      byKey.set(key, u);
    }
    addRow(u, r);
  }
  return [...byKey.values()].sort((a, b) => compareStrings(a.key, b.key));
}

type Units = Readonly<Record<'sessions' | 'background', readonly SessionUnit[]>>;

function summarize(variant: string, fgRows: readonly EvaluationRow[], bgRows: readonly EvaluationRow[], units: Units): VariantSummary {
  const fg = units.sessions;
  const executed = fgRows.filter((r) => r.status === 'completed');
  const byModel: Record<string, { requests: number; tokens: number; missingUsage: number }> = {};
  let total = 0;
  let missing = 0;
  for (const r of executed) {
    const m = r.model ?? '(unknown)';
    const slot = (byModel[m] ??= { requests: 0, tokens: 0, missingUsage: 0 });
    slot.requests++;
    if (r.uncachedInputTokens === null) {
      slot.missingUsage++;
      missing++;
    } else {
      slot.tokens += r.uncachedInputTokens;
      total += r.uncachedInputTokens;
    }
  }
  const ttftValues = definedOf(executed.map((r) => r.ttftMs)).sort((a, b) => a - b);
  const bgExecuted = bgRows.filter((r) => r.status === 'completed');
  return {
    variant,
    sessions: {
      total: fg.length,
      completed: fg.filter((u) => u.completed === u.requests).length,
      withFailures: fg.filter((u) => u.completed !== u.requests).length,
      matched: fg.filter((u) => u.matchKey !== null).length,
    },
    requests: { total: fgRows.length, executed: executed.length, byStatus: statusCounts(fgRows) },
    ttftMs: distribution(ttftValues),
    latencyMs: distribution(definedOf(executed.map((r) => r.latencyMs))),
    sessionCompletionMs: distribution(definedOf(fg.map(completionMs))),
    uncachedInput: {
      byModel: sortedRecord(byModel),
      totalTokens: total,
      missingUsage: missing,
      perSession: distribution(fg.filter((u) => u.uncachedMissing === 0).map((u) => u.uncached)),
    },
    routingOverheadUs: distribution(definedOf(fgRows.filter((r) => r.decision !== null).map((r) => r.routingOverheadUs))),
    observeDurationUs: distribution(definedOf(fgRows.map((r) => r.observeDurationUs))),
    rules: ruleCounts(fgRows),
    background: {
      requests: bgRows.length,
      executed: bgExecuted.length,
      streams: units.background.length,
      byStatus: statusCounts(bgRows),
      ttftMs: distribution(definedOf(bgExecuted.map((r) => r.ttftMs))),
      latencyMs: distribution(definedOf(bgExecuted.map((r) => r.latencyMs))),
    },
    ttftValues,
  };
}

function variantOrder(names: Iterable<string>, baseline: string): string[] {
  const known = VARIANTS as readonly string[];
  return [...new Set(names)].sort((a, b) => {
    if (a === baseline) return -1;
    if (b === baseline) return 1;
    const ia = known.indexOf(a);
    const ib = known.indexOf(b);
    if (ia !== ib) return (ia === -1 ? Infinity : ia) - (ib === -1 ? Infinity : ib);
    return compareStrings(a, b);
  });
}

/**
 * Analyse outcome rows: flattened JSON objects (`outcomeToJsonRow`) or rows
 * already parsed with `parseEvaluationRows`. Never throws on bad rows: they
 * are listed in `input.problems` and left out.
 */
export function analyzeEvaluation(rows: readonly unknown[] | RowsParse<EvaluationRow>, options: AnalysisOptions = {}): EvaluationAnalysis {
  const seed = options.seed ?? 1;
  const iterations = options.iterations ?? 2000;
  const confidence = options.confidence ?? 0.95;
  const baselineName = options.baseline ?? 'baseline';
  const progress = options.onProgress ?? ((): void => undefined);
  const parsed = Array.isArray(rows) ? parseEvaluationRows(rows) : (rows as RowsParse<EvaluationRow>);
  const used = parsed.rows;
  const warnings: string[] = [];

  const byVariant = new Map<string, EvaluationRow[]>();
  for (const r of used) {
    const list = byVariant.get(r.variant) ?? [];
    list.push(r);
    byVariant.set(r.variant, list);
  }
  const names = variantOrder(byVariant.keys(), baselineName);
  const unitsByVariant = new Map<string, Units>();
  const summaries: VariantSummary[] = [];
  for (const v of names) {
    const rs = byVariant.get(v) ?? [];
    const fgRows = rs.filter((r) => !r.background);
    const bgRows = rs.filter((r) => r.background);
    const units = { sessions: unitsOf(fgRows), background: unitsOf(bgRows) };
    unitsByVariant.set(v, units);
    const s = summarize(v, fgRows, bgRows, units);
    summaries.push(s);
    progress(`${v}: ${s.sessions.total} sessions, ${s.requests.total} requests (${s.requests.executed} executed), ${s.background.requests} background`);
    if (s.uncachedInput.missingUsage > 0) warnings.push(`${v}: ${s.uncachedInput.missingUsage} executed request(s) without a usage report (left out of uncached input)`);
    if (s.rules.withoutDecision > 0) warnings.push(`${v}: ${s.rules.withoutDecision} foreground request(s) without a decision record`);
    const bgUntimed = s.background.byStatus['incomplete'] ?? 0;
    if (bgUntimed > 0) {
      warnings.push(
        `${v}: ${bgUntimed} of ${s.background.requests} competing-traffic record(s) are incomplete (no TTFT or latency): ` +
          'the outcome service did not join their lifecycle-only events as background requests timed from arrivalMs',
      );
    }
    if (Object.keys(s.rules.other).length > 0) warnings.push(`${v}: decision reasons this build does not know: ${Object.keys(s.rules.other).join(', ')}`);
  }

  const differences: Difference[] = [];
  if (!byVariant.has(baselineName)) {
    warnings.push(`no rows of the baseline variant ${JSON.stringify(baselineName)}: no differences computed`);
  } else {
    for (const v of names) {
      if (v === baselineName) continue;
      for (const m of DIFFERENCE_METRICS) {
        const a = unitsByVariant.get(v)?.[m.scope] ?? [];
        const b = unitsByVariant.get(baselineName)?.[m.scope] ?? [];
        const stat = m.stat;
        const res = bootstrapDifference(a, b, stat, { iterations, confidence, rand: streamFor(seed, 'bootstrap', m.id, v, baselineName) });
        differences.push({
          metric: m.id,
          label: m.label,
          unit: m.unit,
          variant: v,
          baseline: baselineName,
          variantValue: stat(a),
          baselineValue: stat(b),
          estimate: res.estimate,
          lo: res.lo,
          hi: res.hi,
          confidence,
          method: res.method,
          iterations: res.iterations,
          validIterations: res.validIterations,
          units: res.units,
        });
      }
      progress(`${v} vs ${baselineName}: ${DIFFERENCE_METRICS.length} differences, ${iterations} bootstrap replicates each`);
    }
    // Every session of one run shares that run's conditions (host load, the fleet's start); the session
    // bootstrap does not see that variation, and with few runs per variant nothing can estimate it.
    const attempts = Math.min(...names.map((v) => new Set((byVariant.get(v) ?? []).flatMap((r) => (r.attempt === null ? [] : [r.attempt]))).size));
    if (Number.isFinite(attempts) && attempts < 3) {
      warnings.push(
        `${attempts} attempt(s) per variant: intervals resample sessions within runs, so they leave out run-to-run variation (host load, start-up); read differences near their interval's edge with that in mind`,
      );
    }
    const unpaired = differences.filter((d) => d.method === 'independent' && DIFFERENCE_METRICS.find((m) => m.id === d.metric)?.scope === 'sessions');
    if (unpaired.length > 0) {
      const vs = [...new Set(unpaired.map((d) => d.variant))];
      warnings.push(`sessions not matched one-to-one with the baseline for ${vs.join(', ')}: independent (unpaired) resampling used`);
    }
  }

  return {
    options: { seed, iterations, confidence, baseline: baselineName },
    input: { rows: used.length + parsed.problems.length + Object.values(parsed.skipped).reduce((a, b) => a + b, 0), used: used.length, skipped: parsed.skipped, problems: parsed.problems },
    variants: summaries,
    differences,
    gaps: RECORD_GAPS,
    warnings,
  };
}
