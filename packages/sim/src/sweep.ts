/**
 * Router sweep over Dynamo's kv_router knobs (later-2026 formula) for the mean E2E latency of a
 * closed-loop replay, with seed 001's comparisons and response curve (README "Sweep").
 */
import { shuffled } from '@vantage/random';
import { seededRng, type KvRouterPolicy } from '@vantage/selection';
import { GaussianProcess, expectedImprovement } from './gp';
import type { ReplayMetrics } from './metrics';
import { routerName, runReplay, type PreparedTrace, type ReplayEngineConfig, type ReplayProgress, type RouterSpec } from './replay';
import { standardNormal } from './sessions';

export interface RouterKnobs {
  readonly overlapScoreCredit: number;
  readonly prefillLoadScale: number;
  readonly temperature: number;
}

/** Values to try per knob. */
export type KnobGrid = { readonly [K in keyof RouterKnobs]: readonly number[] };

/** Dynamo's defaults: credit 1.0, scale 1.0, temperature 0. */
const DEFAULT_KNOBS: RouterKnobs = Object.freeze({ overlapScoreCredit: 1, prefillLoadScale: 1, temperature: 0 });

/** Seed 001's search space (after its extension of prefill_load_scale to 32). */
export const SEED001_GRID: KnobGrid = Object.freeze({
  overlapScoreCredit: [0, 0.5, 1],
  prefillLoadScale: [0, 0.25, 0.5, 1, 2, 4, 8, 16, 32],
  temperature: [0, 0.2, 0.5, 1],
});

/** Credit and temperature are searched over [0, 1], prefill_load_scale over [0, SCALE_MAX]. */
const SCALE_MAX = 32;
/** prefill_load_scale is searched as u = log(1 + s/S0) / log(1 + 32/S0): logarithmic above S0, and 0 stays reachable. */
const SCALE_KNEE = 0.25;
const SCALE_LOG_MAX = Math.log1p(SCALE_MAX / SCALE_KNEE);

export function knobsToUnit(k: RouterKnobs): number[] {
  return [k.overlapScoreCredit, Math.log1p(k.prefillLoadScale / SCALE_KNEE) / SCALE_LOG_MAX, k.temperature];
}

export function unitToKnobs(u: readonly number[]): RouterKnobs {
  const c = (v: number): number => Math.min(1, Math.max(0, v));
  return {
    overlapScoreCredit: c(u[0]!),
    prefillLoadScale: Math.min(SCALE_MAX, SCALE_KNEE * Math.expm1(c(u[1]!) * SCALE_LOG_MAX)),
    temperature: c(u[2]!),
  };
}

function knobsPolicy(k: RouterKnobs): KvRouterPolicy {
  return { kind: 'kv_router', formula: 'prefill_load_scale', overlapScoreCredit: k.overlapScoreCredit, prefillLoadScale: k.prefillLoadScale, temperature: k.temperature, tieBreakByTreeSize: false };
}

export function knobsKey(k: RouterKnobs): string {
  const r = (v: number): string => String(Number(v.toPrecision(6)));
  return `credit=${r(k.overlapScoreCredit)},scale=${r(k.prefillLoadScale)},T=${r(k.temperature)}`;
}

/** Every combination of the grid's values, credit outermost. */
export function gridPoints(g: KnobGrid): RouterKnobs[] {
  const out: RouterKnobs[] = [];
  for (const overlapScoreCredit of g.overlapScoreCredit) {
    for (const prefillLoadScale of g.prefillLoadScale) {
      for (const temperature of g.temperature) out.push({ overlapScoreCredit, prefillLoadScale, temperature });
    }
  }
  return out;
}

type TrialMethod = 'grid' | 'initial' | 'ei';

export interface Trial {
  readonly index: number;
  readonly method: TrialMethod;
  readonly knobs: RouterKnobs;
  /** Mean E2E latency, ms. */
  readonly objective: number;
  readonly metrics: ReplayMetrics;
  /** For EI trials: the GP's prediction and the expected improvement when the point was chosen. */
  readonly predicted?: { readonly mean: number; readonly sd: number; readonly ei: number };
}

