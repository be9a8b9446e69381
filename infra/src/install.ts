/**
 * Installs the brokers on a fresh machine, idempotently, caching every download
 * under .infra/ so a second run does nothing:
 *  - nats-server: a pinned release built with `go install` into .infra/bin
 *    (Go's module cache under .infra/gomod); if Go is missing, Debian's
 *    `nats-server` package; NATS_SERVER_BIN overrides both.
 *  - Kafka: the official org.apache.kafka:kafka_2.13 jars and their runtime
 *    dependencies copied by Maven into .infra/kafka/<version>/libs (Maven's
 *    repository under .infra/m2).
 *  - etcd (Dynamo's production discovery store): the pinned server built with
 *    `go build` from infra/etcd/go.mod into .infra/bin/etcd (same Go caches);
 *    if Go is missing, an `etcd` on PATH or Debian's `etcd-server` package;
 *    ETCD_BIN overrides all three.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, runVisible, which } from './exec';
import { BIN_DIR, INFRA_DIR, REPO_ROOT } from './paths';

const NATS_SERVER_VERSION = 'v2.14.9';
const KAFKA_VERSION = '4.1.1';
/** Must equal the `go.etcd.io/etcd/server/v3` version required by infra/etcd/go.mod (a unit test checks). */
export const ETCD_VERSION = 'v3.6.16';
/** The module that pins etcd's build (see its header comment). */
export const ETCD_MODULE_DIR = join(REPO_ROOT, 'infra', 'etcd');

type Log = (msg: string) => void;

function natsVersionOf(bin: string): string | undefined {
  try {
    return run(bin, ['--version']).trim();
  } catch {
    return undefined;
  }
}

/** Path of a usable nats-server with JetStream, installing one if needed. */
export async function ensureNatsServer(log: Log = () => {}): Promise<string> {
  const override = process.env.NATS_SERVER_BIN;
  if (override) {
    if (!natsVersionOf(override)) throw new Error(`NATS_SERVER_BIN=${override} is not a runnable nats-server`);
    return override;
  }
  const local = join(BIN_DIR, 'nats-server');
  const stamp = join(BIN_DIR, 'nats-server.version');
  if (existsSync(local) && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === NATS_SERVER_VERSION) return local;
  mkdirSync(BIN_DIR, { recursive: true });
  if (which('go')) {
    log(`installing nats-server ${NATS_SERVER_VERSION} with go install (cached under .infra/)`);
    await runVisible('go', ['install', `github.com/nats-io/nats-server/v2@${NATS_SERVER_VERSION}`], {
      cwd: INFRA_DIR,
      env: { GOBIN: BIN_DIR, ...goEnv() },
    });
    if (!natsVersionOf(local)) throw new Error(`go install finished but ${local} does not run`);
    writeFileSync(stamp, NATS_SERVER_VERSION + '\n');
    return local;
  }
  const system = which('nats-server');
  if (system) return system;
  if (which('apt-get')) {
    log("installing Debian's nats-server package");
    await runVisible('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server']);
    const p = which('nats-server');
    if (p) return p;
  }
  throw new Error('no nats-server: install Go (for go install) or Debian\'s nats-server package, or set NATS_SERVER_BIN');
}

const goEnv = (): NodeJS.ProcessEnv => ({
  GOMODCACHE: join(INFRA_DIR, 'gomod'),
  GOCACHE: join(INFRA_DIR, 'gocache'),
  GOFLAGS: '-modcacherw',
  GO111MODULE: 'on',
});

/** `3.6.16` from `etcd --version` ("etcd Version: 3.6.16"), or undefined when it does not run. */
function etcdVersionOf(bin: string): string | undefined {
  try {
    const m = /etcd Version:\s*(\S+)/.exec(run(bin, ['--version']));
    return m?.[1];
  } catch {
    return undefined;
  }
}

/**
 * Path of a usable etcd server, building the pinned one if needed. The first build compiles etcd
 * and its gRPC stack (on this project's 2-core host about 45 s with Go's module cache warm, a
 * few minutes cold); later calls return at once from the version stamp.
 */
export async function ensureEtcd(log: Log = () => {}): Promise<string> {
  const override = process.env.ETCD_BIN;
  if (override) {
    if (!etcdVersionOf(override)) throw new Error(`ETCD_BIN=${override} is not a runnable etcd`);
    return override;
  }
  const local = join(BIN_DIR, 'etcd');
  const stamp = join(BIN_DIR, 'etcd.version');
  if (existsSync(local) && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === ETCD_VERSION) return local;
  mkdirSync(BIN_DIR, { recursive: true });
  if (which('go')) {
    log(`building etcd ${ETCD_VERSION} with go build (cached under .infra/)`);
    // Built to a temporary name and renamed, so a build interrupted half-way never leaves a
    // broken binary behind the stamp check.
    const tmp = `${local}.build-${process.pid}`;
    try {
      await runVisible('go', ['build', '-o', tmp, 'go.etcd.io/etcd/server/v3'], { cwd: ETCD_MODULE_DIR, env: goEnv() });
      renameSync(tmp, local);
    } finally {
      rmSync(tmp, { force: true });
    }
    const v = etcdVersionOf(local);
    if (v === undefined || `v${v}` !== ETCD_VERSION) throw new Error(`go build finished but ${local} reports version ${v ?? '(does not run)'}`);
    writeFileSync(stamp, ETCD_VERSION + '\n');
    return local;
  }
  const system = which('etcd');
  if (system && etcdVersionOf(system)) return system;
  if (which('apt-get')) {
    log("installing Debian's etcd-server package");
    await runVisible('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server']);
    const p = which('etcd');
    if (p && etcdVersionOf(p)) return p;
  }
  throw new Error("no etcd: install Go (to build it) or Debian's etcd-server package, or set ETCD_BIN");
}

function kafkaLibDir(version = KAFKA_VERSION): string {
  return join(INFRA_DIR, 'kafka', version, 'libs');
}

/** Directory holding the Kafka broker jars, fetching them with Maven if needed. */
export async function ensureKafkaJars(log: Log = () => {}, version = KAFKA_VERSION): Promise<string> {
  const libs = kafkaLibDir(version);
  const complete = join(libs, '.complete');
  if (existsSync(complete)) return libs;
  if (!which('mvn')) throw new Error('Maven (mvn) is needed to fetch the Kafka broker jars');
  if (!which('java')) throw new Error('Java 17+ is needed to run the Kafka broker');
  log(`fetching Apache Kafka ${version} broker jars with Maven (cached under .infra/)`);
  await runVisible('mvn', [
    '-B', '-q', '-Dstyle.color=never',
    `-Dmaven.repo.local=${join(INFRA_DIR, 'm2')}`,
    `-Dkafka.version=${version}`,
    '-f', join(REPO_ROOT, 'infra', 'kafka', 'pom.xml'),
    'dependency:copy-dependencies',
    `-DoutputDirectory=${libs}`,
    '-DincludeScope=runtime',
  ]);
  writeFileSync(complete, `${version}\n`);
  return libs;
}
