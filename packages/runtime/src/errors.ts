// Error catalogue (README.md, "Errors", whose table test/readme.test.ts checks against it): codes
// travel in reply headers and metric labels, so one is never renamed or reused.

/** One entry of the catalogue. */
interface ErrorCodeInfo {
  /** What the code means, for humans (README table, logs). */
  readonly description: string;
  /** Whether the same operation may succeed if simply tried again (possibly on another replica). */
  readonly retryable: boolean;
  /** Numeric status in `Nats-Service-Error-Code`: HTTP-like, as NATS micro services (and so generic NATS tooling) have it. */
  readonly status: number;
  /** Prometheus label value: lower snake case, bounded cardinality. */
  readonly label: string;
}

function entry(description: string, retryable: boolean, status: number, label: string): ErrorCodeInfo {
  return Object.freeze({ description, retryable, status, label });
}

export const ERROR_CODES = Object.freeze({
  CONFIG_INVALID: entry('Configuration failed validation at start-up.', false, 500, 'config_invalid'),
  NATS_CONNECT_FAILED: entry('Initial connection to the NATS server failed.', true, 503, 'nats_connect_failed'),
  NATS_AUTH_FAILED: entry('The NATS server refused the credentials (wrong password or token, unknown NKEY, expired or untrusted JWT).', false, 401, 'nats_auth_failed'),
  NATS_TLS_FAILED: entry('The TLS handshake with the NATS server failed (untrusted server certificate, client certificate missing or refused, TLS required by one side only).', false, 502, 'nats_tls_failed'),
  NATS_NO_RESPONDERS: entry('No service is subscribed to the request subject.', true, 503, 'nats_no_responders'),
  NATS_TIMEOUT: entry('A NATS request got no reply within its timeout.', true, 504, 'nats_timeout'),
  NATS_REQUEST_FAILED: entry('A NATS request failed for another reason (connection closed, disconnected, permissions).', true, 503, 'nats_request_failed'),
  JETSTREAM_SETUP_FAILED: entry('Creating or updating a JetStream stream or consumer failed.', false, 500, 'jetstream_setup_failed'),
  KAFKA_CONNECT_FAILED: entry('Connecting to the Kafka cluster failed.', true, 503, 'kafka_connect_failed'),
  KAFKA_AUTH_FAILED: entry('The Kafka broker refused the SASL credentials or mechanism.', false, 401, 'kafka_auth_failed'),
  KAFKA_TLS_FAILED: entry('The TLS handshake with a Kafka broker failed (untrusted broker certificate, client certificate missing or refused, TLS on one side only).', false, 502, 'kafka_tls_failed'),
  KAFKA_ADMIN_FAILED: entry('A Kafka admin operation (topic creation, metadata) failed.', true, 503, 'kafka_admin_failed'),
  KAFKA_SEND_FAILED: entry('Kafka did not acknowledge a produced batch.', true, 503, 'kafka_send_failed'),
  DECODE_FAILED: entry('A message could not be decoded into its domain type.', false, 400, 'decode_failed'),
  BAD_REQUEST: entry('The request was well-formed on the wire but semantically invalid.', false, 400, 'bad_request'),
  NOT_FOUND: entry('The requested entity (model pool, worker, request id) is unknown.', false, 404, 'not_found'),
  OVERLOADED: entry('The service is at its concurrency bound and shed the request; another replica may accept it.', true, 429, 'overloaded'),
  SHUTTING_DOWN: entry('The service is draining and takes no new work; another replica may accept it.', true, 503, 'shutting_down'),
  UPSTREAM_UNAVAILABLE: entry('A service this one depends on is unavailable.', true, 503, 'upstream_unavailable'),
  DEADLINE_EXCEEDED: entry('The operation ran out of its time budget; retry only with a fresh deadline.', true, 504, 'deadline_exceeded'),
  INTERNAL: entry('An unexpected failure inside the service (a bug); details are in its log, not in the reply.', false, 500, 'internal'),
} satisfies Record<string, ErrorCodeInfo>);

export type ErrorCode = keyof typeof ERROR_CODES;

function isErrorCode(s: string): s is ErrorCode {
  return Object.prototype.hasOwnProperty.call(ERROR_CODES, s);
}

interface VantageErrorOptions {
  cause?: unknown;
  /** Overrides the catalogue's flag, e.g. a Kafka error the client itself marks non-retriable. */
  retryable?: boolean;
  /** Structured context for logs (subject, url, topic...). Keep it small and free of secrets. */
  details?: Readonly<Record<string, unknown>>;
}

