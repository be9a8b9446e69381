/**
 * Seed 000's named limitation, measured (`vantage study --limitation`): "Four requests about to
 * finish and four beginning long generations can have similar request counts and prefill pressure.
 * Prefill pressure can fall toward zero while the worker remains busy decoding." The controlled
 * cases (matched short/long pairs of background on every efficient worker, in a decoding and a
 * prefilling phase, beside an idle case) and what each run measures are the README's "Seed 000's
 * named limitation"; every run goes through the study's own decision path (`TwoPoolFleet.route`) on
 * a fresh fleet. Deterministic: the same options give the same rows.
 */
import { RECORD_VARIANT } from '@vantage/decision-core';
import { concatTokens, freshTokens, labelSeed } from '@vantage/random';
import type { Variant as RecordVariant } from '@vantage/records';
import { VARIANTS, type Decision, type ParameterSet, type Prediction, type Reason, type Role, type Variant } from '@vantage/rules';
import { escapeHtml as esc, fmt, lineChartSvg, page, table } from '@vantage/fitting';
import type { WorkerId } from '@vantage/types';
import { TwoPoolFleet, type FleetSpec, type ServedRequest } from './fleet';
import type { StudyResult } from './study';

type LimitationPhase = 'idle' | 'decoding' | 'prefilling';
type GenerationLength = 'short' | 'long';

interface LimitationCase {
  readonly id: string;
  readonly description: string;
  readonly phase: LimitationPhase;
  /** Background requests booked on every efficient worker. */
  readonly count: number;
  /** Shared prefix of the background prompts, warmed on each efficient worker first (0: none). */
  readonly prefixTokens: number;
  /** Fresh tokens after the prefix, per background request. */
  readonly suffixTokens: number;
  readonly outputTokens: number;
  readonly generation: GenerationLength | null;
  /** Cases that differ only in `generation` share a pair. */
  readonly pair: string | null;
}

export interface LimitationOptions {
  readonly fleet: FleetSpec;
  readonly fit: StudyResult['fit'];
  /** Background requests per efficient worker (default 4 and 16). */
  readonly counts?: readonly number[];
  /** `decoding`: the warmed shared prefix (default 16,384) and the fresh suffix (default 256) of each background prompt. */
  readonly decodingPrefixTokens?: number;
  readonly decodingSuffixTokens?: number;
  /** `prefilling`: fresh background prompt length (default 8,192). */
  readonly prefillingPromptTokens?: number;
  /** Output tokens of a short (default 8) and a long (default 2,048) background generation. */
  readonly shortOutputTokens?: number;
  readonly longOutputTokens?: number;
  /** The proposal's prompt (default 4,096 fresh tokens) and output (default 256 tokens). */
  readonly probePromptTokens?: number;
  readonly probeOutputTokens?: number;
  /** Token content seed (default 1). */
  readonly seed?: number;
  readonly onProgress?: (line: string) => void;
}

interface EstimatorError {
  readonly estimator: 'blind' | 'cache';
  /** Predicted TTFT per candidate (null when the estimator gave no valid prediction), with the problem if any. */
  readonly efficientMs: number | null;
  readonly capableMs: number | null;
  readonly problem: string | null;
  /** Predicted minus simulated TTFT. */
  readonly efficientErrorMs: number | null;
  readonly capableErrorMs: number | null;
  /** Predicted advantage T_efficient - T_capable, and its error against the simulated advantage. */
  readonly advantageMs: number | null;
  readonly advantageErrorMs: number | null;
}

interface RuleOutcome {
  readonly variant: RecordVariant;
  readonly rule: Variant;
  readonly choice: Role;
  readonly reason: Reason;
  readonly couldAct: boolean;
  readonly ttftMs: number;
  readonly e2eMs: number;
  /** Chose the candidate with the lower simulated TTFT. */
  readonly best: boolean;
  /** TTFT minus the better candidate's. */
  readonly regretMs: number;
  /** Chose the candidate with the lower simulated full-response latency (which the TTFT target does not see). */
  readonly bestE2e: boolean;
}

