/**
 * The main job, run by `npm start` once the brokers and services are healthy:
 *   1. the load generator drives agentic coding sessions through the real decision service
 *      (which observes both pools' indexers, applies the configured rule and reserves a worker)
 *      onto the simulated fleet, reporting lifecycle events as a gateway would — after a short
 *      warm-up, once under Stage's baseline and once under the request-count rule;
 *   2. the outcome service joins decisions and lifecycle events into Avro records in Kafka;
 *   3. the replay tool reads the outcome topic back from Kafka into JSON Lines;
 *   4. the evaluation report is rendered from those rows.
 * Everything lands in out/ (ignored by git); the last lines say where.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_PARAMETER_SET, loadParameterSet, serializeParameterSet, type ParameterSet } from '@vantage/rules';
import { REPO_ROOT } from './paths';

export interface JobContext {
  natsUrl: string;
  kafkaBrokers: string;
  log: (m: string) => void;
}

export const OUT_DIR = join(REPO_ROOT, 'out');

/**
 * The parameter set the decision service runs: the built-in development set (not fitted), as
 * Stage's baseline or with the request-count rule (R_efficient >= 2 changes efficient to capable).
 */
export function writeParameterSet(path: string, variant: 'stage' | 'count'): ParameterSet {
  const doc = JSON.parse(serializeParameterSet(DEFAULT_PARAMETER_SET)) as Record<string, unknown>;
  doc['variant'] = variant;
  doc['version'] = `main-job-${variant}`;
  if (variant === 'count') doc['thresholds'] = { r: 2, p: null };
  const checked = loadParameterSet(JSON.stringify(doc));
  if (!checked.ok) throw new Error(`main job parameter set is invalid: ${checked.errors.join('; ')}`);
  mkdirSync(OUT_DIR, { recursive: true });
  writeFileSync(path, serializeParameterSet(checked.value));
  return checked.value;
}

function runNode(args: string[], log: (m: string) => void, label: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
      cwd: REPO_ROOT,
      env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VANTAGE_'))), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    // Progress lines of the child go straight to the user.
    child.stderr.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n')) if (line.trim()) process.stderr.write(`[${label}] ${line}\n`);
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${label} exited with ${code}`))));
  });
}

export async function runJob(ctx: JobContext): Promise<void> {
  const { log } = ctx;
  mkdirSync(OUT_DIR, { recursive: true });
  const outcomes = join(OUT_DIR, 'outcomes.jsonl');
  const report = join(OUT_DIR, 'report.html');
  const sessions = process.env.VANTAGE_JOB_SESSIONS ?? '12';

  const loadgen = async (label: string, seed: number, n: string, file: string): Promise<number> => {
    const summaryText = await runNode(
      [
        'services/fleet/src/loadgen.ts',
        '--sessions', n,
        '--seed', String(seed),
        '--capable-fraction', '0.2',
        '--pools', 'efficient:64:efficient,capable:64:capable',
        '--nats', ctx.natsUrl,
        '--time-scale', '4',
        '--max-duration-ms', '300000',
        '--out', file,
      ],
      log,
      `load ${label}`,
    );
    const summaryLine = summaryText.trim().split('\n').pop() ?? '{}';
    writeFileSync(join(OUT_DIR, `load-summary-${label}.json`), summaryLine + '\n');
    log(`load (${label}) done: ${summaryLine.slice(0, 240)}`);
    return readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).length;
  };

  /** Read the outcome topic from `since` into `file` until it holds `expected` records (or time runs out). */
  const waitForOutcomes = async (since: string, expected: number, file: string, what: string): Promise<number> => {
    let got = 0;
    const deadline = Date.now() + 90_000;
    while (Date.now() < deadline) {
      await runNode(
        ['packages/cli/src/main.ts', 'replay', '--brokers', ctx.kafkaBrokers, '--topic', 'vantage.outcomes.v1', '--since', since, '--format', 'jsonl', '--out', file],
        log,
        'replay',
      );
      got = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).length : 0;
      if (got >= expected) break;
      log(`${got}/${expected} ${what} outcome records in Kafka so far`);
      await new Promise((r) => setTimeout(r, 5_000));
    }
    return got;
  };

  // Warm-up: a few sessions so both variants start with the shared system prompt cached. Its
  // records are read back first, so that everything after `since` belongs to the evaluation
  // (the broker also keeps earlier runs' topics).
  log('warm-up: 2 sessions (not evaluated)');
  const warmSince = new Date(Date.now() - 1_000).toISOString();
  const warmed = await loadgen('warmup', 1000, '2', join(OUT_DIR, 'requests-warmup.jsonl'));
  await waitForOutcomes(warmSince, warmed, join(OUT_DIR, 'outcomes-warmup.jsonl'), 'warm-up');
  const since = new Date(Date.now()).toISOString();

  // Stage's baseline, then the request-count rule, on fresh sessions drawn from the same generator
  // (different seeds, so the second variant does not find the first one's conversations cached).
  let expected = 0;
  const variants = [
    { variant: 'stage' as const, seed: 7 },
    { variant: 'count' as const, seed: 8 },
  ];
  for (const { variant, seed } of variants) {
    writeParameterSet(join(OUT_DIR, 'params.json'), variant);
    await new Promise((r) => setTimeout(r, 1_500)); // the decision service polls the file every 300 ms
    log(`load (${variant}): ${sessions} agentic coding sessions through the decision service onto the simulated fleet`);
    expected += await loadgen(variant, seed, sessions, join(OUT_DIR, `requests-${variant}.jsonl`));
  }

  // The outcome service writes a record when its lifecycle ends (or its join window passes).
  log('waiting for the outcome service to write every record to Kafka');
  const got = await waitForOutcomes(since, expected, outcomes, 'evaluation');
  log(`${got} outcome records read back from Kafka into ${outcomes}`);

  await runNode(['packages/cli/src/main.ts', 'evaluate', '--input', outcomes, '--out', report, '--json', join(OUT_DIR, 'analysis.json'), '--bootstrap', '1000'], log, 'report');
  log(`report: ${report}`);
  log(`data:   ${join(OUT_DIR, 'requests-{stage,count}.jsonl')} (per request, from the load generator), ${outcomes} (outcome records from Kafka)`);
}
