/**
 * The service stack of the main job as child processes: one indexer per model pool, the decision
 * service (parameter set from a file it polls), the outcome service and the simulated fleet, each
 * `node --import tsx services/<s>/src/main.ts` with VANTAGE_* settings and its output in
 * `<logDir>/<name>.log`. Services reject VANTAGE_* variables they do not know, so the caller's own
 * are never passed down.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, httpOk, spawnLogged, untilReady, type LoggedProcess } from './exec';
import { REPO_ROOT } from './paths';
import type { SecureDeployment } from './secure';

/**
 * Node flags the decision service is started with. V8's default starting limit for the old
 * generation makes it mark the whole heap every 0.2–1 s at 1,000 routes/s; starting from 256 MiB cuts
 * those full collections about 8× and the route p99 with them, for about 60 MiB more resident
 * (services/decision/README.md, "Performance"). Node refuses this flag in NODE_OPTIONS, so it is
 * given on the command line, here and by bench:decision.
 */
export const DECISION_NODE_ARGS: readonly string[] = ['--initial-old-space-size=256'];

interface ServiceSpec {
  readonly name: string;
  readonly entry: string;
  readonly nodeArgs?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
}

interface PoolSpec {
  readonly name: string;
  readonly component: string;
  /** Scales the mocker's step time: < 1 is a slower (larger) model. */
  readonly speed: number;
  readonly workers: number;
}

interface StackOptions {
  readonly natsUrl: string;
  readonly kafkaBrokers: string;
  readonly paramsFile: string;
  readonly logDir: string;
  readonly pools: { readonly efficient: PoolSpec; readonly capable: PoolSpec };
  /** Fleet sim ms per wall ms. */
  readonly timeScale: number;
  /** Outcome join window (ms). */
  readonly joinWindowMs?: number;
  /** Extra settings per service name (`indexer-<pool>`, `decision`, `outcome`, `fleet`). */
  readonly extraEnv?: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * Dynamo's own mocker serves the pools instead of the simulated fleet: each pool's indexer is
   * configured with only its Dynamo namespace (the pool's name) and this file discovery directory,
   * and no fleet is started.
   */
  readonly dynamoFileKv?: string;
  readonly log: (m: string) => void;
  /**
   * Secured brokers: each service connects as its own least-privilege NATS user over mutual
   * TLS (role = its name: `indexer-<pool>`, `decision`, `outcome`, `fleet`), the outcome
   * service to Kafka as SCRAM user `outcome`.
   */
  readonly secure?: SecureDeployment;
}

/** The VANTAGE_* security settings of one stack service on a secured deployment. */
export function secureServiceEnv(d: SecureDeployment, name: string): Record<string, string> {
  return { ...d.natsEnv(name), ...(name === 'outcome' ? d.kafkaEnv('outcome') : {}) };
}

interface RunningService {
  readonly spec: ServiceSpec;
  proc: LoggedProcess;
  port: number;
}

export function stackServices(o: StackOptions): ServiceSpec[] {
  const pools = [o.pools.efficient, o.pools.capable];
  const extra = (name: string): Readonly<Record<string, string>> => o.extraEnv?.[name] ?? {};
  return [
    ...pools.map((p) => ({
      name: `indexer-${p.name}`,
      entry: 'services/indexer/src/main.ts',
      env: {
        VANTAGE_INDEXER_POOLS: JSON.stringify([
          o.dynamoFileKv === undefined ? { name: p.name, component: p.component } : { name: p.name, namespace: p.name, discovery: { backend: 'file', dir: o.dynamoFileKv } },
        ]),
        ...extra(`indexer-${p.name}`),
      },
    })),
    {
      name: 'decision',
      entry: 'services/decision/src/main.ts',
      nodeArgs: DECISION_NODE_ARGS,
      env: {
        VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: o.pools.efficient.name,
        VANTAGE_DECISION_POOLS_EFFICIENT_POOL: o.pools.efficient.name,
        VANTAGE_DECISION_POOLS_CAPABLE_MODEL: o.pools.capable.name,
        VANTAGE_DECISION_POOLS_CAPABLE_POOL: o.pools.capable.name,
        // Local pools (the default): the same sources as each pool's indexer.
        ...Object.fromEntries(
          (['efficient', 'capable'] as const).flatMap((role) => {
            const p = o.pools[role];
            const k = `VANTAGE_DECISION_POOLS_${role.toUpperCase()}`;
            return o.dynamoFileKv === undefined
              ? [[`${k}_COMPONENT`, p.component]]
              : [[`${k}_NAMESPACE`, p.name], [`${k}_DISCOVERY_BACKEND`, 'file'], [`${k}_DISCOVERY_DIR`, o.dynamoFileKv]];
          }),
        ),
        // The job switches parameter sets (calibration, fitted, each variant) by rewriting this file.
        VANTAGE_DECISION_PARAMETER_SET_FILE: o.paramsFile,
        VANTAGE_DECISION_RELOAD_POLL_MS: '200',
        ...extra('decision'),
      },
    },
    {
      name: 'outcome',
      entry: 'services/outcome/src/main.ts',
      env: {
        VANTAGE_OUTCOME_JOIN_WINDOW_MS: String(o.joinWindowMs ?? 10_000),
        // A development stack's streams: 1 GiB each is far more than a job writes, and nats-server
        // reserves each stream's max_bytes from its storage (the 8 GiB production default would let a
        // few stacks on one test broker exhaust it).
        VANTAGE_OUTCOME_NATS_STREAM_MAX_BYTES: String(1024 ** 3),
        ...extra('outcome'),
      },
    },
    ...(o.dynamoFileKv !== undefined
      ? []
      : [
          {
            name: 'fleet',
            entry: 'services/fleet/src/main.ts',
            env: {
              VANTAGE_FLEET_POOLS: JSON.stringify(pools.map((p) => ({ name: p.name, component: p.component, workers: p.workers, speed: p.speed, model: p.name }))),
              VANTAGE_FLEET_TIME_SCALE: String(o.timeScale),
              ...extra('fleet'),
            },
          },
        ]),
  ];
}

export class Stack {
  readonly running: RunningService[] = [];