interface LimitationCaseResult {
  readonly case: LimitationCase;
  /** Sim time of the proposal. */
  readonly probeAtMs: number;
  /** The efficient candidate's worker (Dynamo's choice) and what the decision saw of it, and what it did not see. */
  readonly efficient: {
    readonly workerId: string;
    readonly bookedRequests: number | null;
    readonly prefillPressure: number | null;
    /** The ledger's booked requests on that worker at the proposal. */
    readonly ledgerRequests: number;
    /** Output tokens the worker's requests still had to generate at the proposal (engine state). */
    readonly remainingOutputTokens: number;
    /** Sim time from the proposal until the worker's last background request finished. */
    readonly backgroundBusyAfterMs: number;
  };
  readonly capable: { readonly bookedRequests: number | null; readonly prefillPressure: number | null };
  /** Simulated TTFT and full-response latency of the proposal on each candidate. */
  readonly measured: Readonly<Record<Role, { readonly ttftMs: number; readonly e2eMs: number }>>;
  readonly estimators: readonly EstimatorError[];
  readonly rules: readonly RuleOutcome[];
}

interface LimitationResult {
  readonly cases: readonly LimitationCaseResult[];
  readonly table: string;
  readonly html: string;
  /** The charts: efficient TTFT against booked requests (simulated and predicted), one per phase; the proposal's E2E. */
  readonly svgs: Readonly<Record<'decoding' | 'prefilling' | 'e2e', string>>;
}

/** The controlled cases: idle, then per count a short/long pair in each phase. */
export function limitationCases(o: Omit<LimitationOptions, 'fleet' | 'fit'> = {}): LimitationCase[] {
  const counts = o.counts ?? [4, 16];
  const prefix = o.decodingPrefixTokens ?? 16_384;
  const suffix = o.decodingSuffixTokens ?? 256;
  const prompt = o.prefillingPromptTokens ?? 8_192;
  const lengths: readonly [GenerationLength, number][] = [
    ['short', o.shortOutputTokens ?? 8],
    ['long', o.longOutputTokens ?? 2_048],
  ];
  if (!(lengths[0]![1] < lengths[1]![1])) throw new RangeError(`short generations (${lengths[0]![1]} tokens) must be shorter than long ones (${lengths[1]![1]})`);
  if (lengths[0]![1] < 2) throw new RangeError('short generations need at least 2 output tokens, so they are still decoding (booked) at the proposal');
  const out: LimitationCase[] = [
    { id: 'idle', description: 'no background: R = 0, P = 0', phase: 'idle', count: 0, prefixTokens: 0, suffixTokens: 0, outputTokens: 0, generation: null, pair: null },
  ];
  for (const phase of ['decoding', 'prefilling'] as const) {
    for (const count of counts) {
      if (!Number.isInteger(count) || count < 1) throw new RangeError(`background counts must be positive integers, got ${count}`);
      for (const [generation, osl] of lengths) {
        const what =
          phase === 'decoding'
            ? `${count} requests (${prefix}-token shared prefix + ${suffix} fresh) decoding, ${generation === 'short' ? `about to finish (${osl} output tokens)` : `beginning long generations (${osl} output tokens)`}; P = 0`
            : `${count} fresh ${prompt}-token prompts booked, still prefilling, ${generation} generations (${osl} output tokens)`;
        out.push({
          id: `${phase}-c${count}-${generation}`,
          description: what,
          phase,
          count,
          prefixTokens: phase === 'decoding' ? prefix : 0,
          suffixTokens: phase === 'decoding' ? suffix : prompt,
          outputTokens: osl,
          generation,
          pair: `${phase}-c${count}`,
        });
      }
    }
  }
  return out;
}