/** Evaluates one setting; the objective is `metrics.e2eMs.mean`. */
type Evaluator = (k: RouterKnobs) => ReplayMetrics;

function bestTrial(trials: readonly Trial[]): Trial {
  if (trials.length === 0) throw new RangeError('no trials');
  return trials.reduce((b, t) => (t.objective < b.objective ? t : b));
}

/** Evaluates settings in turn, numbering each as a trial. */
function trialRecorder(evaluate: Evaluator, onTrial?: (t: Trial) => void): { trials: Trial[]; add: (knobs: RouterKnobs, method: TrialMethod, predicted?: Trial['predicted']) => void } {
  const trials: Trial[] = [];
  const add = (knobs: RouterKnobs, method: TrialMethod, predicted?: Trial['predicted']): void => {
    const metrics = evaluate(knobs);
    const t: Trial = { index: trials.length, method, knobs, objective: metrics.e2eMs.mean, metrics, ...(predicted ? { predicted } : {}) };
    trials.push(t);
    onTrial?.(t);
  };
  return { trials, add };
}

export function gridSearch(points: readonly RouterKnobs[], evaluate: Evaluator, onTrial?: (t: Trial) => void): Trial[] {
  const { trials, add } = trialRecorder(evaluate, onTrial);
  for (const knobs of points) add(knobs, 'grid');
  return trials;
}

interface SmartSearchOptions {
  /** Total evaluations, initial design included. */
  readonly budget: number;
  /** Initial design size (Dynamo's defaults first, then a seeded Latin hypercube). Default 6. */
  readonly initial?: number;
  readonly seed?: number;
  readonly onTrial?: (t: Trial) => void;
}

export interface SmartSearchResult {
  readonly trials: Trial[];
  /** The GP fitted to every trial at the end. */
  readonly gp: { readonly lengthScales: readonly number[]; readonly logMarginalLikelihood: number };
}

/** Random candidates per EI maximisation (plus local perturbations of the best and the seed grid). */
const CANDIDATES = 2000;

function latinHypercube(n: number, d: number, seed: number): number[][] {
  const rng = seededRng(`${seed}:lhs`);
  const rand = (): number => rng.next();
  const cols: number[][] = [];
  for (let j = 0; j < d; j++) {
    const perm = shuffled(Array.from({ length: n }, (_, i) => i), rand);
    cols.push(perm.map((p) => (p + rand()) / n));
  }
  return Array.from({ length: n }, (_, i) => cols.map((c) => c[i]!));
}

function dist2(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i]! - b[i]!) ** 2;
  return s;
}

/** Bayesian optimisation (GP + expected improvement) over the unit cube of the three knobs. */
export function smartSearch(evaluate: Evaluator, opts: SmartSearchOptions): SmartSearchResult {
  const seed = opts.seed ?? 1;
  const budget = opts.budget;
  if (!Number.isInteger(budget) || budget <= 0) throw new RangeError(`budget must be a positive integer, got ${budget}`);
  const nInit = Math.min(budget, Math.max(1, opts.initial ?? 6));
  const { trials, add } = trialRecorder(evaluate, opts.onTrial);
  add(DEFAULT_KNOBS, 'initial');
  for (const u of latinHypercube(nInit - 1, 3, seed)) add(unitToKnobs(u), 'initial');

  const rng = seededRng(`${seed}:candidates`);
  const gridUnits = gridPoints(SEED001_GRID).map(knobsToUnit);
  const fitGp = (): { xs: number[][]; gp: GaussianProcess } => {
    const xs = trials.map((t) => knobsToUnit(t.knobs));
    return { xs, gp: GaussianProcess.fit(xs, trials.map((t) => t.objective)) };
  };
  while (trials.length < budget) {
    const { xs, gp } = fitGp();
    const best = bestTrial(trials);
    const bestU = knobsToUnit(best.knobs);
    const cands: number[][] = [...gridUnits];
    for (let i = 0; i < CANDIDATES; i++) cands.push([rng.next(), rng.next(), rng.next()]);
    // Local refinement around the incumbent (normals of sd 0.05 in the unit cube).
    for (let i = 0; i < CANDIDATES / 4; i++) cands.push(bestU.map((v) => Math.min(1, Math.max(0, v + 0.05 * standardNormal(rng)))));
    let pick: { u: number[]; mean: number; sd: number; ei: number } | null = null;
    for (const u of cands) {
      if (xs.some((x) => dist2(x, u) < 1e-8)) continue;
      const p = gp.predict(u);
      const ei = expectedImprovement(p.mean, p.sd, best.objective);
      if (pick === null || ei > pick.ei) pick = { u, mean: p.mean, sd: p.sd, ei };
    }
    if (pick === null) break;
    add(unitToKnobs(pick.u), 'ei', { mean: pick.mean, sd: pick.sd, ei: pick.ei });
  }
  const { gp } = fitGp();
  return { trials, gp: { lengthScales: gp.lengthScales, logMarginalLikelihood: gp.logMarginalLikelihood } };
}

