/**
 * The long-lived local brokers behind `infra up|down|status` (and the README's
 * main command): fixed ports on 127.0.0.1, data and pid files under .infra/run.
 * nats-server and Kafka always; etcd (Dynamo's discovery store) when asked for
 * (`infra up` does; the main job does not need it). When NATS_URL, KAFKA_BROKERS
 * or ETCD_ENDPOINTS is set, that broker is used as it is and nothing is started
 * or stopped for it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tcpOpen } from './exec';
import { etcdServer, kafkaBroker, natsBroker, type EtcdServer, type KafkaBroker, type NatsBroker } from './brokers';
import { ensureEtcd, ensureKafkaJars, ensureNatsServer } from './install';
import { RUN_DIR } from './paths';
import { JOB_LAYOUT, secureDeployment, type SecureDeployment } from './secure';

interface BrokerEndpoints {
  natsUrl: string;
  kafkaBrokers: string;
  /** etcd client URL(s), comma-separated as Dynamo's `ETCD_ENDPOINTS`; set when etcd was asked for. */
  etcdEndpoints?: string;
}

interface LocalBrokers {
  nats: NatsBroker | undefined; // undefined when NATS_URL points elsewhere
  kafka: KafkaBroker | undefined; // undefined when KAFKA_BROKERS points elsewhere
  etcd: EtcdServer | undefined; // undefined when ETCD_ENDPOINTS points elsewhere
  endpoints: BrokerEndpoints;
}

function portFromEnv(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0 || n > 65535) throw new Error(`${name}=${v} is not a TCP port`);
  return n;
}

/** Where the secured pair keeps its data, certificates and secrets (`infra up --secure`). */
const SECURE_DIR = join(RUN_DIR, 'secure');

/** The secured deployment (certificates, users, secret files) of `infra up --secure`, made on first use. */
export function localSecureDeployment(): SecureDeployment {
  return secureDeployment(SECURE_DIR, JOB_LAYOUT);
}

/**
 * The local pair. `secure`: nats-server with TLS (client certificates required) and one
 * least-privilege user per role, Kafka with only a SASL_SSL listener (SCRAM-SHA-512); their
 * data lives under `.infra/run/secure/` so it never mixes with the open pair's.
 */
export async function localBrokers(opts: { secure?: boolean } = {}): Promise<LocalBrokers> {
  const externalNats = process.env.NATS_URL;
  const externalKafka = process.env.KAFKA_BROKERS;
  const externalEtcd = process.env.ETCD_ENDPOINTS;
  const secure = opts.secure === true ? localSecureDeployment() : undefined;
  const base = secure === undefined ? RUN_DIR : SECURE_DIR;
  const nats = externalNats
    ? undefined
    : await natsBroker({
        dir: join(base, 'nats'),
        port: portFromEnv('VANTAGE_NATS_PORT', 4222),
        monitorPort: portFromEnv('VANTAGE_NATS_MONITOR_PORT', 8222),
        ...(secure === undefined ? {} : { security: secure.nats }),
      });
  const kafka = externalKafka
    ? undefined
    : await kafkaBroker({
        dir: join(base, 'kafka'),
        port: portFromEnv('VANTAGE_KAFKA_PORT', 9092),
        controllerPort: portFromEnv('VANTAGE_KAFKA_CONTROLLER_PORT', 9093),
        heapMb: 768,
        internalPartitions: 3,
        ...(secure === undefined ? {} : { security: secure.kafka }),
      });
  // Plain (no TLS, no users) in both layouts: `up --secure` does not start it.
  const etcd = externalEtcd
    ? undefined
    : await etcdServer({
        dir: join(RUN_DIR, 'etcd'),
        clientPort: portFromEnv('VANTAGE_ETCD_PORT', 2379),
        peerPort: portFromEnv('VANTAGE_ETCD_PEER_PORT', 2380),
      });
  return {
    nats,
    kafka,
    etcd,
    endpoints: {
      natsUrl: externalNats ?? nats!.url,
      kafkaBrokers: externalKafka ?? kafka!.brokers,
      etcdEndpoints: externalEtcd ?? etcd!.endpoint,
    },
  };
}

