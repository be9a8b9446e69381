import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { baseConfigSchema, coerceEnvValue, loadConfig } from '../src/config';
import { VantageError } from '../src/errors';
import { s } from '../src/schema';

const serviceSchema = s.extend(baseConfigSchema, {
  indexer: s.object({
    pools: s.array(s.string(), { default: ['efficient'] }),
    maxQueue: s.integer({ minimum: 1, default: 4096 }),
    strictOrder: s.boolean({ default: true }),
    ratio: s.number({ minimum: 0, maximum: 1, default: 0.5 }),
    mode: s.enum(['live', 'replay'], { default: 'live' }),
  }),
});

function writeJson(value: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-config-'));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify(value));
  return path;
}

function loadError(fn: () => unknown): VantageError {
  try {
    fn();
  } catch (e) {
    if (e instanceof VantageError) return e;
    throw e;
  }
  throw new Error('expected loadConfig to throw');
}

describe('loadConfig', () => {
  it('applies defaults everywhere so nothing is missing', () => {
    const cfg = loadConfig(serviceSchema, { env: {}, defaults: { service: 'indexer' } });
    expect(cfg.service).toBe('indexer');
    expect(cfg.log.level).toBe('info');
    expect(cfg.nats).toEqual({
      url: 'nats://127.0.0.1:4222',
      name: '',
      reconnectTimeWaitMs: 2000,
      reconnectJitterMs: 500,
      maxReconnectAttempts: -1,
      connectTimeoutMs: 5000,
      user: '',
      passwordFile: '',
      tokenFile: '',
      nkeySeedFile: '',
      credsFile: '',
      tls: { enabled: false, caFile: '', certFile: '', keyFile: '', handshakeFirst: false },
    });
    expect(cfg.kafka.ssl).toEqual({ enabled: false, caFile: '', certFile: '', keyFile: '' });
    expect(cfg.kafka.sasl).toEqual({ mechanism: 'none', username: '', passwordFile: '' });
    expect(cfg.http).toEqual({ host: '127.0.0.1', port: 0 });
    expect(cfg.kafka.brokers).toEqual(['127.0.0.1:9092']);
    expect(cfg.shutdown.deadlineMs).toBe(10000);
    expect(cfg.indexer).toEqual({ pools: ['efficient'], maxQueue: 4096, strictOrder: true, ratio: 0.5, mode: 'live' });
  });

  it('returns a deeply frozen object', () => {
    const cfg = loadConfig(serviceSchema, { env: {}, defaults: { service: 'indexer' } });
    expect(Object.isFrozen(cfg)).toBe(true);
    expect(Object.isFrozen(cfg.nats)).toBe(true);
    expect(Object.isFrozen(cfg.indexer.pools)).toBe(true);
    expect(() => {
      (cfg.nats as { url: string }).url = 'nats://elsewhere:4222';
    }).toThrow(TypeError);
  });

  it('does not freeze or mutate the caller-supplied defaults', () => {
    const defaults = { service: 'indexer', nats: { url: 'nats://a:4222' } };
    loadConfig(serviceSchema, { env: {}, defaults });
    expect(Object.isFrozen(defaults.nats)).toBe(false);
    expect(defaults.nats).toEqual({ url: 'nats://a:4222' });
  });

  it('overlays env over file over defaults, coercing by schema type', () => {
    const file = writeJson({ service: 'indexer', nats: { url: 'nats://file:4222', reconnectTimeWaitMs: 100 }, http: { port: 9000 } });
    const cfg = loadConfig(serviceSchema, {
      env: {
        VANTAGE_CONFIG: file,
        VANTAGE_NATS_URL: 'nats://env:4222',
        VANTAGE_HTTP_PORT: '9100',
        VANTAGE_SHUTDOWN_DEADLINE_MS: '2500',
        VANTAGE_INDEXER_STRICT_ORDER: 'false',
        VANTAGE_INDEXER_RATIO: '0.25',
        VANTAGE_KAFKA_BROKERS: 'k1:9092, k2:9092',
        VANTAGE_INDEXER_POOLS: '["efficient","capable"]',
        OTHER_VAR: 'ignored: no prefix',
      },
    });
    expect(cfg.nats.url).toBe('nats://env:4222');
    expect(cfg.nats.reconnectTimeWaitMs).toBe(100);
    expect(cfg.http.port).toBe(9100);
    expect(cfg.shutdown.deadlineMs).toBe(2500);
    expect(cfg.indexer.strictOrder).toBe(false);
    expect(cfg.indexer.ratio).toBe(0.25);
    expect(cfg.kafka.brokers).toEqual(['k1:9092', 'k2:9092']);
    expect(cfg.indexer.pools).toEqual(['efficient', 'capable']);
  });


  it('rejects unknown keys at every level', () => {
    const file = writeJson({ service: 'x', bogus: 1, nats: { url: 'nats://a:1', urll: 'typo' }, indexer: { extra: true } });
    const err = loadError(() => loadConfig(serviceSchema, { env: { VANTAGE_CONFIG: file } }));
    expect(err.code).toBe('CONFIG_INVALID');
    const problems = (err.details['problems'] as { path: string; message: string }[]).map((p) => `${p.path}: ${p.message}`);
    expect(problems).toEqual(
      expect.arrayContaining(['bogus: unknown key (not in the schema)', 'nats.urll: unknown key (not in the schema)', 'indexer.extra: unknown key (not in the schema)']),
    );
    expect(problems).toHaveLength(3);
  });

  it('rejects prefixed env vars that map to no setting', () => {
    const err = loadError(() => loadConfig(serviceSchema, { env: { VANTAGE_NATS_URI: 'nats://typo:4222' }, defaults: { service: 'x' } }));
    expect(err.message).toContain('VANTAGE_NATS_URI');
  });

  it('names every bad value with its path, expectation, value and source', () => {
    const file = writeJson({ service: 'Bad Name', log: { level: 'loud' }, http: { port: 70000 } });
    const err = loadError(() =>
      loadConfig(serviceSchema, {
        env: { VANTAGE_CONFIG: file, VANTAGE_SHUTDOWN_DEADLINE_MS: 'soon', VANTAGE_INDEXER_STRICT_ORDER: 'maybe', VANTAGE_INDEXER_MAX_QUEUE: '0' },
      }),
    );
    const msg = err.message;
    expect(msg).toMatch(/invalid configuration \(6 problems\)/);
    expect(msg).toContain(`service: must match pattern "^[a-z][a-z0-9-]*$" (file ${file}, got "Bad Name")`);
    expect(msg).toContain('log.level: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent"');
    expect(msg).toContain(`http.port: must be <= 65535 (file ${file}, got 70000)`);
    expect(msg).toContain('shutdown.deadlineMs: must be integer (env VANTAGE_SHUTDOWN_DEADLINE_MS, got "soon")');
    expect(msg).toContain('indexer.strictOrder: must be boolean (env VANTAGE_INDEXER_STRICT_ORDER, got "maybe")');
    expect(msg).toContain('indexer.maxQueue: must be >= 1 (env VANTAGE_INDEXER_MAX_QUEUE, got 0)');
  });

  it('reports a missing required value', () => {
    const err = loadError(() => loadConfig(serviceSchema, { env: {} }));
    expect(err.message).toContain('service: is required (missing)');
  });

  it('reports an unreadable or malformed file', () => {
    expect(loadError(() => loadConfig(serviceSchema, { env: { VANTAGE_CONFIG: '/nonexistent/x.json' } })).message).toContain('cannot read config file');
    const dir = mkdtempSync(join(tmpdir(), 'vantage-config-'));
    writeFileSync(join(dir, 'bad.json'), '{ not json');
    expect(loadError(() => loadConfig(serviceSchema, { env: { VANTAGE_CONFIG: join(dir, 'bad.json') }, defaults: { service: 'x' } })).message).toContain(
      'cannot read config file',
    );
  });
});