// ------------------------------------------------------------------ experiment

interface SweepConfig {
  readonly tune: PreparedTrace;
  readonly validate?: PreparedTrace;
  /** Closed-loop concurrency, on both traces. */
  readonly concurrency: number;
  readonly workers: number;
  readonly engine: Omit<ReplayEngineConfig, 'timing'>;
  readonly seed: number;
  readonly method: 'grid' | 'smart';
  /** Grid values (method 'grid'). */
  readonly grid: KnobGrid;
  /** Smart search evaluations and initial design size. */
  readonly budget: number;
  readonly initial: number;
  /** prefill_load_scale values for the response curve (credit 1, temperature 0); empty for none. */
  readonly responseCurve: readonly number[];
  /** Also compare llm-d token-aware routing. */
  readonly llmd: boolean;
  /** Progress lines (stderr in the CLI). */
  readonly log: (line: string) => void;
  /** Per-replay progress (stderr in the CLI). */
  readonly onReplayProgress?: (label: string) => ((p: ReplayProgress) => void) | undefined;
}

interface ComparisonRow {
  readonly label: string;
  readonly router: string;
  readonly metrics: ReplayMetrics;
}

interface Comparison {
  readonly trace: string;
  readonly requests: number;
  readonly concurrency: number;
  readonly rows: ComparisonRow[];
}

export interface SweepReport {
  readonly objective: 'mean_e2e_ms';
  readonly settings: {
    readonly tuneTrace: string;
    readonly validateTrace: string | null;
    readonly workers: number;
    readonly concurrency: number;
    readonly engine: Omit<ReplayEngineConfig, 'timing'> & { readonly timing: string };
    readonly seed: number;
    readonly method: 'grid' | 'smart';
    readonly budget: number;
  };
  readonly trials: Trial[];
  readonly best: Trial;
  readonly gp: SmartSearchResult['gp'] | null;
  readonly responseCurve: { readonly prefillLoadScale: number; readonly metrics: ReplayMetrics }[];
  readonly comparisons: Comparison[];
  /** Tuned against default kv_router, per trace. */
  readonly deltas: ReturnType<typeof deltaOf>[];
  /** Wall-clock seconds; the only non-deterministic figure. */
  readonly wallS: number;
  readonly replays: number;
}

const pct = (after: number, before: number): number => (100 * (after - before)) / before;

function deltaOf(trace: string, before: ReplayMetrics, after: ReplayMetrics) {
  return {
    trace,
    e2eMeanPct: pct(after.e2eMs.mean, before.e2eMs.mean),
    ttftMeanPct: pct(after.ttftMs.mean, before.ttftMs.mean),
    tpotMeanPct: pct(after.tpotMs.mean, before.tpotMs.mean),
    requestThroughputPct: pct(after.requestThroughputPerS, before.requestThroughputPerS),
    reuseBefore: before.prefixCacheReusedRatio,
    reuseAfter: after.prefixCacheReusedRatio,
  };
}

