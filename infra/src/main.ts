/**
 * The main job: brokers up, every service started and shown healthy, then the
 * job itself, then a clean stop (also on Ctrl-C): services first (each drains
 * and flushes), then the brokers that this run started.
 *
 *   --hold        after the job, keep everything running until Ctrl-C
 *   --no-job      start and check the services only
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { Objm } from '@nats-io/obj';
import { connect } from '@nats-io/transport-node';
import { freePort, sleep, waitFor } from './exec';
import { brokersUp, localBrokers } from './local';
import { OUT_DIR, runJob, writeParameterSet } from './job';
import { REPO_ROOT, RUN_DIR } from './paths';

const log = (m: string): void => {
  process.stderr.write(`[main] ${m}\n`);
};

interface ServiceSpec {
  name: string;
  entry: string;
  env?: Record<string, string>;
}

/** Every service the main job runs; entries that do not exist yet are skipped. */
const PARAMS_FILE = join(OUT_DIR, 'params.json');
const POOLS = [
  { name: 'efficient', component: 'efficient', speed: 1.0 },
  { name: 'capable', component: 'capable', speed: 0.6 },
];
const SERVICES: ServiceSpec[] = [
  ...POOLS.map((p) => ({
    name: `indexer-${p.name}`,
    entry: 'services/indexer/src/main.ts',
    env: { VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: p.name, component: p.component }]) },
  })),
  {
    name: 'decision',
    entry: 'services/decision/src/main.ts',
    env: {
      VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: 'efficient',
      VANTAGE_DECISION_POOLS_EFFICIENT_POOL: 'efficient',
      VANTAGE_DECISION_POOLS_CAPABLE_MODEL: 'capable',
      VANTAGE_DECISION_POOLS_CAPABLE_POOL: 'capable',
      // The job switches rule variants by rewriting this file; the service polls it.
      VANTAGE_DECISION_PARAMETER_SET_FILE: PARAMS_FILE,
      VANTAGE_DECISION_RELOAD_POLL_MS: '300',
    },
  },
  { name: 'outcome', entry: 'services/outcome/src/main.ts', env: { VANTAGE_OUTCOME_JOIN_WINDOW_MS: '10000' } },
  {
    name: 'fleet',
    entry: 'services/fleet/src/main.ts',
    env: {
      VANTAGE_FLEET_POOLS: JSON.stringify(POOLS.map((p) => ({ name: p.name, component: p.component, workers: 4, speed: p.speed, model: p.name }))),
      VANTAGE_FLEET_TIME_SCALE: '4',
    },
  },
];

interface Running {
  spec: ServiceSpec;
  child: ChildProcess;
  port: number;
  logFile: string;
}

async function startService(spec: ServiceSpec, endpoints: { natsUrl: string; kafkaBrokers: string }): Promise<Running> {
  const port = await freePort();
  const logDir = join(RUN_DIR, 'services');
  mkdirSync(logDir, { recursive: true });
  const logFile = join(logDir, `${spec.name}.log`);
  const out = openSync(logFile, 'a');
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, spec.entry)], {
    cwd: REPO_ROOT,
    stdio: ['ignore', out, out],
    env: {
      // Services reject VANTAGE_* variables they do not know (typos must not pass silently),
      // so infra's own settings (ports and the like) are not passed down.
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VANTAGE_'))),
      VANTAGE_SERVICE: spec.name,
      VANTAGE_NATS_URL: endpoints.natsUrl,
      VANTAGE_KAFKA_BROKERS: endpoints.kafkaBrokers,
      VANTAGE_HTTP_PORT: String(port),
      ...spec.env,
    },
  });
  closeSync(out);
  return { spec, child, port, logFile };
}

async function healthy(r: Running): Promise<boolean> {
  if (r.child.exitCode !== null) throw new Error(`${r.spec.name} exited with ${r.child.exitCode}; see ${r.logFile}`);
  try {
    const res = await fetch(`http://127.0.0.1:${r.port}/healthz`);
    return res.ok;
  } catch {
    return false;
  }
}

