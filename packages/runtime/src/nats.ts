// NATS glue: connection with reconnect-forever and status logging, a
// request() that turns every failure into a typed VantageError, and idempotent
// JetStream set-up. The request-reply server is responder.ts.

import {
  connect,
  NoRespondersError,
  RequestError,
  TimeoutError,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Payload,
  type Status,
} from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  ReplayPolicy,
  jetstreamManager,
  type ConsumerConfig,
  type ConsumerInfo,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import type { Logger } from 'pino';
import type { BaseConfig } from './config';
import { errorMessage, readErrorHeaders, VantageError } from './errors';
import type { RuntimeMetrics } from './metrics';
import type { DeepReadonly } from './schema';
import { redactUrl } from './secrets';
import { causeChain, classifyNatsConnectError, credsExpiredAtMs, natsSecurityOptions, natsServersForClient, probeNatsTls, type NatsSecuritySettings } from './security';

export type { NatsConnection } from '@nats-io/transport-node';

/** `nats.*` as the schema has it (`url`: one or a comma-separated list, `tls://` requiring TLS), security fields optional. */
export type NatsSettings = NatsSecuritySettings &
  Pick<DeepReadonly<BaseConfig['nats']>, 'name' | 'reconnectTimeWaitMs' | 'reconnectJitterMs' | 'maxReconnectAttempts' | 'connectTimeoutMs'>;

interface ConnectNatsOptions {
  metrics?: RuntimeMetrics;
  /** NATS `no_echo`: this connection's own publishes are not delivered to its subscriptions. */
  noEcho?: boolean;
}

// Connection state as seen through status events; nats.js exposes only
// isClosed(), and a connection that is reconnecting is not healthy.
/** When the connection was last seen to go down (disconnect or close), null while it is up. */
const downSince = new WeakMap<NatsConnection, number | null>();

/** True while the connection is up (not closed, not between disconnect and reconnect). */
export function natsConnected(nc: NatsConnection): boolean {
  return !nc.isClosed() && downSince.get(nc) === null;
}

/** How long the connection has been down (0 while it is up): the runtime's health check compares it with `health.natsDownMs`. */
export function natsDisconnectedForMs(nc: NatsConnection, nowMs = Date.now()): number {
  const since = natsConnected(nc) ? null : downSince.get(nc);
  return since === null || since === undefined ? 0 : Math.max(0, nowMs - since);
}

const markDown = (nc: NatsConnection): void => void downSince.set(nc, downSince.get(nc) ?? Date.now());
const markUp = (nc: NatsConnection): void => void downSince.set(nc, null);

/** A status event as log fields: its own, with the error as `err` and a slow consumer's subscription by its subject. */
function statusFields(s: Status): Record<string, unknown> {
  if (s.type === 'error') return { natsStatus: s.type, err: s.error };
  if (s.type === 'slowConsumer') return { natsStatus: s.type, subject: s.sub.getSubject(), pending: s.pending };
  const { type, ...rest } = s;
  return { natsStatus: type, ...rest };
}

/** How a status event is logged; the rest (reconnecting, ping, update, forceReconnect: frequent during an outage) at debug. */
const STATUS_LOG: Partial<Record<Status['type'], ['warn' | 'info' | 'error', string]>> = {
  disconnect: ['warn', 'nats disconnected'],
  reconnect: ['info', 'nats reconnected'],
  // Lame duck mode: the server is about to shut down; the client moves to another server on its own.
  ldm: ['warn', 'nats server entering lame duck mode'],
  error: ['error', 'nats async error'],
  staleConnection: ['warn', 'nats staleConnection'],
  slowConsumer: ['warn', 'nats slowConsumer'],
  close: ['info', 'nats connection closed'],
};

async function watchStatus(nc: NatsConnection, log: Logger, metrics: RuntimeMetrics | undefined): Promise<void> {
  for await (const s of nc.status()) {
    metrics?.natsStatus.inc({ type: s.type });
    if (s.type === 'disconnect' || s.type === 'close') markDown(nc);
    else if (s.type === 'reconnect') markUp(nc);
    const [level, msg] = STATUS_LOG[s.type] ?? ['debug', `nats ${s.type}`];
    log[level](statusFields(s), msg);
  }
}

/**
 * Connects, or throws VantageError(NATS_CONNECT_FAILED) naming the URL and cause.
 * Once connected, the client reconnects forever (by default): a service must
 * outlive a NATS restart rather than exit and rely on a supervisor.
 */