interface OneRun {
  readonly decision: Decision;
  readonly served: ServedRequest;
  readonly probeAtMs: number;
  readonly snapshot: ReadonlyMap<WorkerId, { ledgerRequests: number; remainingOutputTokens: number }>;
  readonly lastBackgroundEnd: ReadonlyMap<WorkerId, number>;
}

/** One fresh fleet: warm, book the background, send the proposal when the phase says, run to the end. */
function runOnce(o: LimitationOptions, c: LimitationCase, proposal: Role, params: ParameterSet): OneRun {
  const seed = o.seed ?? 1;
  const fleet = new TwoPoolFleet(o.fleet, { seed, rows: false, instanceId: 'study-limitation' });
  const pool = fleet.pools.efficient;
  // The same prompts for both cases of a pair (the label leaves the generation length out).
  const content = (label: string, k = 0): number => labelSeed(seed, `${c.phase}-c${c.count}-${label}`, k);
  const prefix = c.prefixTokens > 0 ? freshTokens(content('prefix'), c.prefixTokens) : null;
  if (prefix !== null) {
    for (const w of pool.workerIds) fleet.direct({ requestId: `warm-${w}`, sessionId: 'limitation-warm', role: 'efficient', tokens: prefix, osl: 1, workerId: w, expectedOutputTokens: 1 });
    fleet.run();
  }
  const probeTokens = freshTokens(labelSeed(seed, 'probe'), o.probePromptTokens ?? 4_096);
  const lastBackgroundEnd = new Map<WorkerId, number>();
  const snapshot = new Map<WorkerId, { ledgerRequests: number; remainingOutputTokens: number }>();
  let probeAtMs = -1;
  // Set by the proposal's `onDone` during `fleet.run()`.
  const sent: { served?: ServedRequest } = {};
  const probe = (): void => {
    if (probeAtMs >= 0) return;
    probeAtMs = fleet.nowMs;
    pool.workerIds.forEach((w, i) => snapshot.set(w, { ledgerRequests: pool.state.ledger.load(w, 0).requests, remainingOutputTokens: pool.engines[i]!.remainingOutputTokens }));
    const decision = fleet.route({ requestId: 'proposal', sessionId: `limitation:${c.id}`, tokens: probeTokens, osl: o.probeOutputTokens ?? 256, proposal, params }, { onDone: (r) => (sent.served = r) });
    if (decision === null) throw new Error(`limitation case ${c.id}: the ${proposal} pool offered no worker`);
  };
  let due = 0;
  let seen = 0;
  for (const w of pool.workerIds) {
    for (let j = 0; j < c.count; j++) {
      const suffix = freshTokens(content(`bg-${w.toString()}`, j), c.suffixTokens);
      due++;
      fleet.direct(
        { requestId: `bg-${w}-${j}`, sessionId: 'limitation-bg', role: 'efficient', tokens: prefix === null ? suffix : concatTokens(prefix, suffix), osl: c.outputTokens, workerId: w, expectedOutputTokens: c.outputTokens },
        {
          onFirstToken: () => {
            seen++;
            if (c.phase === 'decoding' && seen === due) probe();
          },
          onDone: (r) => lastBackgroundEnd.set(w, Math.max(lastBackgroundEnd.get(w) ?? 0, r.endMs)),
        },
      );
    }
  }
  if (c.phase !== 'decoding' || due === 0) probe();
  fleet.run();
  const { served } = sent;
  if (served === undefined || served.decision === null) throw new Error(`limitation case ${c.id}: the proposal was not served`);
  return { decision: served.decision, served, probeAtMs, snapshot, lastBackgroundEnd };
}

const ttftOf = (s: ServedRequest): number => s.firstTokenMs - s.arrivalMs;
const e2eOf = (s: ServedRequest): number => s.endMs - s.arrivalMs;
const predicted = (p: Prediction | undefined): number | null => (p !== undefined && p.ok ? p.ms : null);
const diff = (a: number | null, b: number): number | null => (a === null ? null : a - b);

