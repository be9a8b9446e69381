// Configuration: a JSON file overlaid by environment variables, validated once against a compiled
// JSON Schema, defaults applied, then deep-frozen (README.md, "Configuration": precedence and the
// `VANTAGE_<PATH>` mapping). Variable names are derived from the schema, never parsed from the
// variable, so an `_` inside a word and one between segments cannot be confused.

import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { VantageError } from './errors';
import { isSecretKey, REDACTED, redactSecrets } from './secrets';
import { s, type DeepReadonly, type JsonSchema, type ObjectSchema, type Static, type TSchema } from './schema';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const KAFKA_SASL_MECHANISMS = ['none', 'plain', 'scram-sha-256', 'scram-sha-512'] as const;
export type KafkaSaslMechanism = (typeof KAFKA_SASL_MECHANISMS)[number];

/** `nats.tls` and `kafka.ssl` alike: TLS on, and the CA, client certificate and key files. */
const tlsProperties = {
  enabled: s.boolean({ default: false }),
  caFile: s.string({ default: '' }),
  certFile: s.string({ default: '' }),
  keyFile: s.string({ default: '' }),
};

// What each setting means: README.md, "Configuration" (the base section's table) and "Secured connections".
const baseProperties = {
  service: s.string({ minLength: 1, pattern: '^[a-z][a-z0-9-]*$' }),
  instanceId: s.string({ default: '' }),
  log: s.object({
    level: s.enum(LOG_LEVELS, { default: 'info' }),
  }),
  nats: s.object({
    url: s.string({ minLength: 1, default: 'nats://127.0.0.1:4222' }),
    name: s.string({ default: '' }),
    reconnectTimeWaitMs: s.integer({ minimum: 10, default: 2000 }),
    reconnectJitterMs: s.integer({ minimum: 0, default: 500 }),
    maxReconnectAttempts: s.integer({ minimum: -1, default: -1 }),
    connectTimeoutMs: s.integer({ minimum: 100, default: 5000 }),
    user: s.string({ default: '' }),
    passwordFile: s.string({ default: '' }),
    tokenFile: s.string({ default: '' }),
    nkeySeedFile: s.string({ default: '' }),
    credsFile: s.string({ default: '' }),
    tls: s.object({ ...tlsProperties, handshakeFirst: s.boolean({ default: false }) }),
  }),
  kafka: s.object({
    brokers: s.array(s.string({ minLength: 1 }), { minItems: 1, default: ['127.0.0.1:9092'] }),
    clientId: s.string({ default: '' }),
    connectionTimeoutMs: s.integer({ minimum: 100, default: 3000 }),
    requestTimeoutMs: s.integer({ minimum: 100, default: 30000 }),
    retries: s.integer({ minimum: 0, default: 5 }),
    ssl: s.object(tlsProperties),
    sasl: s.object({
      mechanism: s.enum(KAFKA_SASL_MECHANISMS, { default: 'none' }),
      username: s.string({ default: '' }),
      passwordFile: s.string({ default: '' }),
    }),
  }),
  http: s.object({
    host: s.string({ minLength: 1, default: '127.0.0.1' }),
    port: s.integer({ minimum: 0, maximum: 65535, default: 0 }),
  }),
  shutdown: s.object({
    deadlineMs: s.integer({ minimum: 100, default: 10000 }),
  }),
  health: s.object({
    natsDownMs: s.integer({ minimum: 0, default: 5000 }),
  }),
};

/** The common section every service config extends (`s.extend(baseConfigSchema, {...})`). */
export const baseConfigSchema = s.object(baseProperties);
export type BaseConfig = Static<typeof baseConfigSchema>;

interface LoadConfigOptions {
  /** Environment to read; usually `process.env`. */
  env: Readonly<Record<string, string | undefined>>;
  /** Lowest-priority values (below the file), e.g. the service name supplied by code. */
  defaults?: Record<string, unknown>;
}

interface ConfigProblem {
  /** Dotted path, e.g. `nats.reconnectTimeWaitMs`; `(root)` for the whole document. */
  path: string;
  message: string;
  /** Where the offending value came from: `env VANTAGE_X`, `file <path>`, `default`, or `missing`. */
  source: string;
  value?: unknown;
}

interface EnvLeaf {
  name: string;
  path: string[];
  schema: JsonSchema;
}

function toSnake(segment: string): string {
  return segment
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .toUpperCase();
}

const PREFIX = 'VANTAGE_';
const CONFIG_VAR = 'VANTAGE_CONFIG';

