/**
 * The main job, run by `npm start` once the brokers and services are healthy: seed 000's loop,
 * small, through the live pipeline. Its phases (offline study, calibration, fit, evaluation,
 * report) are the steps listed under `npm start` in the top-level README; everything lands in
 * the output directory (out/, ignored by git) and the last lines say where.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  evaluationSchedule,
  formatBackgroundSpec,
  parseBackgroundSpec,
  calibrationParameterSet,
  parseProposalSpec,
  type EvaluationAnalysis,
  type EvaluationSchedule,
  type ScheduledRun,
} from '@vantage/evaluation';
import type { FitReport } from '@vantage/fitting';
import { loadParameterSet, serializeParameterSet, type ParameterSet, type Variant } from '@vantage/rules';
import { RECORD_VARIANT } from '@vantage/decision-core';
import { comparisonHtml, engineSideAnalysis, findingLines, offlineOperatingPoint, type OfflineSettings, type OfflineStudy } from './job-study';
import { envInt, waitFor } from './exec';
import { REPO_ROOT } from './paths';

export const OUT_DIR = join(REPO_ROOT, 'out');

/** A rule variant by the name decision records give it. */
const RULE_VARIANT = Object.fromEntries(Object.entries(RECORD_VARIANT).map(([k, v]) => [v, k as Variant])) as Record<string, Variant>;

interface JobConfig extends Omit<OfflineSettings, 'proposal'> {
  /** Stage proposal model (`--proposal` of the load generator). */
  readonly proposal: string;
  /**
   * Competing traffic in every evaluation run (`--background` of the load generator:
   * STREAMS:REQUESTS:GAP_MS:SEED[:CAPABLE_FRACTION], or `off`): the same seeded load for every
   * variant and attempt, booked by Dynamo's choice, lifecycle marked background. `pick` (the
   * default): the level the offline study finds the rules have the most to decide at.
   */
  readonly background: string;
  readonly timeScale: number;
  readonly topics: { readonly outcomes: string };
}

/** `env[key]` (or `dflt` when unset or empty), which `parse` must accept. */
function specSetting(env: NodeJS.ProcessEnv, key: string, dflt: string, parse: (spec: string) => unknown): string {
  const v = env[key];
  const spec = v === undefined || v === '' ? dflt : v;
  try {
    parse(spec);
  } catch (e) {
    throw new Error(`${key}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return spec;
}

/**
 * The evaluation schedule the runs follow, with the Stage proposal model and the competing traffic
 * they are given (the load generator's `--proposal` and `--background`), so `schedule.json` records
 * what the runs actually used.
 */
export function jobSchedule(cfg: JobConfig): EvaluationSchedule {
  if (cfg.background === 'pick') throw new Error('jobSchedule: the competing traffic is still to be picked (background `pick`)');
  return evaluationSchedule({
    attempts: cfg.attempts,
    sessionsPerAttempt: cfg.sessions,
    seed: cfg.scheduleSeed,
    proposal: parseProposalSpec(cfg.proposal),
    background: parseBackgroundSpec(cfg.background),
  });
}

export function defaultJobConfig(env: NodeJS.ProcessEnv = process.env): JobConfig {
  const int = (k: string, d: number): number => envInt(env, k, d);
  const preset = env['VANTAGE_JOB_CALIBRATION'] ?? 'job';
  if (preset !== 'tiny' && preset !== 'small' && preset !== 'job' && preset !== 'full') throw new Error(`VANTAGE_JOB_CALIBRATION must be tiny, small, job or full, got ${preset}`);
  return {
    preset,
    calibrationSeed: 1,
    destinationLimit: int('VANTAGE_JOB_DESTINATION_LIMIT', 8),
    attempts: int('VANTAGE_JOB_ATTEMPTS', 2),
    sessions: int('VANTAGE_JOB_SESSIONS', 8),
    // The small and job plans' Q grid ends at 16,384 tokens; a longer prompt is out of range and every estimator
    // variant would fall back to Stage on it (seed 000), which measures the grid, not the rule.
    maxContextTokens: 16_384,
    proposal: specSetting(env, 'VANTAGE_JOB_PROPOSAL', 'fraction:0.2:7', parseProposalSpec),
    background: specSetting(env, 'VANTAGE_JOB_BACKGROUND', 'pick', (v) => v === 'pick' || parseBackgroundSpec(v)),
    scheduleSeed: int('VANTAGE_JOB_SEED', 1),
    bootstrap: int('VANTAGE_JOB_BOOTSTRAP', 1000),
    timeScale: 4,
    topics: { outcomes: 'vantage.outcomes.v1' },
  };
}

interface JobContext {
  readonly natsUrl: string;
  readonly kafkaBrokers: string;
  /** VANTAGE_NATS_* / VANTAGE_KAFKA_* security settings for the job's tools (secured brokers: the admin role). */
  readonly toolEnv?: Readonly<Record<string, string>>;
  readonly log: (m: string) => void;
  /** The file the decision service polls. */
  readonly paramsFile: string;
  /** Port of the decision service's /metrics (to see which parameter set it runs). */
  readonly decisionPort: () => number;
  /** Restart the fleet: new engines with empty KV caches (matched starting conditions). */
  readonly restartFleet: () => Promise<number>;
  readonly outDir?: string;
  readonly config?: JobConfig;
  /** Run only the first N evaluation runs of the schedule (tests). */
  readonly maxEvaluationRuns?: number;
}

export type JobResult = Awaited<ReturnType<typeof runJob>>;

/** Writes a parameter set (atomically enough for the decision service's mtime/size poll). */
export function writeParameterSet(path: string, set: ParameterSet): void {
  writeFileSync(path, serializeParameterSet(set));
}

/** A tool's output, shown to the user line by line. */
const echo = (label: string, text: string): void => {
  process.stderr.write(text.split('\n').map((l) => (l.trim() ? `[${label}] ${l}\n` : '')).join(''));
};

export function runNode(args: string[], label: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
      cwd: REPO_ROOT,
      env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VANTAGE_'))), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    // Progress lines of the child go straight to the user.
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      echo(label, d.toString());
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${label} exited with ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}`))));
  });
}