const observationOf = (served: ServedRequest, role: Role) => served.record?.observations.find((x) => x.role === role);
function observed(served: ServedRequest, role: Role): { bookedRequests: number | null; prefillPressure: number | null } {
  const o = observationOf(served, role);
  return { bookedRequests: o?.bookedRequests ?? null, prefillPressure: o?.prefillPressure ?? null };
}
/** The candidate with the lower simulated latency (efficient on a tie). */
const betterBy = (m: LimitationCaseResult['measured'], k: 'ttftMs' | 'e2eMs'): Role => (m.capable[k] < m.efficient[k] ? 'capable' : 'efficient');

function runCase(o: LimitationOptions, c: LimitationCase): LimitationCaseResult {
  const v = o.fit.variants;
  // Both candidates measured: Stage's baseline serves the efficient proposal; a capable proposal is never changed.
  const onEfficient = runOnce(o, c, 'efficient', v.stage);
  const onCapable = runOnce(o, c, 'capable', v.cache);
  if (onEfficient.served.role !== 'efficient' || onCapable.served.role !== 'capable') throw new Error(`limitation case ${c.id}: a measuring run was not served where proposed`);
  const measured = {
    efficient: { ttftMs: ttftOf(onEfficient.served), e2eMs: e2eOf(onEfficient.served) },
    capable: { ttftMs: ttftOf(onCapable.served), e2eMs: e2eOf(onCapable.served) },
  };
  const better = betterBy(measured, 'ttftMs');
  const betterE2e = betterBy(measured, 'e2eMs');
  const rules: RuleOutcome[] = [];
  for (const rule of VARIANTS) {
    const run = runOnce(o, c, 'efficient', v[rule]);
    const ttftMs = ttftOf(run.served);
    rules.push({
      variant: RECORD_VARIANT[rule],
      rule,
      choice: run.decision.choice,
      reason: run.decision.reason,
      couldAct: run.decision.couldAct,
      ttftMs,
      e2eMs: e2eOf(run.served),
      best: run.decision.choice === better,
      regretMs: ttftMs - measured[better].ttftMs,
      bestE2e: run.decision.choice === betterE2e,
    });
  }
  // The predictions every estimator variant's decision recorded (both estimators, both candidates).
  const d = onCapable.decision;
  const estimators: EstimatorError[] = (['blind', 'cache'] as const).map((estimator) => {
    const pe = d.predictions.efficient?.[estimator];
    const pc = d.predictions.capable?.[estimator];
    const efficientMs = predicted(pe);
    const capableMs = predicted(pc);
    const problems = [pe, pc].flatMap((p, i) => (p === undefined ? [`${i === 0 ? 'efficient' : 'capable'}: no prediction`] : p.ok ? [] : [`${i === 0 ? 'efficient' : 'capable'}: ${p.problem} (${p.message})`]));
    const advantageMs = efficientMs === null || capableMs === null ? null : efficientMs - capableMs;
    return {
      estimator,
      efficientMs,
      capableMs,
      problem: problems.length > 0 ? problems.join('; ') : null,
      efficientErrorMs: diff(efficientMs, measured.efficient.ttftMs),
      capableErrorMs: diff(capableMs, measured.capable.ttftMs),
      advantageMs,
      advantageErrorMs: diff(advantageMs, measured.efficient.ttftMs - measured.capable.ttftMs),
    };
  });
  const w = observationOf(onCapable.served, 'efficient')?.workerId ?? null;
  if (w === null) throw new Error(`limitation case ${c.id}: the decision recorded no efficient candidate worker`);
  const snap = onCapable.snapshot.get(w);
  if (snap === undefined) throw new Error(`limitation case ${c.id}: worker ${w} is not in the efficient pool`);
  const lastEnd = onCapable.lastBackgroundEnd.get(w);
  return {
    case: c,
    probeAtMs: onCapable.probeAtMs,
    efficient: {
      workerId: w.toString(),
      ...observed(onCapable.served, 'efficient'),
      ledgerRequests: snap.ledgerRequests,
      remainingOutputTokens: snap.remainingOutputTokens,
      backgroundBusyAfterMs: lastEnd === undefined ? 0 : Math.max(0, lastEnd - onCapable.probeAtMs),
    },
    capable: observed(onCapable.served, 'capable'),
    measured,
    estimators,
    rules,
  };
}

