// The whole pipeline once per NATS security method, each against its own nats-server configured to
// require it: user and password, token, NKEY seed, JWT `.creds` (operator mode, MEMORY resolver),
// TLS with a custom CA (no client certificate) and mutual TLS. Every service (two indexers, the
// decision and the outcome service) and every client (a worker per pool, a gateway, an operator's
// observe client) connects with the method; a worker's KV events go in, the gateway routes and
// reports lifecycle, and the outcome record is read back from Kafka with the replay tool. Where
// the method gives each role its own identity (user/password, NKEY, JWT) that identity carries the
// role's least-privilege permissions (`rolePermissions`, the set `infra up --secure` generates).
// One Kafka broker (the shared test broker) serves every case, each with its own topics and
// transactional id. Then each method's wrong settings (a wrong password or token, an unknown NKEY,
// an expired or wrong-account JWT, an untrusted server certificate, a missing client certificate)
// fail a service's start-up once, quickly, with the error code and cause naming them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount, createOperator, createUser, encodeAccount, encodeOperator, encodeUser, fmtCreds, type User } from '@nats-io/jwt';
import { createUser as createUserKey } from '@nats-io/nkeys';
import { randomSecret, rolePermissions, type NatsOptions, type RolePermissions } from '@vantage/infra';
import { workersSubject } from '@vantage/protocol';
import { connectNats, createLogger, VantageError, type NatsConnection, type NatsSettings, type RunningService } from '@vantage/runtime';
import { eventually, kafkaBrokers, ownNats, secretFile, testTlsMaterial, uniqueName } from '@vantage/testkit';
import { kvEventsSubject } from '@vantage/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BLOCK,
  C1,
  decisionEnv,
  E1,
  gatewayOn,
  indexerEnv,
  kvStored,
  observeWorkers,
  outcomeRows,
  pools,
  prompt,
  registration,
  replayTopic,
  routeAndComplete,
  sink,
  startService,
  writeParameterSet,
  type Kind,
  type Sink,
} from './pipeline';

const roles = rolePermissions(pools);
const tls = testTlsMaterial('methods');
const rogue = testTlsMaterial('rogue');
const secrets = join(tls.dir, 'secrets');
const paramsDir = mkdtempSync(join(tmpdir(), 'vantage-methods-'));
const paramsFile = join(paramsDir, 'params.json');
const td = new TextDecoder();

type Method = 'user/password' | 'token' | 'NKEY seed' | 'JWT creds (operator mode)' | 'TLS with a custom CA' | 'mutual TLS';

/** One security method: the server's configuration and each role's client settings. */
interface Case {
  readonly server: NonNullable<NatsOptions['security']>;
  /** The role's `VANTAGE_NATS_*` credential and TLS settings (the URL is added by the test). */
  env(role: string): Record<string, string>;
  /** The same as client settings, for the test's own connections. */
  client(role: string): Partial<NatsSettings>;
  /** What the runtime logs at connect (`auth`, `tls`). */
  readonly logged: { auth: string; tls: string };
  /** Each role has its own identity with its own permissions. */
  readonly leastPrivilege: boolean;
  /** Wrong credentials or TLS settings of the method (in place of the role's) and the start-up error they must give. */
  readonly refusals: readonly Refusal[];
}

interface Refusal {
  readonly what: string;
  /** Replaces the role's `VANTAGE_NATS_*` credential and TLS settings. */
  readonly env: Record<string, string>;
  readonly code: 'NATS_AUTH_FAILED' | 'NATS_TLS_FAILED';
  /** The cause in the error's details. */
  readonly cause: RegExp;
}

const sepFile = (name: string, content: string): string => secretFile(secrets, `${uniqueName(name)}`, content);

/** A user JWT's permissions from a role's (the same set the generated server configuration holds). */
function jwtPermissions(r: RolePermissions): Partial<User> {
  const resp = r.allowResponses === true ? { resp: { max: 1, ttl: 0 } } : r.allowResponses === false ? {} : { resp: { max: r.allowResponses.max, ttl: 15 * 60 * 1e9 } };
  return { pub: { allow: [...r.publish.allow] }, sub: { allow: [...r.subscribe.allow] }, ...resp, subs: -1, data: -1, payload: -1 };
}

