/**
 * The long-lived local brokers behind `infra up|down|status` and the main job (infra/README.md,
 * `local.ts`, `cli.ts`: ports, data under .infra/run, the variables naming existing brokers).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { envInt, tcpOpen } from './exec';
import { etcdServer, kafkaBroker, natsBroker, type BrokerProcess } from './brokers';
import { ensureEtcd, ensureKafkaJars, ensureNatsServer } from './install';
import { RUN_DIR } from './paths';
import { JOB_POOLS, secureDeployment, type SecureDeployment } from './secure';

type BrokerName = 'nats' | 'kafka' | 'etcd';

interface LocalBroker {
  readonly name: BrokerName;
  /** The variable that names an existing broker instead (`NATS_URL`, `KAFKA_BROKERS`, `ETCD_ENDPOINTS`). */
  readonly variable: string;
  /** Undefined when that variable is set: the broker is used as it is. */
  readonly proc: BrokerProcess | undefined;
  /** NATS URL, Kafka bootstrap address or etcd client URL(s). */
  readonly address: string;
}

const INSTALL: Record<BrokerName, (log: (m: string) => void) => Promise<string>> = { nats: ensureNatsServer, kafka: ensureKafkaJars, etcd: ensureEtcd };

const portFromEnv = (name: string, dflt: number): number => envInt(process.env, name, dflt, 65535);

/** Where the secured pair keeps its data, certificates and secrets (`infra up --secure`). */
const SECURE_DIR = join(RUN_DIR, 'secure');

/** The secured deployment (certificates, users, secret files) of `infra up --secure`, made on first use. */
export function localSecureDeployment(): SecureDeployment {
  return secureDeployment(SECURE_DIR, JOB_POOLS);
}

/** The broker `variable` names, or the one `make` describes (not started). */
async function localBroker<P extends BrokerProcess>(name: BrokerName, variable: string, address: (p: P) => string, make: () => Promise<P>): Promise<LocalBroker> {
  const given = process.env[variable];
  if (given) return { name, variable, proc: undefined, address: given };
  const proc = await make();
  return { name, variable, proc, address: address(proc) };
}

/**
 * The local brokers. `secure`: nats-server with TLS (client certificates required) and one
 * least-privilege user per role, Kafka with only a SASL_SSL listener (SCRAM-SHA-512); their
 * data lives under `.infra/run/secure/` so it never mixes with the open pair's.
 */
export async function localBrokers(opts: { secure?: boolean } = {}): Promise<Record<BrokerName, LocalBroker>> {
  const secure = opts.secure === true ? localSecureDeployment() : undefined;
  const base = secure === undefined ? RUN_DIR : SECURE_DIR;
  return {
    nats: await localBroker('nats', 'NATS_URL', (p) => p.url, () =>
      natsBroker({
        dir: join(base, 'nats'),
        port: portFromEnv('VANTAGE_NATS_PORT', 4222),
        monitorPort: portFromEnv('VANTAGE_NATS_MONITOR_PORT', 8222),
        ...(secure === undefined ? {} : { security: secure.nats }),
      }),
    ),
    kafka: await localBroker('kafka', 'KAFKA_BROKERS', (p) => p.brokers, () =>
      kafkaBroker({
        dir: join(base, 'kafka'),
        port: portFromEnv('VANTAGE_KAFKA_PORT', 9092),
        controllerPort: portFromEnv('VANTAGE_KAFKA_CONTROLLER_PORT', 9093),
        heapMb: 768,
        internalPartitions: 3,
        ...(secure === undefined ? {} : { security: secure.kafka }),
      }),
    ),
    // Plain (no TLS, no users) in both layouts: `up --secure` does not start it.
    etcd: await localBroker('etcd', 'ETCD_ENDPOINTS', (p) => p.endpoint, () =>
      etcdServer({
        dir: join(RUN_DIR, 'etcd'),
        clientPort: portFromEnv('VANTAGE_ETCD_PORT', 2379),
        peerPort: portFromEnv('VANTAGE_ETCD_PEER_PORT', 2380),
      }),
    ),
  };
}

