// Keeping secrets out of logs, errors and configuration dumps (README.md, "Secrets in logs, errors
// and metrics"). Every secret is read from a file named by a `…File` setting, so the configuration
// holds paths; what can still carry one is a URL with user-info, a value under a secret-looking key,
// or an object handed to the logger.

export const REDACTED = '[redacted]';

/**
 * Key names whose value is a secret. A key ending in `File` holds a path to a
 * secret and is shown (an operator needs to see which file was used).
 */
const SECRET_KEY_RE = /(pass(word|wd|phrase)?|secret|token|seed|creds|credential|authorization|apikey|api_key|private_?key|sasl_?password)$/i;
const FILE_KEY_RE = /(file|_file|path)$/i;

/** True for a configuration key or variable name whose value would be a secret (`password`, `NATS_TOKEN`, `nkeySeed`). */
export function isSecretKey(name: string): boolean {
  if (FILE_KEY_RE.test(name)) return false;
  return SECRET_KEY_RE.test(name);
}

// `scheme://userinfo@` anywhere in a string, and a bare `user:pass@host` seed
// (nats.js accepts both forms). The user-info never contains `/`, `@`, spaces or commas.
const URL_USERINFO_RE = /([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^\s/@,"'<>]*@/g;
const BARE_USERINFO_RE = /(^|[\s,;"'(=[])([^\s/@,;"'()=:[\]]+:[^\s/@,;"'()]*)@(?=[A-Za-z0-9[])/g;

/** Replaces the user-info of every URL in `text` with `[redacted]` (`nats://[redacted]@host:4222`). */
export function redactUrl(text: string): string {
  if (!text.includes('@')) return text;
  return text.replace(URL_USERINFO_RE, `$1${REDACTED}@`).replace(BARE_USERINFO_RE, `$1${REDACTED}@`);
}

/**
 * A copy of `value` fit to log: values under secret-looking keys become
 * `[redacted]`, URL user-info in every string is stripped. Handles arrays,
 * plain objects and frozen input; anything else is returned as is.
 */
export function redactSecrets<T>(value: T): T {
  return redactValue(value, new WeakSet()) as T;
}

function redactValue(v: unknown, seen: WeakSet<object>): unknown {
  if (typeof v === 'string') return redactUrl(v);
  if (typeof v !== 'object' || v === null) return v;
  if (seen.has(v)) return '[circular]';
  seen.add(v);
  if (Array.isArray(v)) return v.map((x) => redactValue(x, seen));
  const proto = Object.getPrototypeOf(v) as unknown;
  if (proto !== Object.prototype && proto !== null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    out[k] = isSecretKey(k) && x !== '' && x !== undefined && x !== null ? REDACTED : redactValue(x, seen);
  }
  return out;
}

/**
 * pino `redact.paths` for every secret-bearing key name up to three levels
 * deep (fast-redact's `*` matches one level). This is the last line of
 * defence: the configuration and our errors never carry secrets to begin with.
 */
const SECRET_LOG_KEYS = [
  'password',
  'pass',
  'passwd',
  'token',
  'secret',
  'seed',
  'nkeySeed',
  'creds',
  'credentials',
  'authorization',
  'Authorization',
  'sasl.password',
  'ssl.key',
  'tls.key',
] as const;

export function secretLogPaths(): string[] {
  return SECRET_LOG_KEYS.flatMap((key) => [key, `*.${key}`, `*.*.${key}`, `*.*.*.${key}`]);
}