export function runLimitationStudy(o: LimitationOptions): LimitationResult {
  const progress = o.onProgress ?? (() => {});
  const cases = limitationCases(o);
  const results: LimitationCaseResult[] = [];
  for (const c of cases) {
    const r = runCase(o, c);
    results.push(r);
    progress(`limitation ${results.length}/${cases.length}: ${c.id}: R ${r.efficient.bookedRequests}, P ${fmt(r.efficient.prefillPressure)}, remaining ${r.efficient.remainingOutputTokens} output tokens; TTFT efficient ${fmt(r.measured.efficient.ttftMs)} ms, capable ${fmt(r.measured.capable.ttftMs)} ms`);
  }
  // The case is only controlled if each pair's decision inputs match: refuse to report one that is not.
  for (const r of results) {
    const mate = results.find((x) => x !== r && x.case.pair !== null && x.case.pair === r.case.pair);
    if (mate === undefined) continue;
    if (r.efficient.bookedRequests !== r.case.count || mate.efficient.bookedRequests !== r.case.count || r.efficient.prefillPressure !== mate.efficient.prefillPressure) {
      throw new Error(
        `limitation pair ${r.case.pair}: the decision saw R ${r.efficient.bookedRequests} / ${mate.efficient.bookedRequests} and P ${r.efficient.prefillPressure} / ${mate.efficient.prefillPressure}, not the same booked count ${r.case.count} and pressure (a short generation finished before the proposal: give the decoding background a suffix that prefills in one pass)`,
      );
    }
  }
  const svgs = { decoding: ttftChart(results, 'decoding'), prefilling: ttftChart(results, 'prefilling'), e2e: e2eChart(results) };
  return { cases: results, table: renderLimitationTable(results), html: renderLimitationHtml(results, svgs), svgs };
}

const signed = (v: number | null): string => (v === null || !Number.isFinite(v) ? '–' : `${v >= 0 ? '+' : ''}${v.toFixed(1)}`);

function textTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]): string => r.map((x, i) => (i === 0 ? x.padEnd(width[i]!) : x.padStart(width[i]!))).join('  ');
  return [line(head), line(width.map((n) => '-'.repeat(n))), ...rows.map(line)].join('\n');
}

/** What the decision saw of the efficient candidate and what it did not, and both candidates' simulated latencies: the cases' first columns in both reports. */
const CASE_HEAD = ['case', 'R', 'P', 'remaining out', 'busy after ms', 'TTFT eff', 'TTFT cap', 'E2E eff', 'E2E cap'];
function caseCells(r: LimitationCaseResult): string[] {
  const { efficient: e, measured: m } = r;
  return [r.case.id, String(e.bookedRequests ?? '–'), fmt(e.prefillPressure, 2), String(e.remainingOutputTokens), fmt(e.backgroundBusyAfterMs, 0), fmt(m.efficient.ttftMs), fmt(m.capable.ttftMs), fmt(m.efficient.e2eMs, 0), fmt(m.capable.e2eMs, 0)];
}

