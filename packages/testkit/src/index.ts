/**
 * Helpers for integration tests against real brokers. Every name a test creates
 * (subject, stream, consumer, topic, group) comes from `uniqueName` so tests never
 * see each other's traffic, and every resource is removed by the cleanup it registers.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureTlsMaterial, etcdServer, INFRA_DIR, kafkaBroker, natsBroker, type EtcdServer, type KafkaBroker, type KafkaSecurity, type NatsBroker, type NatsOptions, type TlsMaterial } from '@vantage/infra';

/** A short unique token safe in NATS subjects, stream names and Kafka topic names. */
export function uniqueName(prefix = 't'): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

function need(name: 'NATS_URL' | 'KAFKA_BROKERS'): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: integration tests run under the testkit global setup (vitest --project integration)`);
  return v;
}

/** URL of the shared test nats-server. */
export const natsUrl = (): string => need('NATS_URL');
/** Bootstrap brokers of the shared test Kafka. */
export const kafkaBrokers = (): string[] => need('KAFKA_BROKERS').split(',');

/** Starts a private server in a fresh folder under `.infra/test/`; its `cleanup()` stops it and removes the folder. */
async function own<T extends { start(): Promise<unknown>; stop(timeoutMs: number): Promise<unknown> }>(
  kind: string,
  stopMs: number,
  make: (dir: string) => Promise<T>,
): Promise<T & { cleanup: () => Promise<void> }> {
  const dir = join(INFRA_DIR, 'test', uniqueName(kind));
  mkdirSync(dir, { recursive: true });
  const server = await make(dir);
  await server.start();
  return Object.assign(server, {
    cleanup: async () => {
      await server.stop(stopMs);
      rmSync(dir, { recursive: true, force: true });
    },
  });
}

/**
 * A private nats-server for tests that restart or kill it, or that need it secured
 * (`security`: TLS, users with permissions, a token or operator mode; see
 * `@vantage/infra`'s `natsServerConfig`). Call `cleanup()` in afterAll.
 */
export function ownNats(opts: { security?: NatsOptions['security'] } = {}): Promise<NatsBroker & { cleanup: () => Promise<void> }> {
  return own('nats', 5_000, (dir) => natsBroker({ dir, attached: true, ...(opts.security === undefined ? {} : { security: opts.security }) }));
}

/**
 * A private Kafka broker for tests that restart or kill it, or (`security`) one whose only
 * client listener is SASL_SSL. Call `cleanup()` in afterAll.
 */
export function ownKafka(opts: { security?: KafkaSecurity } = {}): Promise<KafkaBroker & { cleanup: () => Promise<void> }> {
  return own('kafka', 10_000, (dir) => kafkaBroker({ dir, attached: true, heapMb: 512, ...(opts.security === undefined ? {} : { security: opts.security }) }));
}

/**
 * A private single-member etcd on free 127.0.0.1 client and peer ports, data under `.infra/test/`,
 * ended with the test process if `cleanup()` is never reached. `stop()` / `kill9()` and `start()`
 * restart it on the same ports and data (revisions survive). Call `cleanup()` in afterAll.
 */
export function ownEtcd(): Promise<EtcdServer & { cleanup: () => Promise<void> }> {
  return own('etcd', 5_000, (dir) => etcdServer({ dir, attached: true }));
}

/** Resolves when `check` holds, polling; rejects with `what` after the timeout. */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 25): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * A throwaway CA with a server certificate for 127.0.0.1 and a client certificate, in a
 * fresh folder under `.infra/test` (`name` distinguishes a trusted set from a rogue one).
 * Remove `material.dir` in afterAll.
 */
export function testTlsMaterial(name = 'vantage-test'): TlsMaterial {
  return ensureTlsMaterial(join(INFRA_DIR, 'test', uniqueName('tls')), name);
}

/** Writes `content` to a fresh file under `dir` (mode 0600) and returns its path: secrets for `…File` settings. */
export function secretFile(dir: string, name: string, content: string | Uint8Array): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

/** Dynamo 1.6.1's mocker and a Dynamo-client driver (kept in @vantage/infra, which `npm start -- --dynamo` uses too). */
export {
  startMocker,
  startDynamoDriver,
  type MockerProcess,
  type DynamoDriver,
} from '@vantage/infra';