describe('environment mapping', () => {
  it('derives one variable per leaf from the schema', () => {
    const env = {
      VANTAGE_NATS_URL: 'nats://h:1',
      VANTAGE_NATS_RECONNECT_TIME_WAIT_MS: '50',
      VANTAGE_SHUTDOWN_DEADLINE_MS: '500',
      VANTAGE_HTTP_PORT: '8080',
      VANTAGE_INSTANCE_ID: 'i-1',
    };
    const c = loadConfig(serviceSchema, { env, defaults: { service: 'x' } });
    expect([c.nats.url, c.nats.reconnectTimeWaitMs, c.shutdown.deadlineMs, c.http.port, c.instanceId]).toEqual(['nats://h:1', 50, 500, 8080, 'i-1']);
  });

  it('refuses a schema whose leaves collide on one variable', () => {
    const bad = s.object({ fooBar: s.string({ default: '' }), foo: s.object({ bar: s.string({ default: '' }) }) });
    expect(() => loadConfig(bad, { env: {} })).toThrow(/both map to VANTAGE_FOO_BAR/);
  });

  it('coerces scalars and leaves unparseable text for the validator to report', () => {
    expect(coerceEnvValue('42', { type: 'integer' })).toBe(42);
    expect(coerceEnvValue(' ', { type: 'integer' })).toBe(' ');
    expect(coerceEnvValue('1e3', { type: 'number' })).toBe(1000);
    expect(coerceEnvValue('yes', { type: 'boolean' })).toBe(true);
    expect(coerceEnvValue('0', { type: 'boolean' })).toBe(false);
    expect(coerceEnvValue('1,2', { type: 'array', items: { type: 'integer' } })).toEqual([1, 2]);
    expect(coerceEnvValue('[1,', { type: 'array', items: { type: 'integer' } })).toBe('[1,');
  });
});