function collectLeaves(schema: JsonSchema): EnvLeaf[] {
  const out: EnvLeaf[] = [];
  const walk = (node: JsonSchema, path: string[]): void => {
    if (node.type === 'object' && node.properties !== undefined) {
      for (const [k, child] of Object.entries(node.properties)) walk(child, [...path, k]);
      return;
    }
    out.push({ name: PREFIX + path.map(toSnake).join('_'), path, schema: node });
  };
  walk(schema, []);
  const seen = new Map<string, string>();
  for (const l of out) {
    const other = seen.get(l.name);
    // A schema bug (e.g. `fooBar` and `foo.bar`), caught when the service is written, not in production.
    if (other !== undefined) throw new Error(`config schema: ${other} and ${l.path.join('.')} both map to ${l.name}`);
    seen.set(l.name, l.path.join('.'));
  }
  return out;
}

/** Turns an env string into the leaf's type; returns the string unchanged when it does not fit (ajv then reports it). */
export function coerceEnvValue(raw: string, schema: JsonSchema): unknown {
  switch (schema.type) {
    case 'integer':
    case 'number': {
      const t = raw.trim();
      if (t === '') return raw;
      const n = Number(t);
      return Number.isFinite(n) ? n : raw;
    }
    case 'boolean': {
      const t = raw.trim().toLowerCase();
      if (t === 'true' || t === '1' || t === 'yes' || t === 'on') return true;
      if (t === 'false' || t === '0' || t === 'no' || t === 'off') return false;
      return raw;
    }
    case 'array': {
      const t = raw.trim();
      if (t.startsWith('[')) {
        try {
          return JSON.parse(t) as unknown;
        } catch {
          return raw;
        }
      }
      if (t === '') return [];
      const item = schema.items ?? {};
      if (item.type === 'object' || item.type === 'array') return raw;
      return t.split(',').map((p) => coerceEnvValue(p.trim(), item));
    }
    default:
      return raw;
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = isPlainObject(b) && isPlainObject(v) ? deepMerge(b, v) : v;
  }
  return out;
}

function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  for (const seg of path.slice(0, -1)) {
    if (!isPlainObject(node[seg])) node[seg] = {};
    node = node[seg] as Record<string, unknown>;
  }
  node[path[path.length - 1] as string] = value;
}

function getPath(v: unknown, path: readonly string[]): { found: boolean; value?: unknown } {
  let node = v;
  for (const seg of path) {
    if (isPlainObject(node) && Object.prototype.hasOwnProperty.call(node, seg)) node = node[seg];
    else if (Array.isArray(node) && /^\d+$/.test(seg) && Number(seg) < node.length) node = node[Number(seg)];
    else return { found: false };
  }
  return { found: true, value: node };
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const child of Object.values(v as object)) deepFreeze(child);
  }
  return v;
}

// One ajv instance per process: compiling is the expensive part, done once per schema.
const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true, allowUnionTypes: false });
const compiled = new WeakMap<object, ReturnType<Ajv['compile']>>();

function describe(e: ErrorObject): { path: string[]; message: string } {
  const path = e.instancePath === '' ? [] : e.instancePath.slice(1).split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties':
      return { path: [...path, String(p['additionalProperty'])], message: 'unknown key (not in the schema)' };
    case 'required':
      return { path: [...path, String(p['missingProperty'])], message: 'is required' };
    case 'enum':
      return { path, message: `must be one of ${(p['allowedValues'] as unknown[]).map((x) => JSON.stringify(x)).join(', ')}` };
    default:
      return { path, message: e.message ?? e.keyword };
  }
}

