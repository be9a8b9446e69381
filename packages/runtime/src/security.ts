// Secured connections (README.md, "Secured connections"): the NATS and Kafka security settings
// checked once at start-up, turned into the clients' own options, and connect failures classified
// into catalogue codes that name the cause. A secret file is read when the connection is made (a
// rotated file is picked up on the next start); its contents never appear in an error.

import { readFileSync, statSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import {
  AuthorizationError,
  credsAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  UserAuthenticationExpiredError,
  usernamePasswordAuthenticator,
  type Authenticator,
  type TlsOptions,
} from '@nats-io/transport-node';
import { parseCreds } from '@nats-io/jwt';
import type { SASLOptions } from 'kafkajs';
import { configInvalid, type BaseConfig, type KafkaSaslMechanism } from './config';
import { errorMessage, VantageError, type ErrorCode } from './errors';
import type { DeepReadonly } from './schema';
import { redactUrl } from './secrets';

type NatsConfig = DeepReadonly<BaseConfig['nats']>;
type KafkaConfig = DeepReadonly<BaseConfig['kafka']>;

/** The security part of `nats.*` (the schema's fields); all but `url` optional so tools and tests can pass just a URL. */
export type NatsSecuritySettings = Pick<NatsConfig, 'url'> &
  Partial<Pick<NatsConfig, 'user' | 'passwordFile' | 'tokenFile' | 'nkeySeedFile' | 'credsFile'>> & { tls?: Partial<NatsConfig['tls']> };

export interface KafkaSecuritySettings {
  ssl?: Partial<KafkaConfig['ssl']>;
  sasl?: Partial<KafkaConfig['sasl']>;
}

interface SettingProblem {
  path: string;
  message: string;
}

/** The seed servers of a `nats.url` (comma-separated). */
function natsServers(url: string): string[] {
  return url
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
}

/**
 * A setting naming a file that must exist. For a file holding a secret the path is not
 * repeated in the problem: the likeliest mistake is the secret itself put where its
 * file's path belongs (`VANTAGE_NATS_PASSWORD_FILE=hunter2`), and then the path is the secret.
 */
function checkFile(path: string, setting: string, problems: SettingProblem[], secret: boolean): void {
  const shown = secret ? `the file named by ${setting}` : path;
  try {
    if (!statSync(path).isFile()) problems.push({ path: setting, message: `${shown} is not a file` });
  } catch (e) {
    problems.push({ path: setting, message: `cannot read ${shown} (${(e as NodeJS.ErrnoException).code ?? 'error'})` });
  }
}

const set = (v: string | undefined): v is string => v !== undefined && v !== '';

type TlsFiles = { caFile?: string; certFile?: string; keyFile?: string };
type TlsMode = 'off' | 'on' | 'mutual';

/** The TLS files of `nats.tls` or `kafka.ssl`: certFile and keyFile as a pair, every file named readable. */
function tlsFileProblems(t: TlsFiles, at: string, problems: SettingProblem[]): void {
  if (set(t.certFile) !== set(t.keyFile)) {
    problems.push({ path: set(t.certFile) ? `${at}.keyFile` : `${at}.certFile`, message: 'certFile and keyFile go together (mutual TLS)' });
  }
  for (const key of ['caFile', 'certFile', 'keyFile'] as const) {
    const p = t[key];
    if (set(p)) checkFile(p, `${at}.${key}`, problems, key === 'keyFile');
  }
}

/** Every problem with the NATS security settings (exclusive methods, missing pairs, unreadable files, URL user-info). */
export function natsSecurityProblems(cfg: NatsSecuritySettings): SettingProblem[] {
  const problems: SettingProblem[] = [];
  for (const server of natsServers(cfg.url)) {
    if (redactUrl(server) !== server) {
      problems.push({
        path: 'nats.url',
        message: `${redactUrl(server)} carries credentials in the URL; use nats.user with nats.passwordFile, or nats.tokenFile`,
      });
    }
  }
  const methods = [
    set(cfg.user) || set(cfg.passwordFile) ? 'user/passwordFile' : '',
    set(cfg.tokenFile) ? 'tokenFile' : '',
    set(cfg.nkeySeedFile) ? 'nkeySeedFile' : '',
    set(cfg.credsFile) ? 'credsFile' : '',
  ].filter((m) => m !== '');
  if (methods.length > 1) problems.push({ path: 'nats', message: `choose one authentication method, got ${methods.join(', ')}` });
  if (set(cfg.user) !== set(cfg.passwordFile)) {
    problems.push({ path: set(cfg.user) ? 'nats.passwordFile' : 'nats.user', message: 'user and passwordFile go together' });
  }
  for (const key of ['passwordFile', 'tokenFile', 'nkeySeedFile', 'credsFile'] as const) {
    const p = cfg[key];
    if (set(p)) checkFile(p, `nats.${key}`, problems, true);
  }
  tlsFileProblems(cfg.tls ?? {}, 'nats.tls', problems);
  return problems;
}

/** Every problem with the Kafka security settings. */
export function kafkaSecurityProblems(cfg: KafkaSecuritySettings): SettingProblem[] {
  const problems: SettingProblem[] = [];
  tlsFileProblems(cfg.ssl ?? {}, 'kafka.ssl', problems);
  const sasl = cfg.sasl ?? {};
  const mech = sasl.mechanism ?? 'none';
  if (mech === 'none') {
    if (set(sasl.username) || set(sasl.passwordFile)) problems.push({ path: 'kafka.sasl.mechanism', message: 'username or passwordFile given but mechanism is none' });
  } else {
    if (!set(sasl.username)) problems.push({ path: 'kafka.sasl.username', message: `is required for ${mech}` });
    if (!set(sasl.passwordFile)) problems.push({ path: 'kafka.sasl.passwordFile', message: `is required for ${mech}` });
    else checkFile(sasl.passwordFile, 'kafka.sasl.passwordFile', problems, true);
  }
  return problems;
}

/** Throws one CONFIG_INVALID listing `problems` (settings and paths only, never file contents). */
export function throwIfProblems(problems: readonly SettingProblem[]): void {
  if (problems.length > 0) throw configInvalid(problems.map((p) => `${p.path}: ${p.message}`), problems.map((p) => ({ ...p, source: 'security settings' })));
}

/**
 * A one-line secret from a file: a trailing newline (what editors and `echo` add) is not part of it.
 * Errors name the setting, never the path or the content (CONFIG_INVALID).
 */
export function readSecretFile(path: string, setting: string): string {
  const secret = readBytes(path, setting).toString('utf8').replace(/\r?\n$/, '');
  if (secret === '') throw new VantageError('CONFIG_INVALID', `${setting}: the file it names is empty`, { details: { setting } });
  return secret;
}

/** A file's bytes (a PEM, a creds file); errors name the setting, never the path (CONFIG_INVALID). */
export function readBytes(path: string, setting: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new VantageError('CONFIG_INVALID', `${setting}: cannot read the file it names (${(e as NodeJS.ErrnoException).code ?? 'error'})`, { details: { setting } });
  }
}

