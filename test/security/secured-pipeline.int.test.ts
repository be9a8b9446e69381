// The whole pipeline on secured brokers, each service with its own least-privilege NATS user
// (the permission set `infra up --secure` generates) over mutual TLS, and the outcome service
// on Kafka through SASL_SSL with SCRAM-SHA-512: a worker's KV events in, a gateway's route and
// lifecycle, the outcome record in Kafka read back with the replay tool. Then the permissions
// hold (a worker cannot book or publish another pool's KV events; nothing in the index,
// bookings or metrics moves), and a canary secret placed in every secret-bearing setting
// never appears in any log line, error or /metrics output, at start-up, on a failed connect
// or on a configuration error.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, createUser, encodeUser, fmtCreds } from '@nats-io/jwt';
import { createUser as createUserKey } from '@nats-io/nkeys';
import type { GatewayClient } from '@vantage/gateway-client';
import { randomSecret, rolePermissions, type KafkaSecurity } from '@vantage/infra';
import { bookingEventCodec, bookingsSubject, workersSubject } from '@vantage/protocol';
import { connectNats, createLogger, type NatsConnection, type NatsSettings, type RunningService } from '@vantage/runtime';
import { eventually, ownKafka, ownNats, secretFile, testTlsMaterial, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { kvEventsSubject } from '@vantage/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BLOCK,
  C1,
  decisionEnv,
  E1,
  gatewayOn,
  indexerEnv,
  KINDS,
  kvStored,
  observeWorkers,
  pools,
  prompt,
  outcomeRows,
  registration,
  replayTopic,
  routeAndComplete,
  sink,
  startService,
  writeParameterSet,
  type Kind,
  type Sink,
} from './pipeline';

const CANARY = `CANARY-${randomSecret(8)}`;
const roles = rolePermissions(pools);
// Every password holds the canary, so any place that prints a password prints it.
const passwords = Object.fromEntries(roles.map((r) => [r.role, `${CANARY}-${r.role}-${randomSecret(6)}`]));
const tls = testTlsMaterial('pipeline');
const secrets = join(tls.dir, 'secrets');
const kafkaUser = { name: 'outcome', password: `${CANARY}-kafka`, mechanism: 'SCRAM-SHA-512' as const };
const kafkaSecurity: KafkaSecurity = { tls, scramUsers: [kafkaUser], plainUsers: [{ name: 'replay', password: `${CANARY}-replay` }], brokerUser: { name: 'broker', password: randomSecret() } };
const paramsDir = mkdtempSync(join(tmpdir(), 'vantage-secure-'));
const paramsFile = join(paramsDir, 'params.json');

let nats: Awaited<ReturnType<typeof ownNats>>;
let kafka: Awaited<ReturnType<typeof ownKafka>>;
const logs: Record<string, Sink> = {};
const services: Record<string, RunningService<never, boolean>> = {};

const pw = (role: string): string => secretFile(secrets, `${role}.pw`, `${passwords[role]}\n`);

/** A role's NATS settings as VANTAGE_* variables: user, password file, mutual TLS. */
function natsEnv(role: string, over: Record<string, string> = {}): Record<string, string> {
  return {
    VANTAGE_NATS_URL: nats.url,
    VANTAGE_NATS_USER: role,
    VANTAGE_NATS_PASSWORD_FILE: pw(role),
    VANTAGE_NATS_TLS_CA_FILE: tls.caFile,
    VANTAGE_NATS_TLS_CERT_FILE: tls.clientCertFile,
    VANTAGE_NATS_TLS_KEY_FILE: tls.clientKeyFile,
    VANTAGE_NATS_CONNECT_TIMEOUT_MS: '3000',
    VANTAGE_LOG_LEVEL: 'info',
    VANTAGE_SHUTDOWN_DEADLINE_MS: '5000',
    ...over,
  };
}

function clientSettings(role: string, password = passwords[role]!): NatsSettings {
  return {
    url: nats.url,
    name: `test-${role}`,
    reconnectTimeWaitMs: 200,
    reconnectJitterMs: 0,
    maxReconnectAttempts: -1,
    connectTimeoutMs: 3000,
    user: role,
    passwordFile: secretFile(secrets, `${uniqueName(role)}.pw`, password),
    tls: { caFile: tls.caFile, certFile: tls.clientCertFile, keyFile: tls.clientKeyFile },
  };
}

async function start(name: string, kind: Kind, env: Record<string, string>, kafkaToo = false): Promise<RunningService<never, boolean>> {
  const s = sink();
  logs[name] = s;
  const svc = await startService(kind, env, s, kafkaToo);
  services[name] = svc;
  return svc;
}