function formatValue(v: unknown): string {
  const text = JSON.stringify(redactSecrets(v)) ?? String(v);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** One CONFIG_INVALID listing every problem, a line each; `details.problems` has them as data. */
export function configInvalid(lines: readonly string[], problems: readonly object[]): VantageError {
  return new VantageError('CONFIG_INVALID', `invalid configuration (${lines.length} problem${lines.length === 1 ? '' : 's'}):\n${lines.map((l) => `  - ${l}`).join('\n')}`, { details: { problems } });
}

/**
 * Loads, validates, defaults and freezes configuration. Throws one
 * VantageError(CONFIG_INVALID) naming every problem (path, expectation,
 * offending value and where it came from); `details.problems` has them as data.
 */
export function loadConfig<P extends Record<string, TSchema<unknown>>>(
  schema: ObjectSchema<P>,
  opts: LoadConfigOptions,
): DeepReadonly<Static<ObjectSchema<P>>> {
  const problems: ConfigProblem[] = [];
  const leaves = collectLeaves(schema);

  // 1. File.
  const filePath = opts.env[CONFIG_VAR];
  let fileData: Record<string, unknown> = {};
  if (filePath !== undefined && filePath !== '') {
    try {
      const parsed = JSON.parse(readFileSync(filePath, 'utf8')) as unknown;
      if (isPlainObject(parsed)) fileData = parsed;
      else problems.push({ path: '(root)', message: 'config file must hold a JSON object', source: `file ${filePath}`, value: parsed });
    } catch (e) {
      // A JSON syntax error's message quotes the file's text, which may hold a secret: only where it broke is said.
      const at = e instanceof SyntaxError ? /position \d+/.exec(e.message)?.[0] : undefined;
      const why = e instanceof SyntaxError ? `not valid JSON${at === undefined ? '' : ` (${at})`}` : (e as Error).message;
      problems.push({ path: '(root)', message: `cannot read config file: ${why}`, source: `file ${filePath}` });
    }
  }

  // 2. Environment, set over a copy of the defaults and the file: ajv's default insertion and the
  // final freeze never touch the caller's objects.
  const data = structuredClone(deepMerge(opts.defaults ?? {}, fileData));
  const envSource = new Map<string, string>();
  const byName = new Map(leaves.map((l) => [l.name, l]));
  for (const [name, raw] of Object.entries(opts.env)) {
    if (!name.startsWith(PREFIX) || raw === undefined || name === CONFIG_VAR) continue;
    const leaf = byName.get(name);
    if (leaf === undefined) {
      // Reported by name only, never with its value: an unknown variable may well be a
      // misplaced secret (VANTAGE_NATS_PASSWORD instead of a password file).
      problems.push({ path: '(env)', message: 'environment variable maps to no setting', source: `env ${name}` });
      continue;
    }
    setPath(data, leaf.path, coerceEnvValue(raw, leaf.schema));
    envSource.set(leaf.path.join('.'), name);
  }

  // 3. Validate everything at once (allErrors) so an operator fixes all problems in one round.
  let validate = compiled.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (!validate(data)) {
    for (const e of validate.errors ?? []) {
      const { path, message } = describe(e);
      const dotted = path.join('.');
      const got = getPath(data, path);
      // The variable that set the path or its nearest enclosing setting, else the file, else the schema's default.
      const env = path.map((_, i) => envSource.get(path.slice(0, path.length - i).join('.'))).find((v) => v !== undefined);
      const source = env !== undefined ? `env ${env}` : getPath(fileData, path).found ? `file ${filePath ?? ''}` : got.found ? 'default' : 'missing';
      // A value under a secret-looking key is named but not shown; any other value is shown with URL user-info stripped.
      const shown = path.some((seg) => isSecretKey(seg)) ? REDACTED : redactSecrets(got.value);
      problems.push({ path: dotted === '' ? '(root)' : dotted, message, source, ...(got.found ? { value: shown } : {}) });
    }
  }

  if (problems.length > 0) throw configInvalid(problems.map((p) => `${p.path}: ${p.message} (${p.source}${'value' in p ? `, got ${formatValue(p.value)}` : ''})`), problems);
  return deepFreeze(data) as DeepReadonly<Static<ObjectSchema<P>>>;
}

/** `@vantage/infra`'s broker ports, set in the same shell as the tools it runs: not settings of ours. */
const INFRA_PORT_VARIABLES = new Set(['VANTAGE_NATS_PORT', 'VANTAGE_NATS_MONITOR_PORT', 'VANTAGE_KAFKA_PORT', 'VANTAGE_KAFKA_CONTROLLER_PORT']);

/**
 * The `nats.*` and `kafka.*` settings of a command-line tool (load generator, calibration,
 * `vantage replay`), from `VANTAGE_NATS_*` and `VANTAGE_KAFKA_*` only: a tool shares the
 * services' security settings (users, secret files, TLS) without their other sections.
 * Invalid or unknown variables of those two sections are CONFIG_INVALID as for a service.
 */
export function toolSettings(env: Readonly<Record<string, string | undefined>>, defaults: Record<string, unknown> = {}): DeepReadonly<Pick<BaseConfig, 'nats' | 'kafka'>> {
  const own = Object.fromEntries(Object.entries(env).filter(([k]) => (k.startsWith('VANTAGE_NATS_') || k.startsWith('VANTAGE_KAFKA_')) && !INFRA_PORT_VARIABLES.has(k)));
  const cfg = loadConfig(baseConfigSchema, { env: own, defaults: { service: 'tool', ...defaults } });
  return { nats: cfg.nats, kafka: cfg.kafka };
}
