// NATS glue: connection with reconnect-forever and status logging, a
// request-reply server that maps errors into headers, a request() that turns
// every failure into a typed VantageError, and idempotent JetStream set-up.

import {
  connect,
  Empty,
  headers,
  NoRespondersError,
  RequestError,
  TimeoutError,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Payload,
  type Status,
  type Subscription,
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
import { readErrorHeaders, toVantageError, VantageError, writeErrorHeaders } from './errors';
import type { RuntimeMetrics } from './metrics';
import { redactUrl } from './secrets';
import { classifyNatsConnectError, natsSecurityOptions, natsServersForClient, probeNatsTls, type NatsSecuritySettings } from './security';

export type { Msg, MsgHdrs, NatsConnection } from '@nats-io/transport-node';

export interface NatsSettings extends NatsSecuritySettings {
  /** One URL or a comma-separated list (`nats://` or `tls://`, the latter requiring TLS). */
  url: string;
  /** Connection name; empty leaves the client default. */
  name: string;
  reconnectTimeWaitMs: number;
  reconnectJitterMs: number;
  /** -1 = forever. */
  maxReconnectAttempts: number;
  connectTimeoutMs: number;
}

export interface ConnectNatsOptions {
  metrics?: RuntimeMetrics;
}

// Connection state as seen through status events; nats.js exposes only
// isClosed(), and a connection that is reconnecting is not healthy.
const connected = new WeakMap<NatsConnection, boolean>();

/** True while the connection is up (not closed, not between disconnect and reconnect). */
export function natsConnected(nc: NatsConnection): boolean {
  return !nc.isClosed() && connected.get(nc) === true;
}

function statusFields(s: Status): Record<string, unknown> {
  switch (s.type) {
    case 'disconnect':
    case 'reconnect':
    case 'ldm':
      return { server: s.server };
    case 'error':
      return { err: s.error };
    case 'ping':
      return { pendingPings: s.pendingPings };
    case 'slowConsumer':
      return { subject: s.sub.getSubject(), pending: s.pending };
    case 'update':
      return { added: s.added, deleted: s.deleted };
    default:
      return {};
  }
}

async function watchStatus(nc: NatsConnection, log: Logger, metrics: RuntimeMetrics | undefined): Promise<void> {
  for await (const s of nc.status()) {
    metrics?.natsStatus.inc({ type: s.type });
    const fields = { natsStatus: s.type, ...statusFields(s) };
    switch (s.type) {
      case 'disconnect':
        connected.set(nc, false);
        log.warn(fields, 'nats disconnected');
        break;
      case 'reconnect':
        connected.set(nc, true);
        log.info(fields, 'nats reconnected');
        break;
      case 'ldm':
        // Lame duck mode: the server is about to shut down; the client moves to another server on its own.
        log.warn(fields, 'nats server entering lame duck mode');
        break;
      case 'error':
        log.error(fields, 'nats async error');
        break;
      case 'staleConnection':
      case 'slowConsumer':
        log.warn(fields, `nats ${s.type}`);
        break;
      case 'close':
        connected.set(nc, false);
        log.info(fields, 'nats connection closed');
        break;
      default:
        // reconnecting, ping, update, forceReconnect: frequent during an outage, useful only when debugging.
        log.debug(fields, `nats ${s.type}`);
    }
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
    opts.metrics?.countError(why.code);
    throw new VantageError(why.code, redactUrl(`cannot connect to NATS at ${url}: ${e instanceof Error ? e.message : String(e)} (${why.hint})`), {
      cause: e,
      details: { url, cause: why.cause, auth: security.summary.auth, tls: security.summary.tls },
    });
  }
  connected.set(nc, true);
  log.info({ server: nc.getServer(), name: cfg.name, auth: security.summary.auth, tls: security.summary.tls }, 'nats connected');
  watchStatus(nc, log, opts.metrics).catch((e: unknown) => log.error({ err: e }, 'nats status watcher failed'));
  nc.closed()
    .then((err) => {
      if (err) log.error({ err }, 'nats connection closed with error');
    })
    .catch(() => {});
  return nc;
}

// ---------------------------------------------------------------------------
// Request-reply
// ---------------------------------------------------------------------------

/** Returns the reply body, or throws (preferably a VantageError; anything else becomes INTERNAL). */
export type RequestHandler = (msg: Msg) => Uint8Array | Promise<Uint8Array>;

export interface ServeOptions {
  /** Queue group: replicas sharing it split the requests. */
  queue?: string;
  log: Logger;
  metrics?: RuntimeMetrics;
  /**
   * Bound on concurrently running handlers. Past it, requests are answered
   * OVERLOADED at once (retryable): a fast refusal lets the caller go to
   * another replica instead of queueing behind work it cannot see.
   */
  maxInFlight?: number;
}

export interface RequestServer {
  readonly subject: string;
  readonly inFlight: number;
  /** Stops intake (drains the subscription) and resolves once in-flight handlers have replied. */
  stop(): Promise<void>;
}

function respondSafely(msg: Msg, log: Logger, data: Payload, h?: MsgHdrs): void {
  try {
    msg.respond(data, h === undefined ? undefined : { headers: h });
  } catch (e) {
    // The connection closed under us; the requester will see a timeout.
    log.warn({ err: e, subject: msg.subject }, 'could not send reply');
  }
}

export function serveRequests(nc: NatsConnection, subject: string, opts: ServeOptions, handler: RequestHandler): RequestServer {
  const { log, metrics } = opts;
  const maxInFlight = opts.maxInFlight ?? 1024;
  let inFlight = 0;
  let idle: (() => void) | null = null;

  const replyError = (msg: Msg, err: VantageError): void => respondSafely(msg, log, Empty, errorReplyHeaders(subject, err, metrics));

  const handleOne = async (msg: Msg): Promise<void> => {
    if (inFlight >= maxInFlight) {
      replyError(msg, new VantageError('OVERLOADED', `${subject}: ${inFlight} requests in flight`, { details: { subject } }));
      return;
    }
    inFlight++;
    metrics?.requestsInFlight.inc({ subject });
    const stopTimer = metrics?.requestSeconds.startTimer({ subject });
    try {
      const body = await handler(msg);
      respondSafely(msg, log, body);
      metrics?.requests.inc({ subject, outcome: 'ok' });
    } catch (e) {
      replyError(msg, handlerFailure(e, subject, log));
    } finally {
      stopTimer?.();
      inFlight--;
      metrics?.requestsInFlight.dec({ subject });
      if (inFlight === 0 && idle !== null) idle();
    }
  };

  const sub = subscribeRequests(nc, subject, opts.queue, log, (msg) => void handleOne(msg));

  return {
    subject,
    get inFlight() {
      return inFlight;
    },
    async stop() {
      await drainSubscription(sub, subject, log);
      if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve));
    },
  };
}