function hostPort(s: string): { host: string; port: number } {
  const m = /^(?:[a-z]+:\/\/)?([^:/,]+):(\d+)/.exec(s.split(',')[0]!.trim());
  if (!m) throw new Error(`cannot read host:port from ${s}`);
  return { host: m[1]!, port: Number(m[2]) };
}

interface BrokersUpOptions {
  /** The secured pair (see `localBrokers`). */
  secure?: boolean;
  /** Also start (or check) etcd; `etcdEndpoints` and `readyMs.etcd` are only set with it. */
  etcd?: boolean;
}

export async function brokersUp(
  log: (m: string) => void,
  opts: BrokersUpOptions = {},
): Promise<{ endpoints: BrokerEndpoints; readyMs: { nats: number | null; kafka: number | null; etcd?: number | null } }> {
  const b = await localBrokers({ secure: opts.secure === true });
  const withEtcd = opts.etcd === true;
  // Installs run one after the other so their output stays readable; the brokers then start together.
  if (b.nats) await ensureNatsServer(log);
  if (b.kafka) await ensureKafkaJars(log);
  if (withEtcd && b.etcd) await ensureEtcd(log);
  /** ms to ready of a broker started here; null for an external one, once it answers. */
  const up = async (p: { start(): Promise<number> } | undefined, name: string, addr: string): Promise<number | null> => {
    if (p) return p.start();
    const { host, port } = hostPort(addr);
    if (!(await tcpOpen(host, port, 2000))) throw new Error(`${name}=${addr} is not reachable`);
    return null;
  };
  const [nats, kafka, etcd] = await Promise.all([
    up(b.nats, 'NATS_URL', b.endpoints.natsUrl),
    up(b.kafka, 'KAFKA_BROKERS', b.endpoints.kafkaBrokers),
    withEtcd ? up(b.etcd, 'ETCD_ENDPOINTS', b.endpoints.etcdEndpoints!) : null,
  ]);
  if (!withEtcd) return { endpoints: { natsUrl: b.endpoints.natsUrl, kafkaBrokers: b.endpoints.kafkaBrokers }, readyMs: { nats, kafka } };
  return { endpoints: b.endpoints, readyMs: { nats, kafka, etcd } };
}

interface BrokerStatus {
  name: string;
  mode: 'managed' | 'external';
  address: string;
  pid: number | null;
  reachable: boolean;
  stalePidFile: boolean;
  logFile: string | null;
}

export async function brokersStatus(opts: { secure?: boolean } = {}): Promise<BrokerStatus[]> {
  const b = await localBrokers(opts);
  const one = async (name: string, proc: NatsBroker | KafkaBroker | EtcdServer | undefined, address: string): Promise<BrokerStatus> => {
    const { host, port } = hostPort(address);
    const pid = proc?.pid();
    return {
      name,
      mode: proc ? 'managed' : 'external',
      address,
      pid: pid ?? null,
      reachable: await tcpOpen(host, port, 1000),
      stalePidFile: proc !== undefined && pid === undefined && existsSync(proc.pidFile),
      logFile: proc ? proc.logFile : null,
    };
  };
  // etcd belongs to the open layout only (`up --secure` does not start it).
  return Promise.all([
    one('nats', b.nats, b.endpoints.natsUrl),
    one('kafka', b.kafka, b.endpoints.kafkaBrokers),
    ...(opts.secure === true ? [] : [one('etcd', b.etcd, b.endpoints.etcdEndpoints!)]),
  ]);
}

/** Stops only the brokers that `up` started (pid files); external brokers are left alone. */
export async function brokersDown(log: (m: string) => void, opts: { secure?: boolean } = {}): Promise<void> {
  const b = await localBrokers(opts);
  await Promise.all(
    [b.nats, b.kafka, opts.secure === true ? undefined : b.etcd].map(async (p) => {
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