async function makeCase(method: Method): Promise<Case> {
  switch (method) {
    case 'user/password': {
      const pw = Object.fromEntries(roles.map((r) => [r.role, randomSecret()]));
      const files = Object.fromEntries(roles.map((r) => [r.role, sepFile(`${r.role}.pw`, `${pw[r.role]}\n`)]));
      return {
        server: { auth: { kind: 'users', users: roles.map((r) => ({ name: r.role, auth: { kind: 'password' as const, password: pw[r.role]! }, permissions: r })) } },
        env: (role) => ({ VANTAGE_NATS_USER: role, VANTAGE_NATS_PASSWORD_FILE: files[role]! }),
        client: (role) => ({ user: role, passwordFile: files[role]! }),
        logged: { auth: 'user', tls: 'off' },
        leastPrivilege: true,
        refusals: [{ what: 'a wrong password', env: { VANTAGE_NATS_USER: 'indexer-efficient', VANTAGE_NATS_PASSWORD_FILE: sepFile('wrong.pw', `${randomSecret()}\n`) }, code: 'NATS_AUTH_FAILED', cause: /^authorization_violation$/ }],
      };
    }
    case 'token': {
      const token = randomSecret();
      const file = sepFile('token', `${token}\n`);
      return {
        server: { auth: { kind: 'token', token } },
        env: () => ({ VANTAGE_NATS_TOKEN_FILE: file }),
        client: () => ({ tokenFile: file }),
        logged: { auth: 'token', tls: 'off' },
        leastPrivilege: false,
        refusals: [
          { what: 'a wrong token', env: { VANTAGE_NATS_TOKEN_FILE: sepFile('wrong.token', `${randomSecret()}\n`) }, code: 'NATS_AUTH_FAILED', cause: /^authorization_violation$/ },
          { what: 'no token', env: {}, code: 'NATS_AUTH_FAILED', cause: /^authorization_violation$/ },
        ],
      };
    }
    case 'NKEY seed': {
      const keys = Object.fromEntries(roles.map((r) => [r.role, createUserKey()]));
      const files = Object.fromEntries(roles.map((r) => [r.role, sepFile(`${r.role}.seed`, `${td.decode(keys[r.role]!.getSeed())}\n`)]));
      return {
        server: { auth: { kind: 'users', users: roles.map((r) => ({ name: r.role, auth: { kind: 'nkey' as const, publicKey: keys[r.role]!.getPublicKey() }, permissions: r })) } },
        env: (role) => ({ VANTAGE_NATS_NKEY_SEED_FILE: files[role]! }),
        client: (role) => ({ nkeySeedFile: files[role]! }),
        logged: { auth: 'nkey', tls: 'off' },
        leastPrivilege: true,
        refusals: [{ what: 'an unknown NKEY', env: { VANTAGE_NATS_NKEY_SEED_FILE: sepFile('stranger.seed', `${td.decode(createUserKey().getSeed())}\n`) }, code: 'NATS_AUTH_FAILED', cause: /^authorization_violation$/ }],
      };
    }
    case 'JWT creds (operator mode)': {
      const okp = createOperator();
      const sys = createAccount();
      const acct = createAccount();
      const operatorJwt = await encodeOperator('vantage-test-operator', okp, { system_account: sys.getPublicKey() });
      // Limits are explicit (the library's defaults allow no connections); JetStream on for the services' account.
      const limits = { conn: -1, subs: -1, data: -1, payload: -1, leaf: -1, imports: -1, exports: -1, wildcards: true };
      const sysJwt = await encodeAccount('SYS', sys, { limits }, { signer: okp });
      const acctJwt = await encodeAccount('VANTAGE', acct, { limits: { ...limits, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 } }, { signer: okp });
      const creds = async (name: string, issuer: ReturnType<typeof createAccount>, user: Partial<User>, exp?: number): Promise<string> => {
        const ukp = createUser();
        const jwt = await encodeUser(name, ukp, issuer, user, exp === undefined ? {} : { exp });
        return sepFile(`${name}.creds`, td.decode(fmtCreds(jwt, ukp)));
      };
      const files: Record<string, string> = {};
      for (const r of roles) files[r.role] = await creds(r.role, acct, jwtPermissions(r));
      const indexerRole = roles.find((r) => r.role === 'indexer-efficient')!;
      // Signed by the operator, but for an account the server was never given.
      const otherAccount = createAccount();
      return {
        server: { auth: { kind: 'operator', operatorJwt, systemAccount: sys.getPublicKey(), accounts: { [sys.getPublicKey()]: sysJwt, [acct.getPublicKey()]: acctJwt } } },
        env: (role) => ({ VANTAGE_NATS_CREDS_FILE: files[role]! }),
        client: (role) => ({ credsFile: files[role]! }),
        logged: { auth: 'creds', tls: 'off' },
        leastPrivilege: true,
        refusals: [
          { what: 'an expired JWT', env: { VANTAGE_NATS_CREDS_FILE: await creds('expired', acct, jwtPermissions(indexerRole), Math.floor(Date.now() / 1000) - 3600) }, code: 'NATS_AUTH_FAILED', cause: /^credentials_expired$/ },
          { what: 'a JWT of an account the server does not know', env: { VANTAGE_NATS_CREDS_FILE: await creds('other-account', otherAccount, jwtPermissions(indexerRole)) }, code: 'NATS_AUTH_FAILED', cause: /^authorization_violation$/ },
        ],
      };
    }
    case 'TLS with a custom CA':
      return {
        server: { tls: { material: tls, verify: false }, auth: { kind: 'none' } },
        env: () => ({ VANTAGE_NATS_TLS_CA_FILE: tls.caFile }),
        client: () => ({ tls: { caFile: tls.caFile } }),
        logged: { auth: 'none', tls: 'on' },
        leastPrivilege: false,
        refusals: [
          { what: 'a server certificate from an untrusted CA', env: { VANTAGE_NATS_TLS_CA_FILE: rogue.caFile }, code: 'NATS_TLS_FAILED', cause: /^server_certificate_untrusted\b/ },
          { what: 'no CA (the system store does not trust it)', env: {}, code: 'NATS_TLS_FAILED', cause: /^server_certificate_untrusted\b/ },
        ],
      };
    case 'mutual TLS':
      return {
        server: { tls: { material: tls, verify: true }, auth: { kind: 'none' } },
        env: () => ({ VANTAGE_NATS_TLS_CA_FILE: tls.caFile, VANTAGE_NATS_TLS_CERT_FILE: tls.clientCertFile, VANTAGE_NATS_TLS_KEY_FILE: tls.clientKeyFile }),
        client: () => ({ tls: { caFile: tls.caFile, certFile: tls.clientCertFile, keyFile: tls.clientKeyFile } }),
        logged: { auth: 'none', tls: 'mutual' },
        leastPrivilege: false,
        refusals: [
          { what: 'a missing client certificate', env: { VANTAGE_NATS_TLS_CA_FILE: tls.caFile }, code: 'NATS_TLS_FAILED', cause: /^client_certificate_refused\b/ },
          { what: 'a client certificate from another CA', env: { VANTAGE_NATS_TLS_CA_FILE: tls.caFile, VANTAGE_NATS_TLS_CERT_FILE: rogue.clientCertFile, VANTAGE_NATS_TLS_KEY_FILE: rogue.clientKeyFile }, code: 'NATS_TLS_FAILED', cause: /^client_certificate_refused\b/ },
        ],
      };
  }
}

