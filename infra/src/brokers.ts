/**
 * nats-server, Kafka and etcd as child processes, started, checked and stopped through pid files
 * (infra/README.md, `brokers.ts`: process groups, readiness, why stale pid files are safe).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { alive, endAtExit, forgetAtExit, freePort, httpOk, processMatches, run, signalProcess, spawnLogged, tcpOpen, untilReady, waitFor } from './exec';
import { ensureEtcd, ensureKafkaJars, ensureNatsServer } from './install';
import { kafkaListenerProperties, kafkaScramFormatArgs, kafkaSecureProperties, natsServerConfig, writeSecretFile, type KafkaSecurity, type NatsSecurity } from './secure';

export type BrokerProcess = ReturnType<typeof makeProcess>;

export interface NatsBroker extends BrokerProcess {
  readonly url: string;
  readonly port: number;
}

export interface EtcdServer extends BrokerProcess {
  /** Client URL, `http://127.0.0.1:port` (what Dynamo's `ETCD_ENDPOINTS` takes). */
  readonly endpoint: string;
  readonly clientPort: number;
}

export interface KafkaBroker extends BrokerProcess {
  /** Bootstrap address, `127.0.0.1:port`. */
  readonly brokers: string;
  readonly port: number;
}

function readPid(pidFile: string): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const n = Number.parseInt(readFileSync(pidFile, 'utf8').trim(), 10);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/** Where a broker keeps its data, pid file and log, and whether it ends with this Node process. */
interface BrokerOptions {
  dir: string;
  /** End with this Node process (tests) rather than outlive it (`infra up`). */
  attached?: boolean;
}

interface SpawnSpec {
  name: string;
  marker: string; // a string in the command line identifying our process (the data dir)
  command: () => Promise<{ cmd: string; args: string[] }>;
  ready: () => Promise<boolean>;
  readyTimeoutMs: number;
}

function makeProcess({ dir, attached = false }: BrokerOptions, spec: SpawnSpec) {
  const pidFile = join(dir, `${spec.name}.pid`);
  const logFile = join(dir, `${spec.name}.log`);
  /** Pid of the running process (ours: its command line names `marker`), or undefined. */
  const pid = (): number | undefined => {
    const p = readPid(pidFile);
    return p !== undefined && processMatches(p, spec.marker) ? p : undefined;
  };
  const waitGone = (p: number, ms: number): Promise<boolean> =>
    waitFor(`pid ${p} gone`, () => Promise.resolve(!alive(p)), ms, 50).then(
      () => true,
      () => false,
    );
  /** SIGKILL the process group (the JVM's helpers too), or the process alone; it may already be gone. */
  const hardKill = async (p: number): Promise<void> => {
    if (!signalProcess(p, 'SIGKILL', true)) signalProcess(p, 'SIGKILL');
    await waitGone(p, 5_000);
    forgetAtExit(p);
  };
  return {
    name: spec.name,
    pidFile,
    logFile,
    pid,
    /** Start (again, on the same ports and data); resolves with the ms to ready. */
    async start(): Promise<number> {
      const existing = pid();
      if (existing !== undefined) {
        // Already ours and running: idempotent start only checks readiness.
        return waitFor(`${spec.name} (pid ${existing})`, spec.ready, spec.readyTimeoutMs);
      }
      rmSync(pidFile, { force: true }); // stale: process gone or pid reused
      mkdirSync(dir, { recursive: true });
      const { cmd, args } = await spec.command();
      const { child, proc } = spawnLogged(cmd, args, { env: process.env, logFile, stdio: 'log', group: true, cwd: process.cwd() });
      child.unref();
      writeFileSync(pidFile, `${proc.pid}\n`);
      // Attached (tests): its process group ends with this Node process rather than outliving it.
      if (attached) endAtExit(proc.pid, true);
      // Not ready in time: left running (`infra up` again waits for it, `infra down` stops it).
      return untilReady(proc, spec.name, spec.ready, spec.readyTimeoutMs, false);
    },
    /** SIGTERM, then SIGKILL after the grace period; resolves when the process is gone. */
    async stop(graceMs = 20_000): Promise<void> {
      const p = pid();
      if (p !== undefined) {
        signalProcess(p, 'SIGTERM');
        if (await waitGone(p, graceMs)) forgetAtExit(p);
        else await hardKill(p);
      }
      rmSync(pidFile, { force: true });
    },
    /** SIGKILL, leaving the pid file behind as a crash would. */
    async kill9(): Promise<void> {
      const p = pid();
      if (p !== undefined) await hardKill(p);
    },
  };
}

export interface NatsOptions extends BrokerOptions {
  port?: number;
  monitorPort?: number;
  /**
   * Security (TLS, users and permissions, token or operator mode): the server then runs from a
   * generated configuration file (`nats.conf` in `dir`, mode 0600) instead of command-line flags.
   */
  security?: NatsSecurity;
}

