/**
 * The main job (`npm start`, flags --hold, --no-job, --secure, --dynamo: top-level README):
 * brokers up, every service started and shown healthy, then the job itself, then a clean stop
 * (also on Ctrl-C): services first (each drains and flushes), then the brokers this run started.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Objm } from '@nats-io/obj';
import { connectNats, createLogger, toolSettings } from '@vantage/runtime';
import { brokersUp, localBrokers, localSecureDeployment } from './local';
import { DYNAMO_KV_DIR, runDynamoLoad, startDynamoFleet, type DynamoFleet } from './dynamo-demo';
import { calibrationParameterSet } from '@vantage/evaluation';
import { defaultJobConfig, OUT_DIR, runJob, writeParameterSet } from './job';
import { LIVE_POOLS } from './job-study';
import { RUN_DIR } from './paths';
import { Stack } from './stack';

const log = (m: string): void => {
  process.stderr.write(`[main] ${m}\n`);
};

const PARAMS_FILE = join(OUT_DIR, 'params.json');

async function forgetSnapshots(natsUrl: string): Promise<void> {
  // As the admin user on a secured deployment (VANTAGE_NATS_* set by --secure), else open.
  const nc = await connectNats(
    { ...toolSettings(process.env).nats, url: natsUrl, name: 'main-job', maxReconnectAttempts: 0 },
    createLogger({ service: 'main', instanceId: String(process.pid), level: 'warn' }),
  );
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
  const secure = argv.includes('--secure');
  const dynamo = argv.includes('--dynamo');
  // Dynamo's mocker and client speak plain NATS here; the secured brokers would refuse them.
  if (dynamo && secure) {
    log('--dynamo and --secure cannot be combined');
    process.exit(64);
  }
  const noJob = argv.includes('--no-job') || dynamo;
  let fleet: DynamoFleet | null = null;
  let loadDone: Promise<void> | null = null;
  const t0 = Date.now();
  const before = await localBrokers({ secure });
  const deployment = secure ? localSecureDeployment() : undefined;
  const adminEnv = deployment === undefined ? {} : { ...deployment.natsEnv('admin'), ...deployment.kafkaEnv('admin') };
  if (deployment !== undefined) {
    // The job's own tools (calibration, load generator, replay, snapshot reset) run as the admin
    // role; each service gets its own user from the stack (secureServiceEnv).
    Object.assign(process.env, adminEnv);
    log(`secured brokers: TLS with client certificates (CA ${deployment.tls.caFile}), a NATS user per service, Kafka SASL_SSL (SCRAM-SHA-512)`);
  }
  // Brokers already running (someone else's `infra up`) are left as they were at the end.
  const startedHere = [before.nats.proc, before.kafka.proc].flatMap((p) => (p !== undefined && p.pid() === undefined ? [p] : []));
  const config = defaultJobConfig();
  let stack: Stack | null = null;
  const stackOptions = {
    paramsFile: PARAMS_FILE,
    logDir: join(RUN_DIR, 'services'),
    // The offline study models the same pools (LIVE_FLEET).
    pools: LIVE_POOLS,
    timeScale: config.timeScale,
    ...(dynamo ? { dynamoFileKv: DYNAMO_KV_DIR } : {}),
    extraEnv: {
      // Load reports at most every 10 ms per worker: at time scale 4 a decoding worker changes its load
      // every few wall ms, and the indexers share two cores with everything else.
      fleet: { VANTAGE_FLEET_LOAD_DEBOUNCE_MS: '10' },
      // The observe budget of a route: the default 100 ms is for a dedicated host; here two indexers,
      // the fleet and the load tools share two cores, and a missed budget loses a calibration probe.
      decision: { VANTAGE_DECISION_OBSERVE_TIMEOUT_MS: '250' },
    },
    log,
    ...(deployment === undefined ? {} : { secure: deployment }),
  };
  let stopping = false;
  // Installed before anything starts, so Ctrl-C during start-up also cleans up.
  const shutdown = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      if (loadDone) {
        log('stopping the Dynamo client load');
        await loadDone.catch(() => {});
      }
      log('stopping services');
      await stack?.stop();
      if (fleet) {
        log("stopping Dynamo's mocker");
        await fleet.stop();
      }
      if (startedHere.length > 0) {
        log('stopping brokers started by this run');
        await Promise.all(startedHere.map((p) => p.stop()));
      }
      log(`stopped after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      process.exit(code);
    }
    return new Promise<never>(() => {});
  };
  process.on('SIGINT', () => void shutdown(130));
  process.on('SIGTERM', () => void shutdown(143));

  const { endpoints } = await brokersUp(log, { secure });
  if (stopping) return new Promise<never>(() => {});

  // Each run is a fresh deployment: the simulated fleet starts with empty caches under new worker
  // ids, so a restored snapshot would only carry the previous run's workers until they expire, and
  // the decision service rightly distrusts R for minutes after a restore (bookings unknown).
  await forgetSnapshots(endpoints.natsUrl);
  // The decision service starts with the calibration set (it refuses to start on a bad file); the job
  // switches sets later by rewriting the file.
  mkdirSync(OUT_DIR, { recursive: true });
  writeParameterSet(PARAMS_FILE, calibrationParameterSet(config.destinationLimit, 'start'));
  if (dynamo) {
    try {
      fleet = await startDynamoFleet(endpoints.natsUrl, log);
    } catch (e) {
      log(`Dynamo's mocker did not start: ${(e as Error).message}`);
      return shutdown(1);
    }
    if (stopping) return new Promise<never>(() => {});
  }
  const services = new Stack({ ...stackOptions, natsUrl: endpoints.natsUrl, kafkaBrokers: endpoints.kafkaBrokers });
  stack = services;
  try {
    await services.start();
  } catch (e) {
    log(`a service failed to become healthy: ${(e as Error).message}`);
    return shutdown(1);
  }
  log(`${services.running.length} service(s) healthy`);

  if (!noJob) {
    try {
      const t = Date.now();
      const result = await runJob({
        ...endpoints,
        toolEnv: adminEnv,
        log,
        config,
        paramsFile: PARAMS_FILE,
        decisionPort: () => services.get('decision').port,
        restartFleet: () => services.restart('fleet'),
      });
      log(`job finished in ${((Date.now() - t) / 1000).toFixed(1)} s (${Object.entries(result.phasesMs).map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`).join(', ')}); report: ${result.report}`);
    } catch (e) {
      log(`the job failed: ${e instanceof Error ? e.message : String(e)}`);
      return shutdown(1);
    }
  }
  if (dynamo) {
    log('Dynamo 1.6.1 mocker pools efficient and capable, observed by our indexers; press Ctrl-C to stop');
    loadDone = runDynamoLoad(endpoints.natsUrl, log, () => stopping);
    loadDone.catch((e: unknown) => log(`the Dynamo client load stopped: ${e instanceof Error ? e.message : String(e)}`));
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
