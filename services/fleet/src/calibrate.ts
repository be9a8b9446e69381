/**
 * Calibration CLI (`node --import tsx services/fleet/src/calibrate.ts --help`): calibration.ts driven
 * by the flags below, exits as cli-args.ts says; README.md, "Calibration". The decision service must
 * run a parameter set that observes both pools and never overrides (`calibrationParameterSet` of
 * @vantage/evaluation).
 */
import { calibrationPlan, CALIBRATION_PRESETS, type CalibrationPreset } from '@vantage/evaluation';
import { runCalibration } from './calibration';
import { cliTool } from './cli-args';

const USAGE = `usage: calibrate [--preset tiny|small|full] [--repeats N] [--seed S] [--destination-limit N]
                 [--pools efficient:64[:model],capable:64[:model]] [--nats URL] [--route-subject S]
                 [--max-runs N] [--request-timeout-ms MS] [--settle-timeout-ms MS] [--out FILE.jsonl] [--plan-only]`;

const cli = cliTool('calibrate', USAGE, {
  preset: { type: 'string', default: 'small' },
  repeats: { type: 'string' },
  seed: { type: 'string' },
  'destination-limit': { type: 'string' },
  'route-subject': { type: 'string' },
  'max-runs': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
  'settle-timeout-ms': { type: 'string' },
  'plan-only': { type: 'boolean', default: false },
});
const a = cli.args;
// Annotated so that the compiler treats it as ending control flow.
const fail: (msg: string) => never = cli.fail;
const int = cli.int;
if (!(a.preset in CALIBRATION_PRESETS)) fail(`--preset must be one of ${Object.keys(CALIBRATION_PRESETS).join(', ')}`);
const pools = cli.pools();
if (pools.efficient.blockSize !== pools.capable.blockSize) fail('both pools must share one block size (the plan warms K on a block boundary of both)');
const planOptions = { preset: a.preset as CalibrationPreset, blockSize: pools.efficient.blockSize, repeats: int('repeats', 1), seed: int('seed', 0), destinationLimit: int('destination-limit', 1) };
const plan = cli.parse(() => calibrationPlan(planOptions));
const t = plan.totals;
process.stderr.write(
  `calibrate: plan ${plan.preset}: ${t.conditions} conditions, ${t.runs} runs, ${t.probeRequests} probes, ${t.warmupRequests} warm-ups, ` +
    `${t.backgroundRequests} background requests per loaded worker; ${Object.entries(t.byFactor).map(([f, n]) => `${f} ${n}`).join(', ')}\n`,
);
if (a['plan-only']) {
  // Exit once the plan is written: to a pipe, process.exit would cut it at the pipe's buffer (64 KiB).
  process.stdout.write(`${JSON.stringify(plan)}\n`, () => process.exit(0));
  await new Promise(() => {});
}

const runOptions = { routeSubject: a['route-subject'], maxRuns: int('max-runs', 1), requestTimeoutMs: int('request-timeout-ms', 1), settleTimeoutMs: int('settle-timeout-ms', 1) };
await cli.run(({ nc, write, signal }) =>
  runCalibration({ nc, pools, plan, ...runOptions, progress: (line) => process.stderr.write(`${line}\n`), onRequest: write ?? undefined, signal }),
);