const lines = (file: string): string[] => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '') : []);

/** Waits until the decision service reports `version` as its active parameter set. */
export async function waitForParameterSet(port: number, version: string): Promise<void> {
  const needle = `version="${version}"`;
  const loaded = (): Promise<boolean> =>
    fetch(`http://127.0.0.1:${port}/metrics`)
      .then(async (r) => (await r.text()).split('\n').some((l) => l.startsWith('vantage_decision_parameter_set_info') && l.includes(needle) && / 1$/.test(l)))
      .catch(() => false); // restarting or not up yet
  await waitFor(`the decision service's parameter set ${version}`, loaded, 15_000);
}

export async function runJob(ctx: JobContext) {
  const { log } = ctx;
  const cfg = ctx.config ?? defaultJobConfig();
  const out = ctx.outDir ?? OUT_DIR;
  mkdirSync(out, { recursive: true });
  const phasesMs: Record<string, number> = {};
  const jobStart = Date.now();
  let phaseStart = Date.now();
  const phase = (name: string): void => {
    phasesMs[name] = Date.now() - phaseStart;
    log(`${name} done in ${(phasesMs[name] / 1000).toFixed(1)} s (job ${((Date.now() - jobStart) / 1000).toFixed(0)} s so far)`);
    phaseStart = Date.now();
  };
  // The tools run with no VANTAGE_* of the caller's except the security settings meant for them.
  const node = (args: string[], label: string): Promise<string> => runNode(args, label, ctx.toolEnv);
  const cli = (args: string[], label: string): Promise<string> => node(['packages/cli/src/main.ts', ...args], label);
  const useParams = async (set: ParameterSet): Promise<void> => {
    writeParameterSet(ctx.paramsFile, set);
    await waitForParameterSet(ctx.decisionPort(), set.version);
  };

  /** Reads the outcomes topic from `since` into `file` until it holds an outcome of every one of `ids` (or time runs out). */
  const readBack = async (since: string, file: string, what: string, ids: ReadonlySet<string>, timeoutMs = 120_000): Promise<string[]> => {
    const deadline = Date.now() + timeoutMs;
    let before = -1;
    for (;;) {
      await cli(['replay', '--brokers', ctx.kafkaBrokers, '--topic', cfg.topics.outcomes, '--since', since, '--format', 'jsonl', '--out', file], 'replay');
      const rows = lines(file);
      const done = countIds(rows, ids) >= ids.size || Date.now() > deadline;
      // Nothing new since the last read: the rest are requests that never reached a worker (route errors).
      if (!done && rows.length === before) log(`${rows.length} ${what} records in Kafka, none new since the last read; going on without the rest`);
      if (done || rows.length === before) {
        log(`${countIds(rows, ids)}/${ids.size} ${what} records read back from Kafka into ${file}`);
        return rows;
      }
      before = rows.length;
      log(`${rows.length} ${what} records in Kafka so far; waiting for the rest`);
      await sleep(3_000);
    }
  };

  // ---- 0. Offline study: the operating point and the prediction ------------------------------------
  log(`offline study: plan ${cfg.preset}, fit and the five-variant schedule on the simulator with the live pools${cfg.background === 'pick' ? ', at each level of competing traffic on the efficient pool' : `, competing traffic ${cfg.background}`}`);
  const offline: OfflineStudy = offlineOperatingPoint(
    { ...cfg, proposal: parseProposalSpec(cfg.proposal) },
    { ...(cfg.background === 'pick' ? {} : { fixed: parseBackgroundSpec(cfg.background) }), progress: (l) => log(l) },
  );
  const background = offline.chosen.background === null ? 'off' : formatBackgroundSpec(offline.chosen.background);
  const live: JobConfig = { ...cfg, background };
  mkdirSync(join(out, 'offline'), { recursive: true });
  writeFileSync(join(out, 'offline', 'load.html'), offline.loadHtml);
  writeFileSync(
    join(out, 'offline', 'points.json'),
    `${JSON.stringify(offline.points.map((p) => ({ label: p.label, background: p.background, efficientUtilisation: p.efficientUtilisation, capableUtilisation: p.capableUtilisation, overrides: p.overrides, decisionBalance: p.decisionBalance, variants: p.analysis.variants.map((v) => ({ variant: v.variant, rules: v.rules, ttftMs: v.ttftMs })), differences: p.analysis.differences })), null, 1)}\n`,
  );
  writeFileSync(join(out, 'offline', 'analysis.json'), `${JSON.stringify(offline.chosen.analysis, null, 1)}\n`);
  log(`operating point: ${offline.chosen.label} (efficient pool ${(100 * offline.chosen.efficientUtilisation).toFixed(0)} % busy offline; ${offline.why}); live competing traffic --background ${background}`);
  phase('offline study');

  // ---- 1. Calibration ------------------------------------------------------------------------------
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const calSet = calibrationParameterSet(cfg.destinationLimit, stamp);
  await useParams(calSet);
  const calSince = new Date(Date.now() - 1_000).toISOString();
  log(`calibration (plan ${cfg.preset}, destination limit ${cfg.destinationLimit}) under parameter set ${calSet.version}`);
  const calRequests = join(out, 'calibration-requests.jsonl');
  const calSummaryText = await node(
    [
      'services/fleet/src/calibrate.ts',
      '--preset', cfg.preset,
      '--seed', String(cfg.calibrationSeed),
      '--destination-limit', String(cfg.destinationLimit),
      '--nats', ctx.natsUrl,
      '--out', calRequests,
    ],
    'calibrate',
  );
  const calSummary = JSON.parse(calSummaryText.trim().split('\n').pop() ?? '{}') as Record<string, number>;
  writeFileSync(join(out, 'calibration-summary.json'), `${JSON.stringify(calSummary)}\n`);
  log(`calibration finished: ${JSON.stringify(calSummary)}`);
  const calIds = new Set(lines(calRequests).map((l) => (JSON.parse(l) as { requestId: string }).requestId));
  const calOutcomes = join(out, 'calibration-outcomes.jsonl');
  await readBack(calSince, calOutcomes, 'calibration outcome', calIds);
  phase('calibration');

  // ---- 2. Fit --------------------------------------------------------------------------------------
  const fittedFile = join(out, 'params-fitted.json');
  const fitReport = join(out, 'fit-report.html');
  const fitArgs = [
    'fit',
    '--input', calOutcomes,
    '--out-params', fittedFile,
    '--out-report', fitReport,
    '--out-json', join(out, 'fit.json'),
    '--out-variants', out,
    '--destination-limit', String(cfg.destinationLimit),
    '--lenient',
  ];
  // Q tables come from the calibration's Q set (the no-contention grid measured for Q alone, session ids
  // `cal:<condition>:<repeat>:qgrid`); only the contention conditions are split (`vantage fit`'s default).
  const fitText = await cli(fitArgs, 'fit');
  echo('fit', fitText);
  const fitted = loadParameterSet(readFileSync(fittedFile, 'utf8'));
  if (!fitted.ok) throw new Error(`the fit wrote an invalid parameter set: ${fitted.errors.join('; ')}`);
  log(`fitted parameter set ${fitted.value.version} -> ${fittedFile}; fit report ${fitReport}`);
  phase('fit');

  // ---- 3. Evaluation -------------------------------------------------------------------------------
  const schedule = jobSchedule(live);
  const runs: ScheduledRun[] = schedule.runs.slice(0, ctx.maxEvaluationRuns ?? schedule.runs.length);
  writeFileSync(join(out, 'schedule.json'), `${JSON.stringify(schedule, null, 1)}\n`);
  log(`evaluation: ${runs.length} runs (${cfg.attempts} attempts x ${schedule.variants.length} variants in seeded random order, ${cfg.sessions} matched sessions each, Stage proposal ${cfg.proposal})`);
  if (live.background !== 'off') {
    const bg = parseBackgroundSpec(live.background);
    log(`competing traffic in every run: ${live.background} (${bg?.streams} streams x ${bg?.requestsPerStream} requests, mean gap ${bg?.meanGapMs} sim ms, seeded, the same for every variant and attempt; Dynamo's choice, booked, lifecycle marked background)`);
  }
  const evalSince = new Date(Date.now() - 1_000).toISOString();
  for (const run of runs) {
    const variant = RULE_VARIANT[run.variant];
    if (variant === undefined) throw new Error(`schedule names variant ${run.variant}, which the decision service does not know`);
    const restartMs = await ctx.restartFleet();
    const set = loadParameterSet(readFileSync(join(out, `params-${variant}.json`), 'utf8'));
    if (!set.ok) throw new Error(`params-${variant}.json is invalid: ${set.errors.join('; ')}`);
    await useParams(set.value);
    log(`run ${run.order + 1}/${runs.length}: attempt ${run.attempt}, ${run.variant} (${set.value.version}); fleet restarted with empty caches in ${(restartMs / 1000).toFixed(1)} s`);
    const file = join(out, `requests-${run.attempt}-${run.variant}.jsonl`);
    const summaryText = await node(
      [
        'services/fleet/src/loadgen.ts',
        '--sessions', String(cfg.sessions),
        '--seed', String(run.sessionSeed),
        '--max-context', String(cfg.maxContextTokens),
        '--eval', `${run.attempt}:${run.variant}`,
        '--proposal', cfg.proposal,
        ...(live.background === 'off' ? [] : ['--background', live.background]),
        '--nats', ctx.natsUrl,
        '--time-scale', String(cfg.timeScale),
        '--max-duration-ms', '300000',
        '--out', file,
      ],
      `load ${run.attempt}:${run.variant}`,
    );
    const summaryLine = summaryText.trim().split('\n').pop() ?? '{}';
    log(`run ${run.order + 1}/${runs.length} done: ${summaryLine.slice(0, 200)}`);
  }
  phase('evaluation');

  // ---- 4. Report -----------------------------------------------------------------------------------
  const outcomes = join(out, 'outcomes.jsonl');
  const requests = requestLines(out, runs);
  const evalRows = await readBack(evalSince, outcomes, 'evaluation outcome', new Set(requests.map(({ r }) => r.requestId)));
  const report = join(out, 'report.html');
  const evalText = await cli(['evaluate', '--input', outcomes, '--out', report, '--json', join(out, 'analysis.json'), '--bootstrap', String(cfg.bootstrap), '--lenient'], 'report');
  echo('evaluate', evalText);
  // The engine's own TTFT (sim ms, from the load generator) beside the report's wall-clock TTFT: on a
  // shared host, time slicing adds wall time to routing and dispatch that no rule causes.
  const engine = engineSummary(requests);
  const liveWall = JSON.parse(readFileSync(join(out, 'analysis.json'), 'utf8')) as EvaluationAnalysis;
  // Engine-measured TTFT (sim ms) of every request the load generator sent, by request id.
  const engineTtftById = new Map(requests.map(({ r }) => [r.requestId, r.status === 'done' ? r.ttftMs : null]));
  const liveEngine = engineSideAnalysis(evalRows, engineTtftById, cfg.scheduleSeed, cfg.bootstrap);
  writeFileSync(join(out, 'analysis-engine.json'), `${JSON.stringify(liveEngine, null, 1)}\n`);
  const liveFit = JSON.parse(readFileSync(join(out, 'fit.json'), 'utf8')) as FitReport;
  const comparison = { offline, liveWall, liveEngine, liveFit, liveBackground: background };
  const studyHtml = join(out, 'study.html');
  writeFileSync(studyHtml, comparisonHtml(comparison));
  phase('report');
  writeFileSync(join(out, 'engine-summary.json'), `${JSON.stringify(engine, null, 1)}\n`);
  log('TTFT in the report is wall clock (time scale 4) and includes routing and host load; the engine\'s own TTFT per variant, in sim ms:');
  for (const [variant, e] of Object.entries(engine)) {
    log(`engine-side ${variant.padEnd(14)} ${e.requests} requests: engine TTFT mean ${e.engineTtftMeanMs} sim ms (p90 ${e.engineTtftP90Ms}), wall route ${e.routeWallMeanMs} ms, reasons ${JSON.stringify(e.reasons)}`);
    if (e.background.requests > 0) {
      const g = e.background;
      log(`engine-side ${variant.padEnd(14)} ${g.requests} competing requests: engine TTFT mean ${g.engineTtftMeanMs} sim ms (p90 ${g.engineTtftP90Ms}), full response mean ${g.engineLatencyMeanMs} sim ms`);
    }
  }
  log(`fit report:        ${fitReport}`);
  log(`fitted parameters: ${fittedFile} (version ${fitted.value.version}; per variant: ${join(out, 'params-<variant>.json')})`);
  log(`data:              ${calOutcomes} (calibration, from Kafka), ${outcomes} (evaluation, from Kafka), ${join(out, 'requests-*.jsonl')} (load generator)`);
  log(`report:            ${report}`);
  log(`offline vs live:   ${studyHtml} (offline levels: ${join(out, 'offline', 'load.html')})`);
  log(`what the study found at ${offline.chosen.label}, live, per variant (engine-side TTFT in sim ms, intervals from a session bootstrap):`);
  for (const l of findingLines(comparison)) log(l);
  return { fittedVersion: fitted.value.version, report, phasesMs };
}