const kafkaEnv = (passwordFile: string): Record<string, string> => ({
  VANTAGE_KAFKA_BROKERS: kafka.brokers,
  VANTAGE_KAFKA_SSL_CA_FILE: tls.caFile,
  VANTAGE_KAFKA_SASL_MECHANISM: 'scram-sha-512',
  VANTAGE_KAFKA_SASL_USERNAME: kafkaUser.name,
  VANTAGE_KAFKA_SASL_PASSWORD_FILE: passwordFile,
  VANTAGE_KAFKA_RETRIES: '2',
});

let worker: NatsConnection;
let gatewayNc: NatsConnection;
let admin: NatsConnection;
let gateway: GatewayClient;
const workerErrors: string[] = [];
const gatewayErrors: string[] = [];

function watchErrors(nc: NatsConnection, into: string[]): void {
  void (async () => {
    for await (const s of nc.status()) if (s.type === 'error') into.push(String(s.error.message));
  })();
}

const register = (nc: NatsConnection, pool: string, workerId: WorkerId, model: string): void => nc.publish(workersSubject(pool), registration(pool, workerId, model));

async function observe(pool: string, hashes: BigUint64Array): Promise<unknown> {
  return (await observeWorkers(admin, pool, hashes)).map((w) => ({ workerId: w.workerId, K: w.K, R: w.R, P: w.P }));
}

async function metricsOf(name: string): Promise<string> {
  return (await fetch(`http://127.0.0.1:${services[name]!.opsPort}/metrics`)).text();
}

/** The indexer's counters and gauges that any accepted message would move. */
async function indexerFigures(name: string): Promise<string[]> {
  return (await metricsOf(name))
    .split('\n')
    .filter((l) => /^vantage_indexer_(messages_received_total|messages_rejected_total|events_applied_total|bookings|workers|index_blocks)\b/.test(l));
}

async function replay(topic: string, password: string): Promise<{ code: number; out: string; err: string }> {
  const vars = {
    VANTAGE_KAFKA_SSL_CA_FILE: tls.caFile,
    VANTAGE_KAFKA_SASL_MECHANISM: 'plain',
    VANTAGE_KAFKA_SASL_USERNAME: 'replay',
    VANTAGE_KAFKA_SASL_PASSWORD_FILE: secretFile(secrets, `${uniqueName('replay')}.pw`, password),
    VANTAGE_KAFKA_RETRIES: '1',
  };
  Object.assign(process.env, vars);
  try {
    return await replayTopic(kafka.brokers, topic);
  } finally {
    for (const k of Object.keys(vars)) delete process.env[k];
  }
}

beforeAll(async () => {
  [nats, kafka] = await Promise.all([
    ownNats({
      security: {
        tls: { material: tls, verify: true },
        auth: { kind: 'users', users: roles.map((r) => ({ name: r.role, auth: { kind: 'password' as const, password: passwords[r.role]! }, permissions: r })) },
      },
    }),
    ownKafka({ security: kafkaSecurity }),
  ]);
  writeParameterSet(paramsFile);

  await Promise.all(pools.map((pool) => start(`indexer-${pool.name}`, 'indexer', { ...natsEnv(`indexer-${pool.name}`), ...indexerEnv(pool) })));
  await start('decision', 'decision', { ...natsEnv('decision'), ...decisionEnv(paramsFile) });
  await start(
    'outcome',
    'outcome',
    {
      ...natsEnv('outcome'),
      ...kafkaEnv(secretFile(secrets, 'kafka.pw', `${kafkaUser.password}\n`)),
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1000',
      VANTAGE_OUTCOME_TERMINAL_GRACE_MS: '200',
    },
    true,
  );

  worker = await connectNats(clientSettings('worker-efficient'), createLogger({ service: 'worker', instanceId: 't', level: 'silent' }));
  gatewayNc = await connectNats(clientSettings('gateway'), createLogger({ service: 'gateway', instanceId: 't', level: 'silent' }));
  admin = await connectNats(clientSettings('admin'), createLogger({ service: 'admin', instanceId: 't', level: 'silent' }));
  watchErrors(worker, workerErrors);
  watchErrors(gatewayNc, gatewayErrors);
  gateway = gatewayOn(gatewayNc);
}, 180_000);

afterAll(async () => {
  for (const svc of Object.values(services).reverse()) await svc.stop('test done').catch(() => {});
  await Promise.all([worker, gatewayNc, admin].map((nc) => nc?.close()));
  await Promise.all([nats?.cleanup(), kafka?.cleanup()]);
  rmSync(tls.dir, { recursive: true, force: true });
  rmSync(paramsDir, { recursive: true, force: true });
});