export async function connectNats(cfg: NatsSettings, log: Logger, opts: ConnectNatsOptions = {}): Promise<NatsConnection> {
  // CONFIG_INVALID (naming the setting and file, never its contents) before any socket is opened.
  const security = natsSecurityOptions(cfg);
  const url = redactUrl(cfg.url);
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: natsServersForClient(cfg.url),
      ...(cfg.name === '' ? {} : { name: cfg.name }),
      ...(security.authenticator === undefined ? {} : { authenticator: security.authenticator }),
      ...(security.tls === undefined ? {} : { tls: security.tls }),
      reconnect: true,
      maxReconnectAttempts: cfg.maxReconnectAttempts,
      reconnectTimeWait: cfg.reconnectTimeWaitMs,
      reconnectJitter: cfg.reconnectJitterMs,
      timeout: cfg.connectTimeoutMs,
      // Fail start-up fast and clearly; only an established connection retries forever.
      waitOnFirstConnect: false,
      ...(opts.noEcho === true ? { noEcho: true } : {}),
    });
  } catch (e) {
    // Credentials and TLS failures get their own codes: they are not retryable, and the
    // operator needs to know which setting to look at rather than "cannot connect".
    let why = classifyNatsConnectError(e);
    if (why.code === 'NATS_CONNECT_FAILED' && security.tls !== undefined) {
      // A refused client certificate shows to nats.js only as a timeout (see probeNatsTls).
      const servers = natsServersForClient(cfg.url);
      for (const server of servers) {
        const code = await probeNatsTls(server, security.tls, Math.min(cfg.connectTimeoutMs, 3000));
        if (code !== undefined) {
          why = classifyNatsConnectError(Object.assign(new Error(code), { code }));
          break;
        }
      }
    }
    if (why.code === 'NATS_AUTH_FAILED' && security.summary.auth === 'creds' && cfg.credsFile !== undefined) {
      const expiredAt = await credsExpiredAtMs(cfg.credsFile);
      if (expiredAt !== null) why = { code: 'NATS_AUTH_FAILED', cause: 'credentials_expired', hint: `the user JWT in nats.credsFile expired at ${new Date(expiredAt).toISOString()}` };
    }
    opts.metrics?.countError(why.code);
    throw new VantageError(why.code, redactUrl(`cannot connect to NATS at ${url}: ${errorMessage(e)} (${why.hint})`), {
      cause: e,
      details: { url, cause: why.cause, auth: security.summary.auth, tls: security.summary.tls },
    });
  }
  markUp(nc);
  log.info({ server: nc.getServer(), name: cfg.name, auth: security.summary.auth, tls: security.summary.tls }, 'nats connected');
  watchStatus(nc, log, opts.metrics).catch((e: unknown) => log.error({ err: e }, 'nats status watcher failed'));
  nc.closed()
    .then((err) => {
      if (err) log.error({ err }, 'nats connection closed with error');
    })
    .catch(() => {});
  return nc;
}

// ---- Request-reply ----

interface RequestOptions {
  timeoutMs: number;
  headers?: MsgHdrs;
}

/** The request failures `request` and `Requester` report alike. */
export const noResponders = (subject: string, cause?: unknown): VantageError => new VantageError('NATS_NO_RESPONDERS', `no responders on ${subject}`, { cause, details: { subject } });
export const requestTimeout = (subject: string, timeoutMs: number, cause?: unknown): VantageError =>
  new VantageError('NATS_TIMEOUT', `no reply on ${subject} within ${timeoutMs} ms`, { cause, details: { subject, timeoutMs } });
export const requestFailed = (subject: string, e: unknown): VantageError =>
  new VantageError('NATS_REQUEST_FAILED', `request on ${subject} failed: ${errorMessage(e)}`, { cause: e, details: { subject } });

/**
 * Sends a request and returns the reply. Every failure is a VantageError:
 * NATS_NO_RESPONDERS (nobody subscribed), NATS_TIMEOUT (no reply in time),
 * the replier's own code with `details.remote = true` (error headers), or
 * NATS_REQUEST_FAILED (connection closed, permissions, ...).
 */
