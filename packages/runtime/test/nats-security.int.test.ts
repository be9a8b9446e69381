// NATS security against real nats-servers configured to require it: every
// authentication method (user/password, token, NKEY, JWT creds in operator
// mode), TLS with a custom CA, mutual TLS, tls:// URLs and several seeds. The
// right credentials connect and carry a request-reply; each wrong one fails
// start-up once, quickly, with a code naming the cause.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createAccount, createOperator, createUser, encodeAccount, encodeOperator, encodeUser, fmtCreds } from '@nats-io/jwt';
import { createUser as createUserKey } from '@nats-io/nkeys';
import { freePort, type NatsBroker } from '@vantage/infra';
import { ownNats, secretFile, testTlsMaterial, uniqueName } from '@vantage/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorCode } from '../src/errors';
import { VantageError } from '../src/errors';
import { connectNats, request, type NatsSettings } from '../src/nats';
import { runtimeMetrics } from '../src/metrics';
import { createRegistry } from '../src/ops';
import { captureLogger, serveRequests } from './helpers';

const te = new TextEncoder();
const td = new TextDecoder();

type Broker = NatsBroker & { cleanup: () => Promise<void> };

const base = (url: string): NatsSettings => ({
  url,
  name: 'security-int',
  reconnectTimeWaitMs: 200,
  reconnectJitterMs: 0,
  maxReconnectAttempts: -1,
  connectTimeoutMs: 3000,
});

/** Connects, answers one request on a fresh subject and closes: the connection is really usable. */
async function roundTrip(cfg: NatsSettings): Promise<{ auth: unknown; tls: unknown }> {
  const cap = captureLogger('info');
  const nc = await connectNats(cfg, cap.log);
  try {
    const subject = `sec.${uniqueName('echo')}`;
    const srv = serveRequests(nc, subject, { log: cap.log }, (m) => te.encode(`echo:${td.decode(m.data)}`));
    await nc.flush();
    const reply = await request(nc, subject, te.encode('hi'), { timeoutMs: 2000 });
    expect(td.decode(reply.data)).toBe('echo:hi');
    await srv.stop();
    const line = cap.lines.find((l) => l['msg'] === 'nats connected');
    return { auth: line?.['auth'], tls: line?.['tls'] };
  } finally {
    await nc.close();
  }
}

/** The connect must fail once, with `code`, within a bounded time (no silent retrying). */
async function refused(cfg: NatsSettings, code: ErrorCode, cause: RegExp): Promise<VantageError> {
  const cap = captureLogger('debug');
  const registry = createRegistry('sec-test');
  const metrics = runtimeMetrics(registry);
  const t0 = Date.now();
  const e = await connectNats(cfg, cap.log, { metrics }).then(
    async (nc) => {
      await nc.close();
      throw new Error('expected the connect to be refused');
    },
    (err: unknown) => err,
  );
  const ms = Date.now() - t0;
  expect(e).toBeInstanceOf(VantageError);
  const v = e as VantageError;
  expect(v.code).toBe(code);
  expect(String(v.details['cause'])).toMatch(cause);
  expect(v.retryable).toBe(code === 'NATS_CONNECT_FAILED');
  // One attempt per seed, bounded by the connect timeout: never a retry loop.
  expect(ms).toBeLessThan(cfg.connectTimeoutMs + 2000);
  expect(await registry.metrics()).toContain(`vantage_errors_total{code="${v.label}",service="sec-test"} 1`);
  return v;
}