/** The two tables `vantage study --limitation` prints: what the decision saw and how the estimators did; what each rule chose. */
function renderLimitationTable(results: readonly LimitationCaseResult[]): string {
  const est = (r: LimitationCaseResult, e: 'blind' | 'cache'): EstimatorError => r.estimators.find((x) => x.estimator === e)!;
  const ESTIMATORS = ['blind', 'cache'] as const;
  const cases = textTable(
    [...CASE_HEAD, 'blind eff (err)', 'cache eff (err)', 'blind cap (err)', 'cache cap (err)', 'adv err blind', 'adv err cache'],
    results.map((r) => [
      ...caseCells(r),
      ...ESTIMATORS.map((e) => `${fmt(est(r, e).efficientMs)} (${signed(est(r, e).efficientErrorMs)})`),
      ...ESTIMATORS.map((e) => `${fmt(est(r, e).capableMs)} (${signed(est(r, e).capableErrorMs)})`),
      ...ESTIMATORS.map((e) => signed(est(r, e).advantageErrorMs)),
    ]),
  );
  const variants = results[0]?.rules.map((x) => x.variant) ?? [];
  const rules = textTable(
    ['case', 'better TTFT', 'better E2E', ...variants],
    results.map((r) => [
      r.case.id,
      betterBy(r.measured, 'ttftMs'),
      betterBy(r.measured, 'e2eMs'),
      ...r.rules.map((x) => `${x.choice === 'capable' ? 'cap' : 'eff'} ${fmt(x.ttftMs)}${x.best ? '' : ' !'}`),
    ]),
  );
  return [
    'What the decision saw of the efficient candidate (R, P), what it did not (output tokens still to generate, time until its background finished), simulated TTFT / E2E (ms) and each estimator\'s prediction (predicted - simulated):',
    cases,
    '',
    'Each rule\'s choice and the proposal\'s TTFT (ms); "!" marks the candidate with the higher simulated TTFT (the better candidate by TTFT and by full-response latency beside):',
    rules,
  ].join('\n');
}

/** One phase's cases (idle first, as R = 0) of one generation length, by booked requests. */
function series(results: readonly LimitationCaseResult[], phase: 'decoding' | 'prefilling', g: GenerationLength): LimitationCaseResult[] {
  const idle = results.filter((r) => r.case.phase === 'idle');
  return [...idle, ...results.filter((r) => r.case.phase === phase && r.case.generation === g)].sort((a, b) => a.case.count - b.case.count);
}

/** Both charts: against R, at one size. */
const CHART = { xLabel: 'booked requests on the efficient worker (R)', width: 700, height: 340 } as const;

/** Efficient TTFT against R: simulated for short and long generations, each estimator's prediction (one line: equal inputs), the capable candidate's. */
function ttftChart(results: readonly LimitationCaseResult[], phase: 'decoding' | 'prefilling'): string {
  const short = series(results, phase, 'short');
  const long = series(results, phase, 'long');
  const pred = (e: 'blind' | 'cache'): (readonly [number, number])[] => short.map((r) => [r.case.count, r.estimators.find((x) => x.estimator === e)?.efficientMs ?? NaN] as const);
  const title = phase === 'decoding' ? 'Efficient candidate TTFT, background decoding (P = 0)' : 'Efficient candidate TTFT, background still prefilling';
  return lineChartSvg({
    ...CHART,
    title,
    yLabel: 'TTFT (ms)',
    series: [
      { name: 'simulated, short generations', points: short.map((r) => [r.case.count, r.measured.efficient.ttftMs] as const) },
      { name: 'simulated, long generations', points: long.map((r) => [r.case.count, r.measured.efficient.ttftMs] as const) },
      { name: 'cache-blind predicted (same inputs for short and long)', points: pred('blind') },
      { name: 'cache-aware predicted (same inputs for short and long)', points: pred('cache') },
      { name: 'capable candidate, simulated', points: short.map((r) => [r.case.count, r.measured.capable.ttftMs] as const) },
    ],
  });
}

