// Secrets kept out of logs, configuration dumps and configuration errors.
import { describe, expect, it } from 'vitest';
import { baseConfigSchema, loadConfig } from '../src/config';
import { VantageError } from '../src/errors';
import { isSecretKey, redactSecrets, redactUrl } from '../src/secrets';
import { kafkaSecurityProblems, natsSecurityProblems } from '../src/security';
import { captureLogger } from './helpers';

const SECRET = 'hunter2-s3cr3t';

function configError(env: Record<string, string>): VantageError {
  try {
    loadConfig(baseConfigSchema, { env, defaults: { service: 'x' } });
  } catch (e) {
    if (e instanceof VantageError) return e;
    throw e;
  }
  throw new Error('expected CONFIG_INVALID');
}

describe('redactUrl', () => {
  it('strips user-info from every URL and bare seed, leaving the rest', () => {
    expect(redactUrl(`nats://svc:${SECRET}@10.0.0.1:4222`)).toBe('nats://[redacted]@10.0.0.1:4222');
    expect(redactUrl(`tls://a:${SECRET}@h1:4222,nats://tok${SECRET}@h2:4222`)).toBe('tls://[redacted]@h1:4222,nats://[redacted]@h2:4222');
    expect(redactUrl(`svc:${SECRET}@h:4222`)).toBe('[redacted]@h:4222');
    expect(redactUrl(`cannot connect to nats://u:${SECRET}@host:1 (timeout)`)).not.toContain(SECRET);
    expect(redactUrl('nats://127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
  });
});

describe('redactSecrets', () => {
  it('censors secret-looking keys at any depth and URL user-info in any string; file paths stay', () => {
    const out = redactSecrets({ nats: { url: `nats://u:${SECRET}@h:1`, passwordFile: '/run/secrets/pw', token: SECRET, tls: { keyFile: '/k' } }, list: [{ password: SECRET }] });
    expect(JSON.stringify(out)).not.toContain(SECRET);
    expect(out.nats.passwordFile).toBe('/run/secrets/pw');
    expect(out.nats.tls.keyFile).toBe('/k');
    expect(out.nats.token).toBe('[redacted]');
  });

  it('names: secrets yes, their files no', () => {
    expect(['password', 'nkeySeed', 'token', 'VANTAGE_NATS_PASSWORD', 'saslPassword', 'creds'].every(isSecretKey)).toBe(true);
    expect(['passwordFile', 'VANTAGE_NATS_PASSWORD_FILE', 'tokenFile', 'url', 'user', 'keyFile'].some(isSecretKey)).toBe(false);
  });
});

describe('configuration errors', () => {
  it('an unknown variable is named without its value', () => {
    const e = configError({ VANTAGE_NATS_PASSWORD: SECRET, VANTAGE_KAFKA_SASL_PASSWORD: SECRET });
    expect(e.message).toContain('VANTAGE_NATS_PASSWORD');
    expect(e.message).toContain('VANTAGE_KAFKA_SASL_PASSWORD');
    expect(`${e.message}${JSON.stringify(e.details)}`).not.toContain(SECRET);
  });

  it('an invalid value is shown with URL user-info stripped', () => {
    const e = configError({ VANTAGE_NATS_CONNECT_TIMEOUT_MS: `nats://u:${SECRET}@h:1` });
    expect(e.message).toContain('nats://[redacted]@h:1');
    expect(`${e.message}${JSON.stringify(e.details)}`).not.toContain(SECRET);
  });

  it('credentials in nats.url, a missing secret file and a half-set method are problems that never quote the secret', () => {
    const problems = [
      ...natsSecurityProblems({ url: `nats://u:${SECRET}@h:1`, user: 'u' }),
      ...natsSecurityProblems({ url: 'nats://h:1', passwordFile: SECRET, user: 'u' }),
      ...kafkaSecurityProblems({ sasl: { mechanism: 'scram-sha-512', username: 'u', passwordFile: SECRET } }),
    ];
    expect(problems.map((p) => p.path)).toEqual(['nats.url', 'nats.passwordFile', 'nats.passwordFile', 'kafka.sasl.passwordFile']);
    expect(JSON.stringify(problems)).not.toContain(SECRET);
  });

  it('a config file that is not JSON is reported by position, not by quoting it', () => {
    const e = (() => {
      try {
        loadConfig(baseConfigSchema, { env: { VANTAGE_CONFIG: '/dev/null' }, defaults: { service: 'x' } });
      } catch (err) {
        return err as VantageError;
      }
      return null;
    })();
    expect(e?.message).toMatch(/not valid JSON/);
  });
});

describe('logger redaction', () => {
  it('censors secret-bearing keys up to three levels deep and URL user-info in errors', () => {
    const cap = captureLogger('info');
    cap.log.info({ password: SECRET, sasl: { password: SECRET }, a: { b: { token: SECRET } }, opts: { tls: { key: SECRET } } }, 'client options');
    cap.log.error({ err: new Error(`cannot connect to nats://u:${SECRET}@h:1`, { cause: new Error(`via tls://x:${SECRET}@h:2`) }) }, 'failed');
    const text = JSON.stringify(cap.lines);
    expect(text).not.toContain(SECRET);
    expect(text).toContain('[redacted]');
    expect(cap.lines[0]!['password']).toBe('[redacted]');
  });
});