/**
 * A request server's error reply (`serveRequests`, or a server replying another way): the error's
 * headers for an empty body; the error is counted in the request metrics by its label and code.
 */
export function errorReplyHeaders(subject: string, err: VantageError, metrics: RuntimeMetrics | undefined): MsgHdrs {
  const h = headers();
  writeErrorHeaders(h, err);
  metrics?.requests.inc({ subject, outcome: err.label });
  metrics?.countError(err.code);
  return h;
}

/** What a request handler threw, as the VantageError to reply with; logged (an error when INTERNAL). */
export function handlerFailure(e: unknown, subject: string, log: Logger): VantageError {
  const err = toVantageError(e);
  if (err.code === 'INTERNAL') log.error({ err: e, subject }, 'request handler failed');
  else log.debug({ err, subject }, 'request rejected');
  return err;
}

/**
 * The subscription under a request server: subscription errors are logged, and
 * messages without a reply subject (a publish, not a request: nobody would read
 * a reply) are ignored; every request goes to `onRequest`.
 */
export function subscribeRequests(nc: NatsConnection, subject: string, queue: string | undefined, log: Logger, onRequest: (msg: Msg) => void): Subscription {
  return nc.subscribe(subject, {
    ...(queue === undefined ? {} : { queue }),
    callback: (err, msg) => {
      if (err !== null) {
        log.error({ err, subject }, 'subscription error');
        return;
      }
      if (msg.reply === undefined || msg.reply === '') {
        log.debug({ subject }, 'message without reply subject ignored');
        return;
      }
      onRequest(msg);
    },
  });
}