describe('secured pipeline', () => {
  let hashes: BigUint64Array;

  it('KV events from a worker user, route and lifecycle from a gateway user, the outcome record in Kafka', async () => {
    hashes = gateway.hashPrompt('efficient', prompt);
    // The capable pool's worker registers through the admin connection: the worker user is efficient's only.
    register(worker, 'efficient', E1, 'model-8b');
    register(admin, 'capable', C1, 'model-70b');
    worker.publish(kvEventsSubject('dyn-e', 'backend'), kvStored(E1, 1n, hashes.subarray(0, 30)));
    await eventually('the efficient indexer holds the worker\'s 30 blocks', async () => {
      const ws = (await observe('efficient', hashes)) as { workerId: bigint; K: number }[];
      const c = (await observe('capable', hashes)) as unknown[];
      return ws.some((w) => w.workerId === E1 && w.K === 30 * BLOCK) && c.length === 1;
    });
    const requestId = uniqueName('req');
    const reply = await routeAndComplete(gateway, requestId, 'sess-secure');
    expect(reply).toMatchObject({ modelRole: 'efficient', pool: 'efficient', workerId: E1 });
    expect(gatewayErrors).toEqual([]);
    expect(workerErrors).toEqual([]);

    const rows = await outcomeRows(requestId, () => replay('vantage.outcomes.v1', `${CANARY}-replay`));
    expect(rows.filter((x) => x['requestId'] === requestId)).toHaveLength(1);
  });

  it('a worker user publishing bookings or another pool\'s KV events gets a permissions violation; index, bookings and metrics do not move', async () => {
    const before = { e: await observe('efficient', hashes), c: await observe('capable', hashes), me: await indexerFigures('indexer-efficient'), mc: await indexerFigures('indexer-capable') };
    const booking = bookingEventCodec.encode({ requestId: uniqueName('evil'), sessionId: 'evil', pool: 'efficient', workerId: E1, dpRank: 0, promptTokens: 4096, overlapBlocks: 0, sequenceHashes: null, localHashes: null, expectedOutputTokens: null, prefillTokens: null, atMs: Date.now() });
    worker.publish(bookingsSubject('efficient'), booking);
    worker.publish(kvEventsSubject('dyn-c', 'backend'), kvStored(C1, 99n, hashes));
    worker.publish(workersSubject('capable'), new Uint8Array([123, 125]));
    gatewayNc.publish(bookingsSubject('capable'), booking);
    await worker.flush();
    await gatewayNc.flush();
    await eventually('three permission violations reported to the worker and one to the gateway', () => workerErrors.length >= 3 && gatewayErrors.length >= 1, 5000);
    expect(workerErrors.every((m) => /permissions violation for publish/i.test(m))).toBe(true);
    expect(workerErrors.join('\n')).toContain(bookingsSubject('efficient'));
    expect(workerErrors.join('\n')).toContain(kvEventsSubject('dyn-c', 'backend'));
    expect(gatewayErrors[0]).toMatch(/permissions violation for publish.*bookings/i);
    // A round trip through both indexers after the publishes: anything delivered would have been applied by now.
    await new Promise((r) => setTimeout(r, 300));
    expect(await observe('efficient', hashes)).toEqual(before.e);
    expect(await observe('capable', hashes)).toEqual(before.c);
    expect(await indexerFigures('indexer-efficient')).toEqual(before.me);
    expect(await indexerFigures('indexer-capable')).toEqual(before.mc);
    expect(worker.isClosed()).toBe(false);
  });

  it('the canary in every password never appears in any service\'s logs or /metrics after start-up and traffic; no service was refused a permission', async () => {
    for (const [name, s] of Object.entries(logs)) {
      expect(s.text.length, name).toBeGreaterThan(0);
      expect(s.text.join(''), `${name} logs`).not.toContain(CANARY);
      // Least privilege is still enough: no service was refused anything it does.
      expect(s.text.join(''), `${name} logs`).not.toMatch(/permissions violation/i);
      expect(await metricsOf(name), `${name} metrics`).not.toContain(CANARY);
    }
    // The start-up dump is there, with the password file's path but not its contents.
    const dump = logs['decision']!.text.find((l) => l.includes('"msg":"starting"'));
    expect(dump).toContain('"passwordFile"');
  });

  it('a failed connect and a configuration error of every service keep the canary out of logs and errors', async () => {
    const failures: string[] = [];
    const attempt = async (kind: Kind, over: Record<string, string>, kafkaToo = false): Promise<void> => {
      const s = sink();
      const env = kind === 'decision' ? { ...decisionEnv(paramsFile), ...over } : over;
      const e = await startService(kind, env, s, kafkaToo, true).then(
        async (svc) => {
          await svc.stop('unexpected');
          return new Error(`${kind} started`);
        },
        (err: unknown) => err as Error,
      );
      failures.push(`${kind}: ${e.message}`);
      for (const secret of [CANARY, ...extraSecrets]) {
        expect(s.text.join(''), `${kind} logs`).not.toContain(secret);
        expect(`${e.message}\n${e.stack ?? ''}\n${JSON.stringify(e)}`, `${kind} error`).not.toContain(secret);
      }
    };
    // The other NATS methods' secrets: a token file, an NKEY seed file and a JWT creds file, each holding the canary.
    const td = new TextDecoder();
    const nkey = createUserKey();
    const seed = td.decode(nkey.getSeed());
    const ukp = createUser();
    const jwt = await encodeUser('svc', ukp, createAccount(), {});
    const userSeed = td.decode(ukp.getSeed());
    const extraSecrets = [seed, userSeed, jwt];
    const tokenFile = secretFile(secrets, `${uniqueName('tok')}.token`, `${CANARY}-token\n`);
    const seedWithCanary = secretFile(secrets, `${uniqueName('nk')}.seed`, `${CANARY}-seed\n`);
    const strangerSeed = secretFile(secrets, `${uniqueName('nk')}.seed`, `${seed}\n`);
    const creds = secretFile(secrets, `${uniqueName('u')}.creds`, `# ${CANARY}-creds\n${td.decode(fmtCreds(jwt, ukp))}`);
    const garbledCreds = secretFile(secrets, `${uniqueName('u')}.creds`, `${CANARY}-creds-garbled\n`);
    /** NATS settings of the gateway role with `method` in place of its user and password. */
    const other = (method: Record<string, string>): Record<string, string> => {
      const env = natsEnv('gateway');
      delete env['VANTAGE_NATS_USER'];
      delete env['VANTAGE_NATS_PASSWORD_FILE'];
      return { ...env, ...method };
    };
    const otherFailures: string[] = [];
    for (const kind of KINDS) {
      const n = failures.length;
      // Failed connects: the server knows none of these (it takes user/password only).
      await attempt(kind, other({ VANTAGE_NATS_TOKEN_FILE: tokenFile }));
      await attempt(kind, other({ VANTAGE_NATS_NKEY_SEED_FILE: strangerSeed }));
      await attempt(kind, other({ VANTAGE_NATS_NKEY_SEED_FILE: seedWithCanary }));
      await attempt(kind, other({ VANTAGE_NATS_CREDS_FILE: creds }));
      await attempt(kind, other({ VANTAGE_NATS_CREDS_FILE: garbledCreds }));
      // A configuration error: two methods at once, both files holding the canary.
      await attempt(kind, other({ VANTAGE_NATS_TOKEN_FILE: tokenFile, VANTAGE_NATS_NKEY_SEED_FILE: seedWithCanary }));
      otherFailures.push(...failures.splice(n));
    }
    expect(otherFailures).toHaveLength(24);
    for (const f of otherFailures) expect(f).not.toMatch(/ started$/);
    expect(otherFailures.filter((f) => /choose one authentication method/.test(f))).toHaveLength(4);
    expect(otherFailures.filter((f) => /refused the credentials/.test(f)).length).toBeGreaterThanOrEqual(12);
    for (const kind of KINDS) {
      // Wrong password (the canary is the file's content): NATS_AUTH_FAILED.
      await attempt(kind, natsEnv('gateway', { VANTAGE_NATS_PASSWORD_FILE: secretFile(secrets, `${uniqueName('bad')}.pw`, `${CANARY}-wrong\n`) }));
      // Credentials in the URL, a secret in an unknown variable and a secret as an invalid value: CONFIG_INVALID.
      await attempt(kind, { ...natsEnv('gateway'), VANTAGE_NATS_URL: `tls://gateway:${CANARY}@127.0.0.1:${nats.port}` });
      await attempt(kind, { ...natsEnv('gateway'), VANTAGE_NATS_PASSWORD: CANARY, VANTAGE_NATS_TOKEN: CANARY });
      // The secret itself where its file's path belongs, and an invalid value under a secret-bearing setting.
      await attempt(kind, { ...natsEnv('gateway'), VANTAGE_NATS_PASSWORD_FILE: CANARY, VANTAGE_NATS_TLS_KEY_FILE: `${CANARY}-key` });
    }
    // Kafka: a wrong SASL password is KAFKA_AUTH_FAILED without the password.
    await attempt('outcome', { ...natsEnv('outcome'), ...kafkaEnv(secretFile(secrets, 'kafka-bad.pw', `${CANARY}-kafka-wrong\n`)) }, true);
    // Configuration errors of the Kafka settings: the secret as the password file's path.
    await attempt('outcome', { ...natsEnv('outcome'), ...kafkaEnv(CANARY) }, true);
    expect(failures.at(-1)).toMatch(/kafka.sasl.passwordFile: cannot read the file named by kafka.sasl.passwordFile/);
    failures.pop();
    expect(failures.filter((f) => f.includes('NATS_AUTH') || /refused the credentials/.test(f))).toHaveLength(4);
    expect(failures.filter((f) => /invalid configuration/.test(f))).toHaveLength(12);
    expect(failures.at(-1)).toMatch(/SASL|refused the SASL/);
  });
});
