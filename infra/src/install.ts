/**
 * Installs the brokers on a fresh machine, idempotently, caching every download
 * under .infra/ so a second run does nothing:
 *  - nats-server: a pinned release built with `go install` into .infra/bin
 *    (Go's module cache under .infra/gomod); if Go is missing, Debian's
 *    `nats-server` package; NATS_SERVER_BIN overrides both.
 *  - Kafka: the official org.apache.kafka:kafka_2.13 jars and their runtime
 *    dependencies copied by Maven into .infra/kafka/<version>/libs (Maven's
 *    repository under .infra/m2).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run, runVisible, which } from './exec';
import { BIN_DIR, INFRA_DIR, REPO_ROOT } from './paths';

export const NATS_SERVER_VERSION = 'v2.14.9';
export const KAFKA_VERSION = '4.1.1';

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
      env: {
        GOBIN: BIN_DIR,
        GOMODCACHE: join(INFRA_DIR, 'gomod'),
        GOCACHE: join(INFRA_DIR, 'gocache'),
        GOFLAGS: '-modcacherw',
        GO111MODULE: 'on',
      },
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

export function kafkaLibDir(version = KAFKA_VERSION): string {
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