export async function request(nc: NatsConnection, subject: string, payload: Payload, opts: RequestOptions): Promise<Msg> {
  let reply: Msg;
  try {
    reply = await nc.request(subject, payload, {
      timeout: opts.timeoutMs,
      ...(opts.headers === undefined ? {} : { headers: opts.headers }),
    });
  } catch (e) {
    const causes = causeChain(e);
    if (causes.some((c) => c instanceof NoRespondersError || (c instanceof RequestError && c.isNoResponders()))) throw noResponders(subject, e);
    if (causes.some((c) => c instanceof TimeoutError)) throw requestTimeout(subject, opts.timeoutMs, e);
    throw requestFailed(subject, e);
  }
  const remote = readErrorHeaders(reply.headers, { subject });
  if (remote !== null) throw remote;
  return reply;
}

// ---- JetStream set-up: idempotent from every replica (create when missing, update when a field
// the caller set differs, else leave alone; unset fields are not compared, so server defaults
// never cause a spurious update).

type StreamSpec = Partial<StreamConfig> & { name: string; subjects: string[] };
type DurableConsumerSpec = Partial<ConsumerConfig> & { durable_name: string };

function differingKeys(want: object, have: object): string[] {
  const h = have as Record<string, unknown>;
  return Object.entries(want)
    .filter(([k, v]) => v !== undefined && JSON.stringify(v) !== JSON.stringify(h[k]))
    .map(([k]) => k);
}

function isApiError(e: unknown, code: number): boolean {
  return e instanceof JetStreamApiError && e.code === code;
}

function jsFailure(what: string, e: unknown, details: Record<string, unknown>): VantageError {
  if (e instanceof VantageError) return e;
  return new VantageError('JETSTREAM_SETUP_FAILED', `${what}: ${errorMessage(e)}`, { cause: e, details });
}

/** Creates the entity when `info` finds none, updates it when a field we set differs, else leaves it alone. */
async function ensure<I extends { config: object }>(
  kind: string,
  want: object,
  notFound: number,
  js: { info(): Promise<I>; add(): Promise<I>; update(): Promise<I> },
  log: Logger,
  fields: Record<string, unknown>,
): Promise<I> {
  let info: I;
  try {
    info = await js.info();
  } catch (e) {
    if (!isApiError(e, notFound)) throw e;
    try {
      info = await js.add();
      log.info(fields, `jetstream ${kind} created`);
      return info;
    } catch (addErr) {
      // Another replica created it between our info and add: fall through to compare.
      info = await js.info().catch(() => {
        throw addErr;
      });
    }
  }
  const changed = differingKeys(want, info.config);
  if (changed.length === 0) return info;
  // Immutable fields (a consumer's deliver_policy, ...) make the server reject this with a clear message: surfaced as JETSTREAM_SETUP_FAILED.
  info = await js.update();
  log.info({ ...fields, changed }, `jetstream ${kind} updated`);
  return info;
}

export async function ensureStream(nc: NatsConnection, spec: StreamSpec, log: Logger): Promise<StreamInfo> {
  try {
    const jsm = await jetstreamManager(nc);
    const js = { info: () => jsm.streams.info(spec.name), add: () => jsm.streams.add(spec), update: () => jsm.streams.update(spec.name, spec) };
    return await ensure('stream', spec, JetStreamApiCodes.StreamNotFound, js, log, { stream: spec.name, subjects: spec.subjects });
  } catch (e) {
    throw jsFailure(`cannot ensure stream ${spec.name}`, e, { stream: spec.name });
  }
}

export async function ensureDurableConsumer(nc: NatsConnection, stream: string, spec: DurableConsumerSpec, log: Logger): Promise<ConsumerInfo> {
  const name = spec.durable_name;
  // Explicit acks from the start of the stream unless told otherwise: a
  // durable consumer that silently skips history would lose records.
  const cfg: ConsumerConfig = {
    ...spec,
    ack_policy: spec.ack_policy ?? AckPolicy.Explicit,
    deliver_policy: spec.deliver_policy ?? DeliverPolicy.All,
    replay_policy: spec.replay_policy ?? ReplayPolicy.Instant,
  };
  try {
    const jsm = await jetstreamManager(nc);
    const js = { info: () => jsm.consumers.info(stream, name), add: () => jsm.consumers.add(stream, cfg), update: () => jsm.consumers.update(stream, name, cfg) };
    return await ensure('durable consumer', cfg, JetStreamApiCodes.ConsumerNotFound, js, log, { stream, consumer: name });
  } catch (e) {
    throw jsFailure(`cannot ensure consumer ${name} on stream ${stream}`, e, { stream, consumer: name });
  }
}
