/**
 * The main job, run by `npm start` once the brokers and services are healthy:
 *   1. the load generator drives agentic coding sessions through the real decision service
 *      (which observes both pools' indexers, applies the configured rule and reserves a worker)
 *      onto the simulated fleet, reporting lifecycle events as a gateway would;
 *   2. the outcome service joins decisions and lifecycle events into Avro records in Kafka;
 *   3. the replay tool reads the outcome topic back from Kafka into JSON Lines;
 *   4. the evaluation report is rendered from those rows.
 * Everything lands in out/ (ignored by git); the last lines say where.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths';

export interface JobContext {
  natsUrl: string;
  kafkaBrokers: string;
  log: (m: string) => void;
}

export const OUT_DIR = join(REPO_ROOT, 'out');

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
  const requests = join(OUT_DIR, 'requests.jsonl');
  const outcomes = join(OUT_DIR, 'outcomes.jsonl');
  const report = join(OUT_DIR, 'report.html');
  const sessions = process.env.VANTAGE_JOB_SESSIONS ?? '12';

  log(`load: ${sessions} agentic coding sessions through the decision service onto the simulated fleet`);
  const summaryText = await runNode(
    [
      'services/fleet/src/loadgen.ts',
      '--sessions', sessions,
      '--seed', '7',
      '--capable-fraction', '0.2',
      '--pools', 'efficient:64:efficient-model,capable:64:capable-model',
      '--nats', ctx.natsUrl,
      '--time-scale', '4',
      '--max-duration-ms', '300000',
      '--out', requests,
    ],
    log,
    'load',
  );
  const summaryLine = summaryText.trim().split('\n').pop() ?? '{}';
  writeFileSync(join(OUT_DIR, 'load-summary.json'), summaryLine + '\n');
  log(`load done: ${summaryLine.slice(0, 300)}`);

  // The outcome service writes a record when its lifecycle ends (or its join window passes).
  log('waiting for the outcome service to write every record to Kafka');
  const expected = readFileSync(requests, 'utf8').split('\n').filter((l) => l.trim()).length;
  let got = 0;
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    await runNode(
      ['packages/cli/src/main.ts', 'replay', '--brokers', ctx.kafkaBrokers, '--topic', 'vantage.outcomes.v1', '--from-beginning', '--format', 'jsonl', '--out', outcomes],
      log,
      'replay',
    );
    got = existsSync(outcomes) ? readFileSync(outcomes, 'utf8').split('\n').filter((l) => l.trim()).length : 0;
    if (got >= expected) break;
    log(`${got}/${expected} outcome records in Kafka so far`);
    await new Promise((r) => setTimeout(r, 5_000));
  }
  log(`${got} outcome records read back from Kafka into ${outcomes}`);

  await runNode(['packages/cli/src/main.ts', 'evaluate', '--input', outcomes, '--out', report, '--json', join(OUT_DIR, 'analysis.json'), '--bootstrap', '500'], log, 'report');
  log(`report: ${report}`);
  log(`data:   ${requests} (per request, from the load generator), ${outcomes} (outcome records from Kafka)`);
}