export class VantageError extends Error {
  override readonly name = 'VantageError';
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, opts: VantageErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.retryable = opts.retryable ?? ERROR_CODES[code].retryable;
    this.details = Object.freeze({ ...(opts.details ?? {}) });
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  get label(): string {
    return ERROR_CODES[this.code].label;
  }

  /** Shape for pino's `err` serializer and JSON logs. */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      details: this.details,
      cause: this.cause instanceof Error ? { name: this.cause.name, message: this.cause.message } : this.cause,
    };
  }
}

/** The message of an Error, or anything else as a string. */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** Returns `e` if it is already a VantageError, otherwise wraps it with `code`. */
export function toVantageError(e: unknown, code: ErrorCode = 'INTERNAL'): VantageError {
  return e instanceof VantageError ? e : new VantageError(code, errorMessage(e), { cause: e });
}

// ---- Errors in NATS reply headers, an empty body with the four headers of README.md, "Errors".
// Readers prefer Vantage-Error-Code; a reply from a non-vantage NATS service
// with only the numeric header still maps to a sensible code.

export const HEADER_SERVICE_ERROR_CODE = 'Nats-Service-Error-Code';
export const HEADER_SERVICE_ERROR = 'Nats-Service-Error';
export const HEADER_VANTAGE_ERROR_CODE = 'Vantage-Error-Code';
const HEADER_VANTAGE_RETRYABLE = 'Vantage-Error-Retryable';

/** The subset of nats.js `MsgHdrs` we need; keeps this module transport-free and testable. */
interface HeaderWriter {
  set(k: string, v: string): void;
}
interface HeaderReader {
  get(k: string): string;
  has(k: string): boolean;
}

const MAX_HEADER_TEXT = 1024;

/** Header values are a single line on the wire: CR/LF would end the header block early. */
function headerSafe(text: string): string {
  const one = text.replace(/[\r\n]+/g, ' ').trim();
  return one.length > MAX_HEADER_TEXT ? `${one.slice(0, MAX_HEADER_TEXT - 3)}...` : one;
}

/** Writes `err` into `h`. INTERNAL errors keep their message out of the reply: it may hold internals. */
export function writeErrorHeaders(h: HeaderWriter, err: VantageError): void {
  const text = err.code === 'INTERNAL' ? 'internal error' : err.message;
  h.set(HEADER_SERVICE_ERROR_CODE, String(err.status));
  h.set(HEADER_SERVICE_ERROR, headerSafe(text) || err.code);
  h.set(HEADER_VANTAGE_ERROR_CODE, err.code);
  h.set(HEADER_VANTAGE_RETRYABLE, err.retryable ? 'true' : 'false');
}

/** What a reply with only the numeric status means; any other status is INTERNAL. */
const CODE_FOR_STATUS: Readonly<Record<number, ErrorCode>> = { 400: 'BAD_REQUEST', 404: 'NOT_FOUND', 408: 'DEADLINE_EXCEEDED', 504: 'DEADLINE_EXCEEDED', 429: 'OVERLOADED', 503: 'UPSTREAM_UNAVAILABLE' };

/**
 * Reads a service error from a reply's headers; `null` when the reply is a
 * success. The returned error has `details.remote === true` so callers and
 * logs can tell a peer's failure from a local one.
 */
export function readErrorHeaders(h: HeaderReader | undefined, context: Record<string, unknown> = {}): VantageError | null {
  if (h === undefined) return null;
  const hasVantage = h.has(HEADER_VANTAGE_ERROR_CODE);
  const hasNats = h.has(HEADER_SERVICE_ERROR_CODE) || h.has(HEADER_SERVICE_ERROR);
  if (!hasVantage && !hasNats) return null;

  const rawCode = h.get(HEADER_VANTAGE_ERROR_CODE);
  const rawStatus = h.get(HEADER_SERVICE_ERROR_CODE);
  const status = Number.parseInt(rawStatus, 10);
  // A code we do not know comes from a newer peer: fall back to the numeric
  // status rather than failing to read the error at all.
  const code: ErrorCode = isErrorCode(rawCode) ? rawCode : (CODE_FOR_STATUS[status] ?? 'INTERNAL');
  const text = h.get(HEADER_SERVICE_ERROR) || code;
  const rawRetry = h.get(HEADER_VANTAGE_RETRYABLE);
  const retryable = rawRetry === 'true' ? true : rawRetry === 'false' ? false : undefined;
  const details: Record<string, unknown> = { ...context, remote: true };
  if (rawCode !== '' && !isErrorCode(rawCode)) details['remoteCode'] = rawCode;
  if (rawStatus !== '') details['remoteStatus'] = rawStatus;
  return new VantageError(code, text, { details, ...(retryable === undefined ? {} : { retryable }) });
}