/** The brokers of a layout: etcd belongs to the open one only (`up --secure` does not start it). */
const layoutBrokers = (b: Record<BrokerName, LocalBroker>, etcd: boolean): LocalBroker[] => [b.nats, b.kafka, ...(etcd ? [b.etcd] : [])];

/** Whether the first host:port of `address` (a URL or a comma-separated list) accepts TCP connections. */
function reachable(address: string, timeoutMs: number): Promise<boolean> {
  const m = /^(?:[a-z]+:\/\/)?([^:/,]+):(\d+)/.exec(address.split(',')[0]!.trim());
  if (!m) throw new Error(`cannot read host:port from ${address}`);
  return tcpOpen(m[1]!, Number(m[2]), timeoutMs);
}

interface BrokersUpOptions {
  /** The secured pair (see `localBrokers`). */
  secure?: boolean;
  /** Also start (or check) etcd; `etcdEndpoints` and `readyMs.etcd` are only set with it. */
  etcd?: boolean;
}

/**
 * Installs what is missing and starts the brokers (an external one must answer); logs each as
 * ready. `readyMs`: ms to ready of a broker started here, null for an external one. `endpoints`:
 * the NATS URL, the Kafka bootstrap address and, when etcd was asked for, its client URL(s).
 */
export async function brokersUp(log: (m: string) => void, opts: BrokersUpOptions = {}) {
  const b = await localBrokers({ secure: opts.secure === true });
  const brokers = layoutBrokers(b, opts.etcd === true);
  // Installs run one after the other so their output stays readable; the brokers then start together.
  for (const x of brokers) if (x.proc) await INSTALL[x.name](log);
  const readyMs = Object.fromEntries(
    await Promise.all(
      brokers.map(async (x): Promise<[BrokerName, number | null]> => {
        if (x.proc) return [x.name, await x.proc.start()];
        if (!(await reachable(x.address, 2000))) throw new Error(`${x.variable}=${x.address} is not reachable`);
        return [x.name, null];
      }),
    ),
  );
  for (const x of brokers) log(`${x.name} ready at ${x.address}${x.proc ? ` (started in ${readyMs[x.name]} ms)` : ' (external)'}`);
  const endpoints = { natsUrl: b.nats.address, kafkaBrokers: b.kafka.address, ...(opts.etcd === true ? { etcdEndpoints: b.etcd.address } : {}) };
  return { endpoints, readyMs };
}

export async function brokersStatus(opts: { secure?: boolean } = {}) {
  const b = await localBrokers(opts);
  return Promise.all(
    layoutBrokers(b, opts.secure !== true).map(async ({ name, proc, address }) => {
      const pid = proc?.pid();
      return {
        name,
        mode: proc ? 'managed' : 'external',
        address,
        pid: pid ?? null,
        reachable: await reachable(address, 1000),
        stalePidFile: proc !== undefined && pid === undefined && existsSync(proc.pidFile),
        logFile: proc ? proc.logFile : null,
      };
    }),
  );
}

/** Stops only the brokers that `up` started (pid files); external brokers are left alone. */
export async function brokersDown(log: (m: string) => void, opts: { secure?: boolean } = {}): Promise<void> {
  const b = await localBrokers(opts);
  await Promise.all(
    layoutBrokers(b, opts.secure !== true).map(async ({ proc: p }) => {
      if (!p) return;
      const pid = p.pid();
      if (pid === undefined) {
        if (existsSync(p.pidFile)) log(`${p.name}: removing stale pid file ${p.pidFile}`);
        else log(`${p.name}: not running`);
      } else log(`${p.name}: stopping pid ${pid}`);
      await p.stop();
    }),
  );
}