/** One line of the load generator's per-request output. */
interface RequestLine {
  readonly requestId: string;
  readonly status: string;
  readonly ttftMs: number | null;
  readonly e2eMs?: number | null;
  readonly routeWallMs: number | null;
  readonly reason: string;
  readonly background?: boolean;
}

/** The load generator's lines of every run, with the run's variant. */
function requestLines(out: string, runs: readonly ScheduledRun[]): { variant: string; r: RequestLine }[] {
  return runs.flatMap((run) => lines(join(out, `requests-${run.attempt}-${run.variant}.jsonl`)).map((l) => ({ variant: run.variant, r: JSON.parse(l) as RequestLine })));
}

/**
 * Per variant, from the load generator's per-request lines: the engine-measured TTFT and the route
 * wall time of the sessions' requests, and apart from them the competing traffic's, engine-measured.
 */
function engineSummary(requests: readonly { variant: string; r: RequestLine }[]) {
  const round = (x: number): number => Math.round(x * 10) / 10;
  const mean = (xs: number[]): number | null => (xs.length === 0 ? null : round(xs.reduce((s, x) => s + x, 0) / xs.length));
  const p90 = (xs: number[]): number | null => (xs.length === 0 ? null : round([...xs].sort((a, b) => a - b)[Math.ceil(0.9 * xs.length) - 1]!));
  const numbers = (rs: readonly RequestLine[], f: (r: RequestLine) => number | null | undefined): number[] => rs.map(f).filter((x) => typeof x === 'number');
  const done = (rs: readonly RequestLine[]): RequestLine[] => rs.filter((r) => r.status === 'done');
  return Object.fromEntries(
    [...new Set(requests.map((x) => x.variant))].map((v) => {
      const own = requests.filter((x) => x.variant === v).map((x) => x.r);
      const fg = own.filter((r) => r.background !== true);
      const bg = own.filter((r) => r.background === true);
      const reasons: Record<string, number> = {};
      for (const r of fg) reasons[r.reason] = (reasons[r.reason] ?? 0) + 1;
      const ttft = numbers(done(fg), (r) => r.ttftMs);
      const bgTtft = numbers(done(bg), (r) => r.ttftMs);
      return [
        v,
        {
          requests: fg.length,
          engineTtftMeanMs: mean(ttft),
          engineTtftP90Ms: p90(ttft),
          routeWallMeanMs: mean(numbers(fg, (r) => r.routeWallMs)),
          reasons,
          background: { requests: bg.length, engineTtftMeanMs: mean(bgTtft), engineTtftP90Ms: p90(bgTtft), engineLatencyMeanMs: mean(numbers(done(bg), (r) => r.e2eMs)) },
        },
      ];
    }),
  );
}

/** How many rows are outcome records of the given request ids (each counted once). */
function countIds(rows: readonly string[], ids: ReadonlySet<string>): number {
  const seen = new Set<string>();
  for (const l of rows) {
    const id = /"requestId":"([^"]*)"/.exec(l)?.[1];
    if (id !== undefined && ids.has(id)) seen.add(id);
  }
  return seen.size;
}
