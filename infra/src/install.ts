/**
 * Installs the brokers on a fresh machine, idempotently, caching every download under .infra/ so a
 * second run does nothing: nats-server and etcd built by Go at pinned versions (or Debian's
 * packages), Kafka's jars fetched by Maven (infra/README.md, `install.ts`).
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

/**
 * Path of a usable `bin`: `process.env[override]` if set, else the pinned `version` in `.infra/bin`
 * (built with `build` when Go is there; a later call returns at once from the version stamp), else
 * one on `PATH` or from Debian's package. `versionOf` is what `bin --version` says (containing
 * `version` for the pinned one), undefined when it does not run.
 */
async function ensureGoServer(
  bin: string,
  version: string,
  override: string,
  debianPackage: string,
  versionOf: (bin: string) => string | undefined,
  build: (local: string) => Promise<void>,
  log: Log,
): Promise<string> {
  const given = process.env[override];
  if (given) {
    if (!versionOf(given)) throw new Error(`${override}=${given} is not a runnable ${bin}`);
    return given;
  }
  const local = join(BIN_DIR, bin);
  const stamp = join(BIN_DIR, `${bin}.version`);
  if (existsSync(local) && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === version) return local;
  mkdirSync(BIN_DIR, { recursive: true });
  if (which('go')) {
    log(`building ${bin} ${version} with Go (cached under .infra/)`);
    await build(local);
    const v = versionOf(local);
    if (!v?.includes(version)) throw new Error(`the build finished but ${local} reports ${v ?? '(does not run)'}`);
    writeFileSync(stamp, version + '\n');
    return local;
  }
  const system = which(bin);
  if (system && versionOf(system)) return system;
  if (which('apt-get')) {
    log(`installing Debian's ${debianPackage} package`);
    await runVisible('sh', ['-c', `apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${debianPackage}`]);
    const p = which(bin);
    if (p && versionOf(p)) return p;
  }
  throw new Error(`no ${bin}: install Go (to build it) or Debian's ${debianPackage} package, or set ${override}`);
}

function versionOutput(bin: string): string | undefined {
  try {
    return run(bin, ['--version']).trim();
  } catch {
    return undefined;
  }
}

const goEnv = (): NodeJS.ProcessEnv => ({
  GOMODCACHE: join(INFRA_DIR, 'gomod'),
  GOCACHE: join(INFRA_DIR, 'gocache'),
  GOFLAGS: '-modcacherw',
  GO111MODULE: 'on',
});

/** Path of a usable nats-server with JetStream, installing one if needed. */
export function ensureNatsServer(log: Log = () => {}): Promise<string> {
  const build = (): Promise<void> =>
    runVisible('go', ['install', `github.com/nats-io/nats-server/v2@${NATS_SERVER_VERSION}`], { cwd: INFRA_DIR, env: { GOBIN: BIN_DIR, ...goEnv() } });
  return ensureGoServer('nats-server', NATS_SERVER_VERSION, 'NATS_SERVER_BIN', 'nats-server', versionOutput, build, log);
}

/** `v3.6.16` from `etcd --version` ("etcd Version: 3.6.16"). */
function etcdVersionOf(bin: string): string | undefined {
  const m = /etcd Version:\s*(\S+)/.exec(versionOutput(bin) ?? '');
  return m === null ? undefined : `v${m[1]}`;
}

/** Path of a usable etcd server, building the pinned one if needed (the first build's cost: infra/README.md). */
export function ensureEtcd(log: Log = () => {}): Promise<string> {
  const build = async (local: string): Promise<void> => {
    // Built to a temporary name and renamed, so a build interrupted half-way never leaves a
    // broken binary behind the stamp check.
    const tmp = `${local}.build-${process.pid}`;
    try {
      await runVisible('go', ['build', '-o', tmp, 'go.etcd.io/etcd/server/v3'], { cwd: ETCD_MODULE_DIR, env: goEnv() });
      renameSync(tmp, local);
    } finally {
      rmSync(tmp, { force: true });
    }
  };
  return ensureGoServer('etcd', ETCD_VERSION, 'ETCD_BIN', 'etcd-server', etcdVersionOf, build, log);
}

/** Directory holding the Kafka broker jars, fetching them with Maven if needed. */
export async function ensureKafkaJars(log: Log = () => {}): Promise<string> {
  const libs = join(INFRA_DIR, 'kafka', KAFKA_VERSION, 'libs');
  const complete = join(libs, '.complete');
  if (existsSync(complete)) return libs;
  if (!which('mvn')) throw new Error('Maven (mvn) is needed to fetch the Kafka broker jars');
  if (!which('java')) throw new Error('Java 17+ is needed to run the Kafka broker');
  log(`fetching Apache Kafka ${KAFKA_VERSION} broker jars with Maven (cached under .infra/)`);
  await runVisible('mvn', [
    '-B', '-q', '-Dstyle.color=never',
    `-Dmaven.repo.local=${join(INFRA_DIR, 'm2')}`,
    `-Dkafka.version=${KAFKA_VERSION}`,
    '-f', join(REPO_ROOT, 'infra', 'kafka', 'pom.xml'),
    'dependency:copy-dependencies',
    `-DoutputDirectory=${libs}`,
    '-DincludeScope=runtime',
  ]);
  writeFileSync(complete, `${KAFKA_VERSION}\n`);
  return libs;
}