beforeAll(() => writeParameterSet(paramsFile));

afterAll(() => {
  rmSync(tls.dir, { recursive: true, force: true });
  rmSync(rogue.dir, { recursive: true, force: true });
  rmSync(paramsDir, { recursive: true, force: true });
});

const methods: Method[] = ['user/password', 'token', 'NKEY seed', 'JWT creds (operator mode)', 'TLS with a custom CA', 'mutual TLS'];

describe.each(methods)('full pipeline with NATS %s', (method) => {
  let c: Case;
  let nats: Awaited<ReturnType<typeof ownNats>>;
  const logs: Record<string, Sink> = {};
  const services: RunningService<never, boolean>[] = [];
  const conns: NatsConnection[] = [];
  const clientErrors: string[] = [];
  const tag = uniqueName(method.replace(/[^a-z]/gi, '').toLowerCase());
  const topics = { decisions: `${tag}.decisions`, outcomes: `${tag}.outcomes`, deadLetter: `${tag}.dlq`, progress: `${tag}.progress` };
  const brokers = (): string => kafkaBrokers().join(',');

  const natsEnv = (role: string): Record<string, string> => ({
    VANTAGE_NATS_URL: nats.url,
    VANTAGE_NATS_CONNECT_TIMEOUT_MS: '3000',
    VANTAGE_NATS_RECONNECT_TIME_WAIT_MS: '200',
    VANTAGE_NATS_RECONNECT_JITTER_MS: '0',
    VANTAGE_LOG_LEVEL: 'info',
    VANTAGE_HTTP_PORT: '0',
    VANTAGE_SHUTDOWN_DEADLINE_MS: '5000',
    ...c.env(role),
  });

  async function start(name: string, kind: Kind, env: Record<string, string>, kafkaToo = false): Promise<void> {
    const s = sink();
    logs[name] = s;
    services.push(await startService(kind, env, s, kafkaToo));
  }

  async function client(role: string): Promise<NatsConnection> {
    const nc = await connectNats(
      { url: nats.url, name: `test-${role}`, reconnectTimeWaitMs: 200, reconnectJitterMs: 0, maxReconnectAttempts: -1, connectTimeoutMs: 3000, ...c.client(role) },
      createLogger({ service: role, instanceId: 't', level: 'silent' }),
    );
    conns.push(nc);
    void (async () => {
      for await (const s of nc.status()) if (s.type === 'error') clientErrors.push(`${role}: ${String(s.error.message)}`);
    })();
    return nc;
  }

  beforeAll(async () => {
    c = await makeCase(method);
    nats = await ownNats({ security: c.server });
    await Promise.all(pools.map((pool) => start(`indexer-${pool.name}`, 'indexer', { ...natsEnv(`indexer-${pool.name}`), ...indexerEnv(pool) })));
    await start('decision', 'decision', { ...natsEnv('decision'), ...decisionEnv(paramsFile) });
    await start(
      'outcome',
      'outcome',
      {
        ...natsEnv('outcome'),
        VANTAGE_KAFKA_BROKERS: brokers(),
        VANTAGE_KAFKA_RETRIES: '3',
        VANTAGE_OUTCOME_TOPICS_DECISIONS: topics.decisions,
        VANTAGE_OUTCOME_TOPICS_OUTCOMES: topics.outcomes,
        VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: topics.deadLetter,
        VANTAGE_OUTCOME_TOPICS_PROGRESS: topics.progress,
        VANTAGE_OUTCOME_TOPICS_PARTITIONS: '1',
        VANTAGE_OUTCOME_TRANSACTIONAL_ID: `txn-${tag}`,
        VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1000',
        VANTAGE_OUTCOME_TERMINAL_GRACE_MS: '200',
      },
      true,
    );
  }, 120_000);

  afterAll(async () => {
    for (const svc of services.reverse()) await svc.stop('test done').catch(() => {});
    await Promise.all(conns.map((nc) => nc.close().catch(() => {})));
    await nats?.cleanup();
  });

  it('KV events in, route and lifecycle, one outcome record in Kafka', async () => {
    // Every service connected with the method, as its connect line says.
    for (const [name, s] of Object.entries(logs)) {
      const connected = s.text.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['msg'] === 'nats connected');
      expect({ name, auth: connected?.['auth'], tls: connected?.['tls'] }).toEqual({ name, ...c.logged });
    }
    expect(nats.url.startsWith('tls://')).toBe(c.logged.tls !== 'off');

    const workerE = await client('worker-efficient');
    const workerC = await client('worker-capable');
    const gatewayNc = await client('gateway');
    const admin = await client('admin');
    const gateway = gatewayOn(gatewayNc);
    const observe = (pool: string, hashes: BigUint64Array): Promise<readonly { workerId: bigint; K: number }[]> => observeWorkers(admin, pool, hashes);

    const hashes = gateway.hashPrompt('efficient', prompt);
    workerE.publish(workersSubject('efficient'), registration('efficient', E1, 'model-8b'));
    workerC.publish(workersSubject('capable'), registration('capable', C1, 'model-70b'));
    workerE.publish(kvEventsSubject('dyn-e', 'backend'), kvStored(E1, 1n, hashes.subarray(0, 30)));
    await Promise.all([workerE.flush(), workerC.flush()]);
    await eventually('both indexers hold their worker; efficient holds the 30 blocks', async () => {
      const e = await observe('efficient', hashes);
      const cap = await observe('capable', hashes);
      return e.some((w) => w.workerId === E1 && w.K === 30 * BLOCK) && cap.some((w) => w.workerId === C1);
    });

    const requestId = uniqueName('req');
    const reply = await routeAndComplete(gateway, requestId, `sess-${tag}`);
    expect(reply).toMatchObject({ modelRole: 'efficient', pool: 'efficient', workerId: E1 });

    const rows = await outcomeRows(requestId, () => replayTopic(brokers(), topics.outcomes));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ requestId, status: 'completed', servedPool: 'efficient' });

    // Nothing was refused: no client saw an error, no service logged a permissions violation.
    expect(clientErrors).toEqual([]);
    for (const [name, s] of Object.entries(logs)) expect(s.text.join(''), `${name} logs`).not.toMatch(/permissions violation|authorization violation/i);
  });

  it('wrong credentials or TLS settings of the method fail start-up once, quickly, with the code naming the cause; a role identity carries its permissions', async () => {
    expect(c.refusals.length).toBeGreaterThan(0);
    for (const r of c.refusals) {
      const env: Record<string, string> = { ...natsEnv('indexer-efficient') };
      for (const k of Object.keys(env)) if (/^VANTAGE_NATS_(USER|PASSWORD_FILE|TOKEN_FILE|NKEY_SEED_FILE|CREDS_FILE|TLS_)/.test(k)) delete env[k];
      Object.assign(env, r.env, { VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: 'efficient', blockSize: BLOCK, namespace: 'dyn-e', component: 'backend' }]) });
      const s = sink();
      const t0 = Date.now();
      const e = await startService('indexer', env, s, false, true).then(
        async (svc) => {
          await svc.stop('unexpected');
          return null;
        },
        (err: unknown) => err as VantageError,
      );
      const ms = Date.now() - t0;
      expect(e, r.what).toBeInstanceOf(VantageError);
      expect({ what: r.what, code: e!.code, retryable: e!.retryable }).toEqual({ what: r.what, code: r.code, retryable: false });
      expect(String(e!.details['cause']), r.what).toMatch(r.cause);
      // One attempt, bounded by the connect timeout: never a silent retry loop.
      expect(ms, r.what).toBeLessThan(3000 + 3000);
    }
    if (!c.leastPrivilege) return;
    // The worker's identity may not book: the server refuses the publish.
    const errors: string[] = [];
    const worker = await client('worker-efficient');
    void (async () => {
      for await (const st of worker.status()) if (st.type === 'error') errors.push(String(st.error.message));
    })();
    worker.publish('vantage.v1.bookings.efficient', new Uint8Array([123, 125]));
    await worker.flush();
    await eventually('a permissions violation for the booking publish', () => errors.length > 0, 5000);
    expect(errors[0]).toMatch(/permissions violation for publish.*bookings/i);
  });
});