/** The proposal's full-response latency against R on the efficient candidate, per phase and generation length, beside the capable candidate's. */
function e2eChart(results: readonly LimitationCaseResult[]): string {
  const efficient = (['decoding', 'prefilling'] as const).flatMap((phase) =>
    (['short', 'long'] as const).map((g) => ({ name: `efficient, ${phase}, ${g} generations`, points: series(results, phase, g).map((r) => [r.case.count, r.measured.efficient.e2eMs] as const) })),
  );
  return lineChartSvg({
    ...CHART,
    title: 'Proposal full-response latency (E2E), which the TTFT target does not see',
    yLabel: 'E2E (ms)',
    series: [...efficient, { name: 'capable candidate', points: series(results, 'decoding', 'short').map((r) => [r.case.count, r.measured.capable.e2eMs] as const) }],
  });
}

/** The report section: the cases, the two charts, the estimator errors and every rule's choice. */
function renderLimitationHtml(results: readonly LimitationCaseResult[], svgs: LimitationResult['svgs']): string {
  const out: string[] = [];
  out.push('<h1>Offline study: equal booked requests, different remaining generations</h1>');
  out.push(
    '<p>Seed 000\'s named limitation as a controlled case on the simulated fleet. Every efficient worker carries the same number of booked background requests in matched pairs that differ only in output length (short: about to finish; long: beginning a long generation), so the decision sees the same booked count R and prefill pressure P for both; in the <em>decoding</em> phase the proposal arrives once every background request has its first token (P = 0 while the worker is still decoding), in the <em>prefilling</em> phase right after the bookings. The capable pool is idle. Each case runs on fresh identical fleets through the study\'s decision path: the proposal served on each candidate measures both TTFTs, and Stage proposing efficient under each variant\'s fitted parameter set gives each rule\'s choice. Predictions are the decisions\' own; error is predicted minus simulated TTFT. TTFT is engine time on the simulated clock.</p>',
  );
  out.push('<h2>Cases</h2><p>R and P: what the decision saw of the efficient candidate; remaining out: output tokens its requests still had to generate; busy after: how long its background ran on after the proposal; TTFT and E2E in ms.</p>');
  out.push(table([...CASE_HEAD, 'ledger requests', 'what'], results.map((r) => [...caseCells(r), String(r.efficient.ledgerRequests), r.case.description]), esc));
  out.push('<h2>Efficient candidate TTFT against booked requests</h2>');
  out.push(svgs.decoding);
  out.push(svgs.prefilling);
  out.push('<h2>The proposal\'s full-response latency</h2>');
  out.push(svgs.e2e);
  out.push('<h2>Estimators: predicted TTFT and error (predicted − simulated, ms)</h2>');
  const estimatorRows = results.flatMap((r) =>
    r.estimators.map((e) => [r.case.id, e.estimator === 'blind' ? 'cache-blind' : 'cache-aware', fmt(e.efficientMs), signed(e.efficientErrorMs), fmt(e.capableMs), signed(e.capableErrorMs), fmt(e.advantageMs), signed(e.advantageErrorMs), e.problem ?? '']),
  );
  out.push(table(['case', 'estimator', 'efficient predicted', 'efficient error', 'capable predicted', 'capable error', 'advantage predicted', 'advantage error', 'problem'], estimatorRows, esc));
  out.push('<h2>Rules: choice, reason and the proposal\'s TTFT</h2><p>A choice in <span class="warn">red</span> is the candidate with the higher simulated TTFT.</p>');
  const ruleRows = results.flatMap((r) =>
    r.rules.map((x) => [esc(r.case.id), esc(x.variant), x.best ? x.choice : `<span class="warn">${x.choice}</span>`, esc(x.reason), x.couldAct ? 'yes' : 'no', fmt(x.ttftMs), fmt(x.e2eMs, 0), signed(x.regretMs), x.bestE2e ? 'yes' : 'no']),
  );
  out.push(table(['case', 'variant', 'choice', 'reason', 'could act', 'TTFT (ms)', 'E2E (ms)', 'TTFT − better candidate (ms)', 'better by E2E'], ruleRows));
  return page('vantage offline study: remaining generation work', out.join('\n'));
}