/** A nats-server with JetStream on 127.0.0.1 (store under `dir`). Not started until `start()`. */
export async function natsBroker(opts: NatsOptions): Promise<NatsBroker> {
  const port = opts.port ?? (await freePort());
  const monitorPort = opts.monitorPort ?? (await freePort());
  const storeDir = join(opts.dir, 'jetstream');
  const confFile = join(opts.dir, 'nats.conf');
  const security = opts.security;
  const proc = makeProcess(opts, {
    name: 'nats-server',
    marker: security === undefined ? storeDir : confFile,
    readyTimeoutMs: 15_000,
    command: async () => {
      const cmd = await ensureNatsServer();
      if (security === undefined) {
        return { cmd, args: ['-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort), '-js', '-sd', storeDir, '-n', `vantage-${port}`] };
      }
      // Holds passwords or tokens: readable by its owner only.
      writeSecretFile(confFile, natsServerConfig({ ...security, port, monitorPort, storeDir }));
      return { cmd, args: ['-c', confFile] };
    },
    ready: () => httpOk(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`),
  });
  return { ...proc, url: `${security?.tls === undefined ? 'nats' : 'tls'}://127.0.0.1:${port}`, port };
}

interface EtcdOptions extends BrokerOptions {
  clientPort?: number;
  peerPort?: number;
}

/**
 * A single-member etcd on 127.0.0.1 (client and peer ports both loopback, data under `dir`),
 * Dynamo's production discovery store. A restart on the same dir keeps its data and revisions.
 */
export async function etcdServer(opts: EtcdOptions): Promise<EtcdServer> {
  const clientPort = opts.clientPort ?? (await freePort());
  const peerPort = opts.peerPort ?? (await freePort());
  const dataDir = join(opts.dir, 'data');
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const name = `vantage-${clientPort}`;
  const proc = makeProcess(opts, {
    name: 'etcd',
    marker: dataDir,
    readyTimeoutMs: 20_000,
    command: async () => ({
      cmd: await ensureEtcd(),
      args: [
        '--name', name,
        '--data-dir', dataDir,
        '--listen-client-urls', endpoint,
        '--advertise-client-urls', endpoint,
        '--listen-peer-urls', peer,
        '--initial-advertise-peer-urls', peer,
        '--initial-cluster', `${name}=${peer}`,
        '--initial-cluster-state', 'new',
        '--log-level', 'warn',
      ],
    }),
    ready: () => httpOk(`${endpoint}/health`, (body) => (body as { health?: unknown }).health === 'true'),
  });
  return { ...proc, endpoint, clientPort };
}

interface KafkaOptions extends BrokerOptions {
  port?: number;
  controllerPort?: number;
  heapMb?: number;
  /** Partitions of __consumer_offsets and the transaction log (1 keeps a test broker quick to start). */
  internalPartitions?: number;
  /** A SASL_SSL client listener (SCRAM users created at format time, PLAIN users in JAAS) instead of PLAINTEXT. */
  security?: KafkaSecurity;
}

/** Fixed cluster id: the data directory is formatted once and reused across restarts. */
const KAFKA_CLUSTER_ID = 'dmFudGFnZS1rYWZrYS0x';

/** A single-node KRaft Kafka broker (combined broker and controller) on 127.0.0.1. */
export async function kafkaBroker(opts: KafkaOptions): Promise<KafkaBroker> {
  const port = opts.port ?? (await freePort());
  const controllerPort = opts.controllerPort ?? (await freePort());
  const dataDir = join(opts.dir, 'data');
  const heap = opts.heapMb ?? 512;
  const internal = opts.internalPartitions ?? 1;
  const propsFile = join(opts.dir, 'server.properties');
  const log4jFile = join(opts.dir, 'log4j2.properties');
  const serverLog = join(opts.dir, 'server.log');
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
  const properties = [
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
    ...(opts.security === undefined ? kafkaListenerProperties('PLAINTEXT', port, controllerPort) : kafkaSecureProperties(opts.security, port, controllerPort)),
    'controller.listener.names=CONTROLLER',
    `log.dirs=${dataDir}`,
    'num.partitions=1',
    'offsets.topic.replication.factor=1',
    `offsets.topic.num.partitions=${internal}`,
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    `transaction.state.log.num.partitions=${internal}`,
    'share.coordinator.state.topic.replication.factor=1',
    'share.coordinator.state.topic.min.isr=1',
    'group.initial.rebalance.delay.ms=0',
    'auto.create.topics.enable=false',
    '',
  ];
  const log4j = [
    'status = warn',
    'appender.file.type = File',
    'appender.file.name = FILE',
    `appender.file.fileName = ${serverLog}`,
    'appender.file.layout.type = PatternLayout',
    'appender.file.layout.pattern = [%d] %p %m (%c)%n',
    'rootLogger.level = INFO',
    'rootLogger.appenderRef.file.ref = FILE',
    '',
  ];

  // Readiness reads only what the server logged since this start (restarts append).
  let serverLogOffset = 0;
  const proc = makeProcess(opts, {
    name: 'kafka',
    marker: propsFile,
    readyTimeoutMs: 60_000,
    command: async () => {
      const libs = await ensureKafkaJars();
      // With security it holds the PLAIN users' and the broker's own passwords.
      writeSecretFile(propsFile, properties.join('\n'));
      writeFileSync(log4jFile, log4j.join('\n'));
      serverLogOffset = existsSync(serverLog) ? statSync(serverLog).size : 0;
      const jvm = [`-Xms${Math.min(256, heap)}m`, `-Xmx${heap}m`, `-Dlog4j2.configurationFile=${log4jFile}`, '-cp', `${libs}/*`];
      if (!existsSync(join(dataDir, 'meta.properties'))) {
        const scram = opts.security === undefined ? [] : kafkaScramFormatArgs(opts.security);
        run(java, [...jvm, 'kafka.tools.StorageTool', 'format', '-t', KAFKA_CLUSTER_ID, '-c', propsFile, '--ignore-formatted', ...scram]);
      }
      return { cmd: java, args: [...jvm, 'kafka.Kafka', propsFile] };
    },
    // The listener accepts before the broker has caught up with its metadata log; the
    // server log says when the broker is actually serving.
    ready: async () =>
      (await tcpOpen('127.0.0.1', port)) && existsSync(serverLog) && readFileSync(serverLog).subarray(serverLogOffset).toString('utf8').includes('Kafka Server started'),
  });
  return { ...proc, brokers: `127.0.0.1:${port}`, port };
}