/** Drains a request server's subscription (no new requests; those already received are delivered). */
export async function drainSubscription(sub: Subscription, subject: string, log: Logger): Promise<void> {
  if (sub.isClosed()) return;
  try {
    await sub.drain();
  } catch (e) {
    log.warn({ err: e, subject }, 'subscription drain failed');
  }
}

export interface RequestOptions {
  timeoutMs: number;
  headers?: MsgHdrs;
}

function causes(e: unknown): unknown[] {
  const out: unknown[] = [];
  for (let c: unknown = e; c !== undefined && c !== null && out.length < 8; c = (c as { cause?: unknown }).cause) out.push(c);
  return out;
}

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
    const chain = causes(e);
    if (chain.some((c) => c instanceof NoRespondersError || (c instanceof RequestError && c.isNoResponders()))) {
      throw new VantageError('NATS_NO_RESPONDERS', `no responders on ${subject}`, { cause: e, details: { subject } });
    }
    if (chain.some((c) => c instanceof TimeoutError)) {
      throw new VantageError('NATS_TIMEOUT', `no reply on ${subject} within ${opts.timeoutMs} ms`, {
        cause: e,
        details: { subject, timeoutMs: opts.timeoutMs },
      });
    }
    throw new VantageError('NATS_REQUEST_FAILED', `request on ${subject} failed: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
      details: { subject },
    });
  }
  const remote = readErrorHeaders(reply.headers, { subject });
  if (remote !== null) throw remote;
  return reply;
}

// ---------------------------------------------------------------------------
// JetStream set-up. Both helpers are idempotent and safe to run from every
// replica at start-up: create when missing, update when the fields we set
// differ, leave alone otherwise. Fields the caller does not set are not
// compared, so server-side defaults never cause a spurious update.
// ---------------------------------------------------------------------------

export type StreamSpec = Partial<StreamConfig> & { name: string; subjects: string[] };
export type DurableConsumerSpec = Partial<ConsumerConfig> & { durable_name: string };

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
  return new VantageError('JETSTREAM_SETUP_FAILED', `${what}: ${e instanceof Error ? e.message : String(e)}`, { cause: e, details });
}

export async function ensureStream(nc: NatsConnection, spec: StreamSpec, log: Logger): Promise<StreamInfo> {
  try {
    const jsm = await jetstreamManager(nc);
    let info: StreamInfo;
    try {
      info = await jsm.streams.info(spec.name);
    } catch (e) {
      if (!isApiError(e, JetStreamApiCodes.StreamNotFound)) throw e;
      try {
        info = await jsm.streams.add(spec);
        log.info({ stream: spec.name, subjects: spec.subjects }, 'jetstream stream created');
        return info;
      } catch (addErr) {
        // Another replica created it between our info and add: fall through to compare.
        info = await jsm.streams.info(spec.name).catch(() => {
          throw addErr;
        });
      }
    }
    const changed = differingKeys(spec, info.config);
    if (changed.length === 0) return info;
    info = await jsm.streams.update(spec.name, spec);
    log.info({ stream: spec.name, changed }, 'jetstream stream updated');
    return info;
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
    let info: ConsumerInfo;
    try {
      info = await jsm.consumers.info(stream, name);
    } catch (e) {
      if (!isApiError(e, JetStreamApiCodes.ConsumerNotFound)) throw e;
      info = await jsm.consumers.add(stream, cfg);
      log.info({ stream, consumer: name }, 'jetstream durable consumer created');
      return info;
    }
    const changed = differingKeys(cfg, info.config);
    if (changed.length === 0) return info;
    // Immutable fields (deliver_policy, ...) make the server reject this with a clear message: surfaced as JETSTREAM_SETUP_FAILED.
    info = await jsm.consumers.update(stream, name, cfg);
    log.info({ stream, consumer: name, changed }, 'jetstream durable consumer updated');
    return info;
  } catch (e) {
    throw jsFailure(`cannot ensure consumer ${name} on stream ${stream}`, e, { stream, consumer: name });
  }
}
