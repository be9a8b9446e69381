/**
 * Load generator CLI (`node --import tsx services/fleet/src/loadgen.ts --help`): load-generator.ts
 * driven by the flags below, exits as cli-args.ts says; README.md, "Load generator".
 */
import { DEFAULT_AGENTIC_CONFIG, generateAgenticSessions, loadMooncakeTrace } from '@vantage/sim';
import { backgroundTraffic, evaluationBackgroundSessionId, evaluationSessionId, parseBackgroundSpec, parseProposalSpec, stageProposal } from '@vantage/evaluation';
import { runLoadgen, type LoadgenOptions, type Workload } from './load-generator';
import { cliTool } from './cli-args';

const USAGE = `usage: loadgen (--trace FILE [--limit N] [--speedup X] | --sessions N [--seed S] [--max-context TOKENS])
               [--direct [--direct-pool efficient|capable] [--no-book]] [--capable-fraction F] [--seed S]
               [--pools efficient:64[:model],capable:64[:model]] [--time-scale X] [--nats URL]
               [--max-duration-ms MS] [--request-timeout-ms MS] [--route-timeout-ms MS] [--wait-ready-ms MS]
               [--eval ATTEMPT:VARIANT [--proposal always_efficient|fraction:F:SEED|length:TOKENS]
                [--background STREAMS:REQUESTS:GAP_MS:SEED[:CAPABLE_FRACTION]|off]]
               [--out FILE.jsonl]

  --eval A:V    one run of the evaluation schedule: session i is eval:<A>:<V>:<i> (V as decision records
                name variants), and Stage's proposals come from --proposal with the match key <A>:<i>,
                so every variant of attempt A sees the same proposals
  --background  competing traffic beside the sessions: the same seeded open-loop requests in every run
                (gaps in sim ms), Dynamo's choice on their pool, booked, session evalbg:<A>:<V>:<stream>,
                lifecycle marked background with arrivalMs; their lines in --out carry "background": true`;

const cli = cliTool('loadgen', USAGE, {
  trace: { type: 'string' },
  limit: { type: 'string' },
  speedup: { type: 'string' },
  sessions: { type: 'string' },
  seed: { type: 'string' },
  'max-context': { type: 'string' },
  direct: { type: 'boolean', default: false },
  'direct-pool': { type: 'string', default: 'efficient' },
  'no-book': { type: 'boolean', default: false },
  'capable-fraction': { type: 'string' },
  'time-scale': { type: 'string' },
  'max-duration-ms': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
  'route-timeout-ms': { type: 'string' },
  'wait-ready-ms': { type: 'string' },
  eval: { type: 'string' },
  proposal: { type: 'string' },
  background: { type: 'string' },
});
const a = cli.args;
// Annotated so that the compiler treats it as ending control flow.
const fail: (msg: string) => never = cli.fail;
const numArg = cli.num;
if ((a.trace === undefined) === (a.sessions === undefined)) fail('give exactly one of --trace and --sessions');
const role = a['direct-pool'];
if (role !== 'efficient' && role !== 'capable') fail(`--direct-pool must be efficient or capable, got ${role}`);
const seed = a.seed ?? '1';

let evalRun: Pick<LoadgenOptions, 'sessionIdOf' | 'proposal' | 'background'> = {};
if (a.eval !== undefined) {
  const m = /^(\d+):([a-z_]+)$/.exec(a.eval);
  if (!m) fail(`--eval must be ATTEMPT:VARIANT, got ${a.eval}`);
  if (a.trace !== undefined) fail('--eval needs a sessions workload');
  const attempt = Number(m[1]);
  const variant = m[2]!;
  const model = cli.parse(() => parseProposalSpec(a.proposal ?? 'always_efficient'), '--proposal: ');
  const bg = a.background === undefined ? null : cli.parse(() => parseBackgroundSpec(a.background!));
  evalRun = {
    sessionIdOf: (i) => evaluationSessionId(attempt, variant, i),
    proposal: (ctx) => stageProposal(model, { matchKey: `${attempt}:${ctx.sessionIndex}`, turn: ctx.turn, promptTokens: ctx.promptTokens }),
    ...(bg === null ? {} : { background: { requests: backgroundTraffic(bg), sessionIdOf: (stream: number) => evaluationBackgroundSessionId(attempt, variant, stream) } }),
  };
} else if (a.proposal !== undefined) fail('--proposal needs --eval');
else if (a.background !== undefined) fail('--background needs --eval');
const pools = cli.pools();

let workload: Workload;
if (a.trace !== undefined) {
  const trace = a.trace;
  const records = cli.parse(() => loadMooncakeTrace(trace));
  const limit = numArg('limit', 1) ?? records.length;
  workload = { kind: 'trace', records: records.slice(0, limit), speedup: numArg('speedup', 1e-6) ?? 1 };
} else {
  const n = numArg('sessions', 1)!; // given: exactly one of --trace and --sessions
  workload = {
    kind: 'sessions',
    sessions: generateAgenticSessions({ ...DEFAULT_AGENTIC_CONFIG, sessions: Math.floor(n), seed, maxContextTokens: numArg('max-context', 1) ?? 32_768 }),
  };
}

await cli.run(async ({ nc, write, signal }) => {
  const { summary } = await runLoadgen({
    nc,
    pools,
    ...evalRun,
    workload,
    mode: a.direct ? { kind: 'direct', role, book: !a['no-book'] } : { kind: 'route' },
    capableFraction: numArg('capable-fraction'),
    seed,
    timeScale: numArg('time-scale', 1e-6) ?? Number(process.env.VANTAGE_FLEET_TIME_SCALE ?? 1),
    maxDurationMs: numArg('max-duration-ms', 1),
    requestTimeoutMs: numArg('request-timeout-ms', 1),
    routeTimeoutMs: numArg('route-timeout-ms', 1),
    waitReadyMs: numArg('wait-ready-ms'),
    progress: (line) => process.stderr.write(`${line}\n`),
    ...(write ? { onOutcome: write, onBackgroundOutcome: (o) => write({ ...o, background: true }) } : {}),
    signal,
  });
  return summary;
});