/** What the NATS security settings mean for nats.js `connect()`: an authenticator and `tls`, both optional. */
interface NatsSecurityOptions {
  authenticator?: Authenticator;
  tls?: TlsOptions;
  /** Which method and whether TLS is used, for the start-up log (no secrets). */
  summary: { auth: 'none' | 'user' | 'token' | 'nkey' | 'creds'; tls: TlsMode };
}

/**
 * Validates the settings (CONFIG_INVALID naming each problem), reads the secret
 * files and returns nats.js's own authenticators and TLS options.
 */
export function natsSecurityOptions(cfg: NatsSecuritySettings): NatsSecurityOptions {
  throwIfProblems(natsSecurityProblems(cfg));
  let authenticator: Authenticator | undefined;
  let auth: NatsSecurityOptions['summary']['auth'] = 'none';
  if (set(cfg.user) && set(cfg.passwordFile)) {
    authenticator = usernamePasswordAuthenticator(cfg.user, readSecretFile(cfg.passwordFile, 'nats.passwordFile'));
    auth = 'user';
  } else if (set(cfg.tokenFile)) {
    authenticator = tokenAuthenticator(readSecretFile(cfg.tokenFile, 'nats.tokenFile'));
    auth = 'token';
  } else if (set(cfg.nkeySeedFile)) {
    authenticator = nkeyAuthenticator(new TextEncoder().encode(readSecretFile(cfg.nkeySeedFile, 'nats.nkeySeedFile').trim()));
    auth = 'nkey';
  } else if (set(cfg.credsFile)) {
    authenticator = credsAuthenticator(readBytes(cfg.credsFile, 'nats.credsFile'));
    auth = 'creds';
  }
  const t = cfg.tls ?? {};
  const mode = tlsMode(t, t.handshakeFirst === true || natsServers(cfg.url).some((u) => /^tls:\/\//i.test(u)));
  // nats.js reads the files itself; an empty object still makes TLS required.
  const tls: TlsOptions | undefined = mode !== 'off'
    ? {
        ...(set(t.caFile) ? { caFile: t.caFile } : {}),
        ...(set(t.certFile) ? { certFile: t.certFile } : {}),
        ...(set(t.keyFile) ? { keyFile: t.keyFile } : {}),
        ...(t.handshakeFirst === true ? { handshakeFirst: true } : {}),
      }
    : undefined;
  return { authenticator, tls, summary: { auth, tls: mode } };
}

/** TLS asked for by `enabled`, implied by a CA file or by `implied`; mutual with a client certificate. */
function tlsMode(t: TlsFiles & { enabled?: boolean }, implied = false): TlsMode {
  if (set(t.certFile)) return 'mutual';
  return t.enabled === true || set(t.caFile) || implied ? 'on' : 'off';
}

/** nats.js parses `host:port` itself and ignores any scheme; `tls://` is our signal to require TLS. */
export function natsServersForClient(url: string): string[] {
  return natsServers(url).map((u) => u.replace(/^tls:\/\//i, 'nats://'));
}

// Node's TLS error codes (OpenSSL verification results and alerts).
const TLS_CODE_RE = /^(ERR_SSL_|ERR_TLS_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH|ERR_OSSL)/;
const TLS_TEXT_RE = /\b(tls|ssl|certificate|handshake)\b/i;

/** An error and its causes (`cause`, or kafkajs's `originalError`), at most 8. */
export function causeChain(e: unknown): unknown[] {
  const out: unknown[] = [];
  for (let c = e; c !== undefined && c !== null && out.length < 8; c = (c as { cause?: unknown }).cause ?? (c as { originalError?: unknown }).originalError) out.push(c);
  return out;
}

/** The first TLS error code (`TLS_CODE_RE`) among an error and its causes. */
function tlsCodeIn(e: unknown): string | undefined {
  for (const x of causeChain(e)) {
    const c = (x as { code?: unknown } | null)?.code;
    if (typeof c === 'string' && TLS_CODE_RE.test(c)) return c;
  }
  return undefined;
}

interface ConnectFailure {
  code: ErrorCode;
  /** Short machine-readable cause for `details.cause`. */
  cause: string;
  /** What an operator should check, appended to the message. */
  hint: string;
}

/** Classifies an initial NATS connect failure: credentials, TLS, or the connection itself. */
export function classifyNatsConnectError(e: unknown): ConnectFailure {
  for (const x of causeChain(e)) {
    if (x instanceof UserAuthenticationExpiredError) {
      return { code: 'NATS_AUTH_FAILED', cause: 'credentials_expired', hint: 'the user JWT (nats.credsFile) has expired' };
    }
    if (x instanceof AuthorizationError || /authorization violation|authentication/i.test(errorMessage(x))) {
      return {
        code: 'NATS_AUTH_FAILED',
        cause: 'authorization_violation',
        hint: 'the server refused the credentials (wrong user or password, token, unknown NKEY, or a JWT its account or operator does not trust)',
      };
    }
  }
  const code = tlsCodeIn(e);
  if (code !== undefined) {
    const cause = /CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE|BAD_CERTIFICATE|UNKNOWN_CA/i.test(code) && code.startsWith('ERR_SSL') ? 'client_certificate_refused' : 'server_certificate_untrusted';
    const hint =
      cause === 'client_certificate_refused'
        ? 'the server refused the TLS client (mutual TLS: set nats.tls.certFile and nats.tls.keyFile to a certificate its CA signed)'
        : 'the server certificate is not trusted (nats.tls.caFile must hold the CA that signed it, and the URL host must match it)';
    return { code: 'NATS_TLS_FAILED', cause: `${cause}:${code}`, hint };
  }
  for (const x of causeChain(e)) {
    const m = errorMessage(x);
    if (/tls.*(required|not available)|(required|available).*tls/i.test(m) || TLS_TEXT_RE.test(m)) {
      return { code: 'NATS_TLS_FAILED', cause: 'tls_mismatch', hint: 'one side requires TLS and the other does not offer it (nats.tls.enabled, tls:// URL, server tls block)' };
    }
  }
  return { code: 'NATS_CONNECT_FAILED', cause: 'unreachable', hint: 'is the server running and the URL right?' };
}

/** Classifies a Kafka connect failure (kafkajs wraps the socket's error, sometimes twice). */
export function classifyKafkaConnectError(e: unknown): ConnectFailure {
  for (const x of causeChain(e)) {
    const name = (x as { name?: unknown } | null)?.name;
    if (name === 'KafkaJSSASLAuthenticationError' || /SASL|authentication failed|Authentication failed/i.test(errorMessage(x))) {
      return { code: 'KAFKA_AUTH_FAILED', cause: 'sasl_authentication_failed', hint: 'the broker refused the SASL credentials or mechanism (kafka.sasl.*)' };
    }
  }
  const code = tlsCodeIn(e);
  if (code !== undefined) {
    return {
      code: 'KAFKA_TLS_FAILED',
      cause: code,
      hint: code.startsWith('ERR_SSL')
        ? 'the broker refused the TLS client (mutual TLS: kafka.ssl.certFile and keyFile)'
        : 'the broker certificate is not trusted (kafka.ssl.caFile must hold the CA that signed it, and the broker host must match it)',
    };
  }
  return { code: 'KAFKA_CONNECT_FAILED', cause: 'unreachable', hint: 'are the brokers running, the addresses right and the listener the one these settings expect (PLAINTEXT, SSL, SASL_SSL)?' };
}

/** The PEM files of `nats.tls` or `kafka.ssl` that are set, read now, as Node's TLS options take them. */
function pemOptions(t: TlsFiles): { ca?: string; cert?: string; key?: string } {
  return {
    ...(set(t.caFile) ? { ca: readFileSync(t.caFile, 'utf8') } : {}),
    ...(set(t.certFile) ? { cert: readFileSync(t.certFile, 'utf8') } : {}),
    ...(set(t.keyFile) ? { key: readFileSync(t.keyFile, 'utf8') } : {}),
  };
}

/** kafkajs `ssl` and `sasl` client options from the settings; secret files are read here. */
export function kafkaSecurityOptions(cfg: KafkaSecuritySettings): {
  ssl?: boolean | { ca?: string; cert?: string; key?: string };
  sasl?: SASLOptions;
  summary: { ssl: TlsMode; sasl: KafkaSaslMechanism };
} {
  throwIfProblems(kafkaSecurityProblems(cfg));
  const ssl = cfg.ssl ?? {};
  const mode = tlsMode(ssl);
  const sasl = cfg.sasl ?? {};
  const mech = sasl.mechanism ?? 'none';
  const saslOpt: SASLOptions | undefined =
    mech !== 'none' && set(sasl.username) && set(sasl.passwordFile)
      ? { mechanism: mech, username: sasl.username, password: readSecretFile(sasl.passwordFile, 'kafka.sasl.passwordFile') }
      : undefined;
  return { ssl: mode === 'off' ? undefined : pemOptions(ssl), sasl: saslOpt, summary: { ssl: mode, sasl: mech } };
}

/**
 * Why a TLS connection to a nats-server fails when nats.js can only say "timeout" (with TLS 1.3 the
 * server's refusal of a client certificate arrives after the handshake, on a socket nats.js no
 * longer reports errors for): the connection's first steps once more (INFO, TLS upgrade with the
 * same files, PING, no credentials), returning the TLS error code of the server's alert, or
 * undefined when the handshake and PING succeed.
 */
export async function probeNatsTls(server: string, tls: { caFile?: string; certFile?: string; keyFile?: string }, timeoutMs = 2000): Promise<string | undefined> {
  const m = /^(?:[a-z]+:\/\/)?\[?([^\]/]+?)\]?:(\d+)/i.exec(server.replace(/^[a-z]+:\/\/[^@/]*@/i, ''));
  if (m === null) return undefined;
  const host = m[1] as string;
  const port = Number(m[2]);
  return new Promise((resolve) => {
    let done = false;
    const finish = (v: string | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      raw.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    const raw = netConnect({ host, port });
    let info = '';
    raw.on('error', () => finish(undefined));
    const onData = (b: Buffer): void => {
      info += b.toString('latin1');
      if (!info.includes('\r\n')) return;
      raw.off('data', onData);
      const opts: ConnectionOptions = {
        socket: raw,
        ...(/^[\d.]+$/.test(host) ? {} : { servername: host }),
        ...pemOptions(tls),
      };
      const secure = tlsConnect(opts);
      secure.on('error', (e: NodeJS.ErrnoException) => finish(e.code ?? e.message));
      secure.on('secureConnect', () => secure.write('PING\r\n'));
      secure.on('data', (d: Buffer) => {
        if (d.toString('latin1').includes('PONG') || d.toString('latin1').includes('-ERR')) finish(undefined);
      });
    };
    raw.on('data', onData);
  });
}

/** When a `.creds` login is refused: the time its user JWT expired if its `exp` claim has passed (nats-server answers an expired JWT as an unknown one), else null. */
export async function credsExpiredAtMs(credsFile: string): Promise<number | null> {
  try {
    const { uc } = await parseCreds(readFileSync(credsFile));
    return typeof uc.exp === 'number' && uc.exp > 0 && uc.exp * 1000 <= Date.now() ? uc.exp * 1000 : null;
  } catch {
    return null;
  }
}
