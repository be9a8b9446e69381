/**
 * The long-lived local broker pair behind `infra up|down|status` (and the README's
 * main command): fixed ports on 127.0.0.1, data and pid files under .infra/run.
 * When NATS_URL or KAFKA_BROKERS is set, that broker is used as it is and
 * nothing is started or stopped for it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tcpOpen } from './exec';
import { kafkaBroker, natsBroker, type KafkaBroker, type NatsBroker } from './brokers';
import { ensureKafkaJars, ensureNatsServer } from './install';
import { RUN_DIR } from './paths';

export interface BrokerEndpoints {
  natsUrl: string;
  kafkaBrokers: string;
}

export interface LocalBrokers {
  nats: NatsBroker | undefined; // undefined when NATS_URL points elsewhere
  kafka: KafkaBroker | undefined; // undefined when KAFKA_BROKERS points elsewhere
  endpoints: BrokerEndpoints;
}

function portFromEnv(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0 || n > 65535) throw new Error(`${name}=${v} is not a TCP port`);
  return n;
}

export async function localBrokers(): Promise<LocalBrokers> {
  const externalNats = process.env.NATS_URL;
  const externalKafka = process.env.KAFKA_BROKERS;
  const nats = externalNats
    ? undefined
    : await natsBroker({
        dir: join(RUN_DIR, 'nats'),
        port: portFromEnv('VANTAGE_NATS_PORT', 4222),
        monitorPort: portFromEnv('VANTAGE_NATS_MONITOR_PORT', 8222),
      });
  const kafka = externalKafka
    ? undefined
    : await kafkaBroker({
        dir: join(RUN_DIR, 'kafka'),
        port: portFromEnv('VANTAGE_KAFKA_PORT', 9092),
        controllerPort: portFromEnv('VANTAGE_KAFKA_CONTROLLER_PORT', 9093),
        heapMb: 768,
        internalPartitions: 3,
      });
  return {
    nats,
    kafka,
    endpoints: { natsUrl: externalNats ?? nats!.url, kafkaBrokers: externalKafka ?? kafka!.brokers },
  };
}

function hostPort(s: string): { host: string; port: number } {
  const m = /^(?:[a-z]+:\/\/)?([^:/,]+):(\d+)/.exec(s.split(',')[0]!.trim());
  if (!m) throw new Error(`cannot read host:port from ${s}`);
  return { host: m[1]!, port: Number(m[2]) };
}

export async function brokersUp(log: (m: string) => void): Promise<{ endpoints: BrokerEndpoints; readyMs: { nats: number | null; kafka: number | null } }> {
  const b = await localBrokers();
  // Installs run one after the other so their output stays readable; the brokers then start together.
  if (b.nats) await ensureNatsServer(log);
  if (b.kafka) await ensureKafkaJars(log);
  const [natsMs, kafkaMs] = await Promise.all([
    b.nats ? b.nats.start() : checkExternal('NATS_URL', b.endpoints.natsUrl),
    b.kafka ? b.kafka.start() : checkExternal('KAFKA_BROKERS', b.endpoints.kafkaBrokers),
  ]);
  return { endpoints: b.endpoints, readyMs: { nats: b.nats ? natsMs : null, kafka: b.kafka ? kafkaMs : null } };
}

async function checkExternal(name: string, addr: string): Promise<number> {
  const { host, port } = hostPort(addr);
  const t0 = Date.now();
  if (!(await tcpOpen(host, port, 2000))) throw new Error(`${name}=${addr} is not reachable`);
  return Date.now() - t0;
}

export interface BrokerStatus {
  name: string;
  mode: 'managed' | 'external';
  address: string;
  pid: number | null;
  reachable: boolean;
  stalePidFile: boolean;
  logFile: string | null;
}

export async function brokersStatus(): Promise<BrokerStatus[]> {
  const b = await localBrokers();
  const one = async (name: string, proc: NatsBroker | KafkaBroker | undefined, address: string): Promise<BrokerStatus> => {
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
  return Promise.all([one('nats', b.nats, b.endpoints.natsUrl), one('kafka', b.kafka, b.endpoints.kafkaBrokers)]);
}

/** Stops only the brokers that `up` started (pid files); external brokers are left alone. */
export async function brokersDown(log: (m: string) => void): Promise<void> {
  const b = await localBrokers();
  await Promise.all(
    [b.nats, b.kafka].map(async (p) => {
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