  constructor(private readonly o: StackOptions) {}

  async start(): Promise<void> {
    for (const spec of stackServices(this.o)) this.running.push(await this.spawn(spec));
    for (const r of this.running) await this.waitHealthy(r);
  }

  get(name: string): RunningService {
    const r = this.running.find((x) => x.spec.name === name);
    if (r === undefined) throw new Error(`no service ${name} in the stack`);
    return r;
  }

  /** Stop one service (it drains and flushes) and start it again; resolves once it is healthy. */
  async restart(name: string): Promise<number> {
    const r = this.get(name);
    const t0 = Date.now();
    await stopService(r, this.o.log);
    Object.assign(r, await this.spawn(r.spec));
    await this.waitHealthy(r, false);
    return Date.now() - t0;
  }

  async stop(): Promise<void> {
    await Promise.all(this.running.map((r) => stopService(r, this.o.log)));
  }

  private async waitHealthy(r: RunningService, say = true): Promise<void> {
    const ms = await untilReady(r.proc, r.spec.name, () => httpOk(`http://127.0.0.1:${r.port}/healthz`), 60_000, false);
    if (say) this.o.log(`${r.spec.name.padEnd(18)} healthy  http://127.0.0.1:${r.port}/metrics  (${ms} ms)  log ${r.proc.logFile}`);
  }

  private async spawn(spec: ServiceSpec): Promise<RunningService> {
    const port = await freePort();
    mkdirSync(this.o.logDir, { recursive: true });
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VANTAGE_'))),
      VANTAGE_SERVICE: spec.name,
      VANTAGE_NATS_URL: this.o.natsUrl,
      VANTAGE_KAFKA_BROKERS: this.o.kafkaBrokers,
      VANTAGE_HTTP_PORT: String(port),
      ...(this.o.secure === undefined ? {} : secureServiceEnv(this.o.secure, spec.name)),
      ...spec.env,
    };
    const logFile = join(this.o.logDir, `${spec.name}.log`);
    const { proc } = spawnLogged(process.execPath, [...(spec.nodeArgs ?? []), '--import', 'tsx', join(REPO_ROOT, spec.entry)], { env, logFile, stdio: 'log', group: false });
    return { spec, proc, port };
  }
}

/** SIGTERM (it drains and flushes), SIGKILL if it has not stopped in time. */
async function stopService(r: RunningService, log: (m: string) => void, deadlineMs = 15_000): Promise<void> {
  const late = setTimeout(() => log(`${r.spec.name} did not stop within ${deadlineMs} ms; killing it`), deadlineMs);
  await r.proc.stop(deadlineMs);
  clearTimeout(late);
}