async function stopService(r: Running, deadlineMs = 15_000): Promise<void> {
  if (r.child.exitCode !== null) return;
  const exited = new Promise<void>((res) => r.child.once('exit', () => res()));
  r.child.kill('SIGTERM');
  const timedOut = await Promise.race([exited.then(() => false), sleep(deadlineMs).then(() => true)]);
  if (timedOut) {
    log(`${r.spec.name} did not stop within ${deadlineMs} ms; killing it`);
    r.child.kill('SIGKILL');
    await exited;
  }
}

async function forgetSnapshots(natsUrl: string): Promise<void> {
  const nc = await connect({ servers: natsUrl });
  try {
    const store = await new Objm(nc).open('vantage-indexer');
    await store.destroy();
    log('removed the previous run\'s indexer snapshots');
  } catch {
    // No bucket yet: nothing to forget.
  } finally {
    await nc.close();
  }
}

async function main(argv: string[]): Promise<number> {
  const hold = argv.includes('--hold');
  const noJob = argv.includes('--no-job');
  const t0 = Date.now();
  const before = await localBrokers();
  const wasRunning = { nats: before.nats?.pid() !== undefined, kafka: before.kafka?.pid() !== undefined };
  const running: Running[] = [];
  let stopping = false;
  // Installed before anything starts, so Ctrl-C during start-up also cleans up.
  const shutdown = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      log('stopping services');
      await Promise.all(running.map((r) => stopService(r)));
      // Leave brokers that were already running (someone else's `infra up`) as they were.
      if (!wasRunning.nats || !wasRunning.kafka) {
        log('stopping brokers started by this run');
        const b = await localBrokers();
        await Promise.all([
          !wasRunning.nats && b.nats ? b.nats.stop() : undefined,
          !wasRunning.kafka && b.kafka ? b.kafka.stop() : undefined,
        ]);
      }
      log(`stopped after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      process.exit(code);
    }
    return new Promise<never>(() => {});
  };
  process.on('SIGINT', () => void shutdown(130));
  process.on('SIGTERM', () => void shutdown(143));

  const { endpoints, readyMs } = await brokersUp(log);
  log(`brokers ready: nats ${endpoints.natsUrl} (${readyMs.nats ?? 'external'} ms), kafka ${endpoints.kafkaBrokers} (${readyMs.kafka ?? 'external'} ms)`);
  if (stopping) return new Promise<never>(() => {});

  // Each run is a fresh deployment: the simulated fleet starts with empty caches under new worker
  // ids, so a restored snapshot would only carry the previous run's workers until they expire, and
  // the decision service rightly distrusts R for minutes after a restore (bookings unknown).
  await forgetSnapshots(endpoints.natsUrl);
  // The decision service starts with Stage's baseline; the job switches variants later.
  writeParameterSet(PARAMS_FILE, 'stage');
  for (const spec of SERVICES) {
    if (!existsSync(join(REPO_ROOT, spec.entry))) continue;
    running.push(await startService(spec, endpoints));
  }
  try {
    for (const r of running) {
      const ms = await waitFor(r.spec.name, () => healthy(r), 60_000);
      log(`${r.spec.name.padEnd(18)} healthy  http://127.0.0.1:${r.port}/metrics  (${ms} ms)  log ${r.logFile}`);
    }
  } catch (e) {
    log(`a service failed to become healthy: ${(e as Error).message}`);
    return shutdown(1);
  }
  log(`${running.length} service(s) healthy`);

  if (!noJob) {
    try {
      await runJob({ ...endpoints, log });
    } catch (e) {
      log(`the job failed: ${e instanceof Error ? e.message : String(e)}`);
      return shutdown(1);
    }
  }
  if (hold || noJob) {
    log('running; press Ctrl-C to stop');
    // A pending promise alone does not keep Node alive; a timer does, until a signal arrives.
    setInterval(() => {}, 1 << 30);
    await new Promise(() => {});
  }
  return shutdown(0);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  log(`error: ${e instanceof Error ? e.message : String(e)}`);
  // Brokers are left as they are: `npm run infra:status` shows them, `npm run infra:down` stops them.
  process.exit(1);
});