export function runSweep(cfg: SweepConfig): SweepReport {
  const wall0 = performance.now();
  let replays = 0;
  const replay = (trace: PreparedTrace, router: RouterSpec): ReplayMetrics => {
    replays++;
    const label = `${trace.name} ${routerName(router)}`;
    const onProgress = cfg.onReplayProgress?.(label);
    return runReplay({
      workers: cfg.workers,
      engine: cfg.engine,
      router,
      workload: { kind: 'closed_loop', trace, concurrency: cfg.concurrency },
      seed: cfg.seed,
      ...(onProgress ? { onProgress } : {}),
    }).metrics;
  };
  const cache = new Map<string, ReplayMetrics>();
  const evaluate: Evaluator = (k) => {
    const key = knobsKey(k);
    let m = cache.get(key);
    if (m === undefined) {
      m = replay(cfg.tune, { kind: 'kv_router', policy: knobsPolicy(k) });
      cache.set(key, m);
    }
    return m;
  };
  const onTrial = (t: Trial): void => {
    const pred = t.predicted ? ` (GP ${t.predicted.mean.toFixed(1)} ± ${t.predicted.sd.toFixed(1)}, EI ${t.predicted.ei.toFixed(2)})` : '';
    cfg.log(`trial ${t.index + 1} [${t.method}] ${knobsKey(t.knobs)}: mean E2E ${t.objective.toFixed(1)} ms${pred}`);
  };

  let trials: Trial[];
  let gp: SmartSearchResult['gp'] | null = null;
  const points = gridPoints(cfg.grid);
  const budget = cfg.method === 'grid' ? points.length : cfg.budget;
  if (cfg.method === 'grid') trials = gridSearch(points, evaluate, onTrial);
  else {
    const r = smartSearch(evaluate, { budget, initial: cfg.initial, seed: cfg.seed, onTrial });
    trials = r.trials;
    gp = r.gp;
  }
  const best = bestTrial(trials);
  cfg.log(`best: ${knobsKey(best.knobs)} mean E2E ${best.objective.toFixed(1)} ms`);

  const responseCurve = cfg.responseCurve.map((s) => {
    const m = evaluate({ overlapScoreCredit: 1, prefillLoadScale: s, temperature: 0 });
    cfg.log(`response curve: prefill_load_scale ${s}: mean E2E ${m.e2eMs.mean.toFixed(1)} ms, TTFT ${m.ttftMs.mean.toFixed(1)} ms`);
    return { prefillLoadScale: s, metrics: m };
  });

  const compare = (trace: PreparedTrace, onTune: boolean): Comparison => {
    const rows: ComparisonRow[] = [];
    const push = (label: string, router: RouterSpec, m?: ReplayMetrics): void => {
      const metrics = m ?? replay(trace, router);
      rows.push({ label, router: routerName(router), metrics });
      cfg.log(`${trace.name}: ${label.padEnd(18)} mean E2E ${metrics.e2eMs.mean.toFixed(1)} ms, TTFT ${metrics.ttftMs.mean.toFixed(1)} ms, TPOT ${metrics.tpotMs.mean.toFixed(2)} ms, reuse ${metrics.prefixCacheReusedRatio.toFixed(3)}`);
    };
    push('round_robin', { kind: 'round_robin' });
    push('kv_router default', { kind: 'kv_router', policy: knobsPolicy(DEFAULT_KNOBS) }, onTune ? evaluate(DEFAULT_KNOBS) : undefined);
    push('kv_router tuned', { kind: 'kv_router', policy: knobsPolicy(best.knobs) }, onTune ? best.metrics : undefined);
    if (cfg.llmd) push('llm-d token-load', { kind: 'llmd' });
    return { trace: trace.name, requests: trace.records.length, concurrency: cfg.concurrency, rows };
  };
  const comparisons = [compare(cfg.tune, true)];
  if (cfg.validate) comparisons.push(compare(cfg.validate, false));
  const deltas = comparisons.map((c) => deltaOf(c.trace, c.rows[1]!.metrics, c.rows[2]!.metrics));
  return {
    objective: 'mean_e2e_ms',
    settings: {
      tuneTrace: cfg.tune.name,
      validateTrace: cfg.validate?.name ?? null,
      workers: cfg.workers,
      concurrency: cfg.concurrency,
      engine: { ...cfg.engine, timing: 'mocker polynomial' },
      seed: cfg.seed,
      method: cfg.method,
      budget,
    },
    trials,
    best,
    gp,
    responseCurve,
    comparisons,
    deltas,
    wallS: (performance.now() - wall0) / 1000,
    replays,
  };
}