describe('NATS security', () => {
  const tls = testTlsMaterial('vantage-test');
  const rogue = testTlsMaterial('rogue');
  const secrets = join(tls.dir, 'secrets');
  const alicePassword = 'alice-pw-5f1c';
  const nkeyUser = createUserKey();
  const token = 'tok-8d3e21';
  let users: Broker; // TLS (no client certificate) + user/password and NKEY users
  let tokenServer: Broker; // token, plain TCP
  let mutual: Broker; // TLS with verify: a client certificate is required
  let operatorServer: Broker; // operator mode (JWT), MEMORY resolver
  let goodCreds: string;
  let expiredCreds: string;
  let foreignCreds: string;

  beforeAll(async () => {
    const okp = createOperator();
    const sys = createAccount();
    const acct = createAccount();
    const foreign = createAccount(); // signed by the operator but never given to the server
    const operatorJwt = await encodeOperator('test-operator', okp, { system_account: sys.getPublicKey() });
    // Account limits are explicit: the library's defaults allow no connections.
    const limits = { limits: { conn: -1, subs: -1, data: -1, payload: -1, leaf: -1, imports: -1, exports: -1, wildcards: true } };
    const sysJwt = await encodeAccount('SYS', sys, limits, { signer: okp });
    const acctJwt = await encodeAccount('VANTAGE', acct, limits, { signer: okp });
    const mkCreds = async (issuer: ReturnType<typeof createAccount>, exp?: number): Promise<string> => {
      const ukp = createUser();
      const jwt = await encodeUser('svc', ukp, issuer, { subs: -1, data: -1, payload: -1 }, exp === undefined ? {} : { exp });
      return secretFile(secrets, `${uniqueName('u')}.creds`, fmtCreds(jwt, ukp));
    };
    goodCreds = await mkCreds(acct);
    expiredCreds = await mkCreds(acct, Math.floor(Date.now() / 1000) - 3600);
    foreignCreds = await mkCreds(foreign);

    [users, tokenServer, mutual, operatorServer] = await Promise.all([
      ownNats({
        security: {
          tls: { material: tls, verify: false },
          auth: {
            kind: 'users',
            users: [
              { name: 'alice', auth: { kind: 'password', password: alicePassword } },
              { name: 'nkey-user', auth: { kind: 'nkey', publicKey: nkeyUser.getPublicKey() } },
            ],
          },
        },
      }),
      ownNats({ security: { auth: { kind: 'token', token } } }),
      ownNats({ security: { tls: { material: tls, verify: true }, auth: { kind: 'none' } } }),
      ownNats({
        security: {
          auth: { kind: 'operator', operatorJwt, systemAccount: sys.getPublicKey(), accounts: { [sys.getPublicKey()]: sysJwt, [acct.getPublicKey()]: acctJwt } },
        },
      }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([users, tokenServer, mutual, operatorServer].map((b) => b?.cleanup()));
    rmSync(tls.dir, { recursive: true, force: true });
    rmSync(rogue.dir, { recursive: true, force: true });
  });

  const pw = (content: string): string => secretFile(secrets, `${uniqueName('pw')}.txt`, `${content}\n`);

  it('user and password over TLS with a custom CA (tls:// URL) connects and carries requests', async () => {
    expect(users.url.startsWith('tls://')).toBe(true);
    const r = await roundTrip({ ...base(users.url), user: 'alice', passwordFile: pw(alicePassword), tls: { caFile: tls.caFile } });
    expect(r).toEqual({ auth: 'user', tls: 'on' });
  });

  it('a wrong password fails start-up with NATS_AUTH_FAILED', async () => {
    const e = await refused({ ...base(users.url), user: 'alice', passwordFile: pw('not-the-password'), tls: { caFile: tls.caFile } }, 'NATS_AUTH_FAILED', /authorization_violation/);
    expect(e.message).toMatch(/refused the credentials/);
    expect(e.message).not.toContain('not-the-password');
  });

  it('an NKEY seed connects; an unknown NKEY fails with NATS_AUTH_FAILED', async () => {
    const seed = secretFile(secrets, `${uniqueName('nk')}.seed`, `${td.decode(nkeyUser.getSeed())}\n`);
    expect(await roundTrip({ ...base(users.url), nkeySeedFile: seed, tls: { caFile: tls.caFile } })).toEqual({ auth: 'nkey', tls: 'on' });
    const stranger = secretFile(secrets, `${uniqueName('nk')}.seed`, td.decode(createUserKey().getSeed()));
    await refused({ ...base(users.url), nkeySeedFile: stranger, tls: { caFile: tls.caFile } }, 'NATS_AUTH_FAILED', /authorization_violation/);
  });

  it('a server certificate from another CA fails with NATS_TLS_FAILED (untrusted), as does no CA at all', async () => {
    const cfg = { ...base(users.url), user: 'alice', passwordFile: pw(alicePassword) };
    const e = await refused({ ...cfg, tls: { caFile: rogue.caFile } }, 'NATS_TLS_FAILED', /server_certificate_untrusted/);
    expect(e.message).toMatch(/not trusted/);
    await refused(cfg, 'NATS_TLS_FAILED', /server_certificate_untrusted/);
  });

  it('several seeds: a dead first seed is skipped', async () => {
    const dead = `nats://127.0.0.1:${await freePort()}`;
    const r = await roundTrip({ ...base(`${dead},${users.url}`), user: 'alice', passwordFile: pw(alicePassword), tls: { caFile: tls.caFile } });
    expect(r.auth).toBe('user');
  });

  it('a token connects; a wrong token fails with NATS_AUTH_FAILED', async () => {
    expect(await roundTrip({ ...base(tokenServer.url), tokenFile: pw(token) })).toEqual({ auth: 'token', tls: 'off' });
    await refused({ ...base(tokenServer.url), tokenFile: pw('tok-wrong') }, 'NATS_AUTH_FAILED', /authorization_violation/);
    await refused(base(tokenServer.url), 'NATS_AUTH_FAILED', /authorization_violation/);
  });

  it('mutual TLS: a client certificate connects; without one the handshake is refused with NATS_TLS_FAILED', async () => {
    expect(await roundTrip({ ...base(mutual.url), tls: { caFile: tls.caFile, certFile: tls.clientCertFile, keyFile: tls.clientKeyFile } })).toEqual({ auth: 'none', tls: 'mutual' });
    await refused({ ...base(mutual.url), tls: { caFile: tls.caFile } }, 'NATS_TLS_FAILED', /client_certificate_refused/);
    // A certificate from another CA is refused the same way.
    await refused({ ...base(mutual.url), tls: { caFile: tls.caFile, certFile: rogue.clientCertFile, keyFile: rogue.clientKeyFile } }, 'NATS_TLS_FAILED', /client_certificate_refused/);
  });

  it('JWT creds (operator mode) connect; an expired JWT and one from an account the server does not know fail with NATS_AUTH_FAILED', async () => {
    expect(await roundTrip({ ...base(operatorServer.url), credsFile: goodCreds })).toEqual({ auth: 'creds', tls: 'off' });
    const expired = await refused({ ...base(operatorServer.url), credsFile: expiredCreds }, 'NATS_AUTH_FAILED', /^credentials_expired$/);
    expect(expired.message).toMatch(/expired at \d{4}-/);
    await refused({ ...base(operatorServer.url), credsFile: foreignCreds }, 'NATS_AUTH_FAILED', /authorization_violation/);
  });

  it('settings problems are CONFIG_INVALID before any socket: two methods, a missing file, credentials in the URL', async () => {
    const cap = captureLogger();
    const problems = async (cfg: NatsSettings): Promise<string> => {
      const e = await connectNats(cfg, cap.log).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(VantageError);
      expect((e as VantageError).code).toBe('CONFIG_INVALID');
      return (e as VantageError).message;
    };
    expect(await problems({ ...base(tokenServer.url), tokenFile: pw(token), nkeySeedFile: pw('x') })).toMatch(/choose one authentication method/);
    // The path of a secret's file is not repeated: it may be the secret itself, put in the wrong setting.
    const missing = await problems({ ...base(tokenServer.url), tokenFile: 'tok-put-here-by-mistake' });
    expect(missing).toContain('nats.tokenFile: cannot read the file named by nats.tokenFile (ENOENT)');
    expect(missing).not.toContain('tok-put-here-by-mistake');
    const m = await problems(base(`nats://svc:hunter2-canary@127.0.0.1:${tokenServer.port}`));
    expect(m).toContain('nats://[redacted]@127.0.0.1');
    expect(m).not.toContain('hunter2-canary');
    expect(await problems({ ...base(users.url), user: 'alice' })).toMatch(/user and passwordFile go together/);
  });
});
