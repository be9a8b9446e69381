// The request-reply server every vantage service uses: one Responder per service, one endpoint
// per subject (README.md, "Request-reply server": errors, in-flight limit, coalescing, discovery,
// stop). Requests are not run inside the subscription callback: those of one socket read are
// queued and run in a microtask right after it, so a burst is visible as a burst even to
// synchronous handlers.

import { Empty, headers, nuid, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { ServiceResponseType, type EndpointInfo, type NamedEndpointStats, type ServiceIdentity, type ServiceInfo, type ServiceStats } from '@nats-io/services';
import type { Logger } from 'pino';
import { toVantageError, VantageError, writeErrorHeaders } from './errors';
import type { HistogramSeries, Series } from './lazy-metrics';
import type { RuntimeMetrics } from './metrics';
import type { Outbox } from './outbox';
import type { Shutdown } from './shutdown';

/** Returns the reply body, or throws (preferably a VantageError; anything else becomes INTERNAL). */
export type RequestHandler = (msg: Msg) => Uint8Array | Promise<Uint8Array>;

interface ResponderOptions {
  /** Service name: `$SRV` discovery and the default queue group. With discovery: letters, digits, `-` and `_`. */
  name: string;
  /** Semantic version for discovery. Default `0.0.0`. */
  version?: string;
  description?: string;
  metadata?: Record<string, string>;
  log: Logger;
  metrics?: RuntimeMetrics;
  /** Requests in flight at once, over all endpoints; past it, OVERLOADED. Default 1024. */
  maxInFlight?: number;
  /** Answer `$SRV` PING/INFO/STATS. Default true. */
  discovery?: boolean;
  /** Coalescing: replies leave through this outbox, one write per event-loop turn. Default: none. */
  outbox?: Outbox;
}

export interface EndpointOptions {
  subject: string;
  /** Queue group; default the responder's name; `''` subscribes without one. */
  queue?: string;
  metadata?: Record<string, string>;
  handler: RequestHandler;
  /** For protocols whose failures travel in the body: the body to reply with instead of error headers. */
  errorBody?: (err: VantageError, msg: Msg) => Uint8Array;
  /** Called right after a successful reply was handed to the connection or the outbox (step timings). */
  onReplied?: (msg: Msg, reply: Uint8Array) => void;
}

export interface Endpoint {
  readonly name: string;
  readonly subject: string;
  readonly inFlight: number;
}

export interface Responder {
  readonly id: string;
  readonly name: string;
  /** Requests received and not yet answered, over all endpoints. */
  readonly inFlight: number;
  /** Serve one endpoint. `name` labels its metrics and names it in discovery. */
  add(name: string, opts: EndpointOptions): Endpoint;
  /** Stops taking requests: every endpoint's subscription is drained (requests already sent to us are still answered). */
  stopIntake(): Promise<void>;
  /** stopIntake, drained, then stop answering discovery. */
  stop(): Promise<void>;
  /** Registers intake, drain and close steps with a shutdown sequence. */
  registerShutdown(shutdown: Shutdown): void;
}

const NAME = /^[-\w]+$/;

interface EndpointState extends Endpoint {
  inFlight: number;
  /** As given to `add` (handler, errorBody, onReplied). */
  readonly opts: EndpointOptions;
  readonly queue: string;
  readonly metadata: Record<string, string>;
  sub: Subscription | null;
  // $SRV STATS
  requests: number;
  errors: number;
  lastError: string;
  processingNs: number;
  // metric series, kept to skip the label lookup
  readonly ok: Series | undefined;
  readonly refused: Series | undefined;
  readonly seconds: HistogramSeries | undefined;
  readonly gauge: Series | undefined;
}

function isPromise(v: unknown): v is Promise<Uint8Array> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

export function createResponder(nc: NatsConnection, opts: ResponderOptions): Responder {
  const { log, metrics, outbox } = opts;
  const withDiscovery = opts.discovery ?? true;
  // Discovery puts names in subjects ($SRV.PING.name): plain tokens only.
  if (withDiscovery && !NAME.test(opts.name)) throw new VantageError('CONFIG_INVALID', `responder name ${JSON.stringify(opts.name)}: letters, digits, '-' and '_' only`);
  const maxInFlight = opts.maxInFlight ?? 1024;
  const version = opts.version ?? '0.0.0';
  const metadata = Object.freeze({ ...(opts.metadata ?? {}) });
  const id = nuid.next();
  const started = new Date().toISOString();
  const endpoints: EndpointState[] = [];
  let inFlight = 0;
  let idle: (() => void)[] = [];
  let intakeStopped: Promise<void> | null = null;
  let stopped: Promise<void> | null = null;

  // Requests of the current read, run in a microtask after it (see the header).
  let queuedEp: EndpointState[] = [];
  let queuedMsg: Msg[] = [];
  let queuedAt: number[] = [];
  let scheduled = false;

  const unsent = (e: unknown): void => log.warn({ err: e }, 'could not send reply');
  const send = (msg: Msg, body: Uint8Array, h: MsgHdrs | undefined): void => {
    if (outbox !== undefined) {
      outbox.publish(msg.reply!, body, undefined, h, unsent);
      return;
    }
    try {
      msg.respond(body, h === undefined ? undefined : { headers: h });
    } catch (e) {
      // The connection closed under us; the requester will see a timeout.
      unsent(e);
    }
  };

  const finish = (ep: EndpointState, at: number): void => {
    const s = (performance.now() - at) / 1000;
    ep.processingNs += Math.round(s * 1e9);
    ep.requests++;
    ep.seconds?.observe(s);
    ep.inFlight--;
    inFlight--;
    if (ep.gauge !== undefined) ep.gauge.n = ep.inFlight;
    if (inFlight === 0 && idle.length > 0) {
      const waiting = idle;
      idle = [];
      for (const f of waiting) f();
    }
  };

  const replyError = (ep: EndpointState, msg: Msg, err: VantageError): void => {
    ep.errors++;
    ep.lastError = `${err.code}: ${err.message}`;
    if (metrics !== undefined) {
      metrics.requests.inc(ep.name, err.label);
      metrics.countError(err.code);
    }
    if (ep.opts.errorBody !== undefined) {
      let body: Uint8Array;
      try {
        body = ep.opts.errorBody(err, msg);
      } catch (e) {
        log.error({ err: e, endpoint: ep.name }, 'error body could not be encoded');
        return;
      }
      send(msg, body, undefined);
      return;
    }
    const h = headers();
    writeErrorHeaders(h, err);
    send(msg, Empty, h);
  };

  const failed = (ep: EndpointState, msg: Msg, at: number, e: unknown): void => {
    const err = toVantageError(e);
    if (err.code === 'INTERNAL') log.error({ err: e, endpoint: ep.name, subject: msg.subject }, 'request handler failed');
    else log.debug({ err, endpoint: ep.name }, 'request rejected');
    replyError(ep, msg, err);
    finish(ep, at);
  };

  const answered = (ep: EndpointState, msg: Msg, at: number, body: Uint8Array): void => {
    send(msg, body, undefined);
    if (ep.ok !== undefined) ep.ok.n++;
    finish(ep, at);
    if (ep.opts.onReplied !== undefined) {
      try {
        ep.opts.onReplied(msg, body);
      } catch (e) {
        log.warn({ err: e, endpoint: ep.name }, 'onReplied failed');
      }
    }
  };

  const runOne = (ep: EndpointState, msg: Msg, at: number): void => {
    let r: Uint8Array | Promise<Uint8Array>;
    try {
      r = ep.opts.handler(msg);
    } catch (e) {
      failed(ep, msg, at, e);
      return;
    }
    if (isPromise(r)) {
      r.then(
        (body) => answered(ep, msg, at, body),
        (e: unknown) => failed(ep, msg, at, e),
      );
    } else answered(ep, msg, at, r);
  };

  const runQueued = (): void => {
    scheduled = false;
    const eps = queuedEp;
    const msgs = queuedMsg;
    const ats = queuedAt;
    queuedEp = [];
    queuedMsg = [];
    queuedAt = [];
    for (let i = 0; i < eps.length; i++) runOne(eps[i]!, msgs[i]!, ats[i]!);
  };

  const receive = (ep: EndpointState, msg: Msg): void => {
    if (msg.reply === undefined || msg.reply === '') {
      log.debug({ endpoint: ep.name, subject: msg.subject }, 'message without reply subject ignored');
      return;
    }
    const at = performance.now();
    if (inFlight >= maxInFlight) {
      if (ep.refused !== undefined) ep.refused.n++;
      ep.requests++;
      replyError(ep, msg, new VantageError('OVERLOADED', `${ep.name}: ${inFlight} requests in flight`, { details: { endpoint: ep.name } }));
      return;
    }
    inFlight++;
    ep.inFlight++;
    if (ep.gauge !== undefined) ep.gauge.n = ep.inFlight;
    queuedEp.push(ep);
    queuedMsg.push(msg);
    queuedAt.push(at);
    if (!scheduled) {
      scheduled = true;
      queueMicrotask(runQueued);
    }
  };

  const subscribe = (subject: string, queue: string, cb: (msg: Msg) => void, what: string): Subscription =>
    nc.subscribe(subject, {
      ...(queue === '' ? {} : { queue }),
      callback: (err, msg) => {
        if (err !== null) {
          log.error({ err, subject, what }, 'subscription error');
          return;
        }
        cb(msg);
      },
    });

  const drainSub = async (sub: Subscription | null): Promise<void> => {
    if (sub === null || sub.isClosed()) return;
    try {
      await sub.drain();
    } catch (e) {
      log.warn({ err: e, subject: sub.getSubject() }, 'subscription drain failed');
    }
  };

  const identity = { name: opts.name, id, version, metadata };
  const ping = (): ServiceIdentity => ({ type: ServiceResponseType.PING, ...identity });
  const info = (): ServiceInfo => ({
    type: ServiceResponseType.INFO,
    ...identity,
    description: opts.description ?? '',
    endpoints: endpoints.map((e): EndpointInfo => ({ name: e.name, subject: e.subject, queue_group: e.queue, metadata: e.metadata })),
  });
  const stats = (): ServiceStats => ({
    type: ServiceResponseType.STATS,
    ...identity,
    started,
    endpoints: endpoints.map(
      (e): NamedEndpointStats => ({
        name: e.name,
        subject: e.subject,
        queue_group: e.queue,
        num_requests: e.requests,
        num_errors: e.errors,
        last_error: e.lastError,
        processing_time: e.processingNs,
        average_processing_time: e.requests === 0 ? 0 : Math.round(e.processingNs / e.requests),
      }),
    ),
  });

  const discovery: Subscription[] = [];
  if (withDiscovery) {
    const te = new TextEncoder();
    const verbs: [string, () => unknown][] = [
      ['PING', ping],
      ['INFO', info],
      ['STATS', stats],
    ];
    for (const [verb, answer] of verbs) {
      // Every instance answers discovery: no queue group.
      for (const subject of [`$SRV.${verb}`, `$SRV.${verb}.${opts.name}`, `$SRV.${verb}.${opts.name}.${id}`]) {
        discovery.push(
          subscribe(subject, '', (msg) => {
            if (msg.reply === undefined || msg.reply === '') return;
            try {
              msg.respond(te.encode(JSON.stringify(answer())));
            } catch (e) {
              unsent(e);
            }
          }, 'discovery'),
        );
      }
    }
  }

  const stopIntake = (): Promise<void> => {
    intakeStopped ??= Promise.all(endpoints.map((e) => drainSub(e.sub))).then(() => undefined);
    return intakeStopped;
  };
  /** Resolves once nothing is in flight and the outbox (if any) has handed its replies to the connection. */
  const drained = async (): Promise<void> => {
    // A request delivered by the drain itself is queued in a microtask: let it start first.
    await Promise.resolve();
    if (inFlight > 0) await new Promise<void>((resolve) => idle.push(resolve));
    outbox?.flushNow();
  };
  const closeDiscovery = async (): Promise<void> => {
    await Promise.all(discovery.map((s) => drainSub(s)));
  };

  return {
    id,
    name: opts.name,
    get inFlight() {
      return inFlight;
    },
    add(name, e) {
      if (withDiscovery && !NAME.test(name)) throw new VantageError('CONFIG_INVALID', `endpoint name ${JSON.stringify(name)}: letters, digits, '-' and '_' only`);
      if (endpoints.some((x) => x.name === name)) throw new VantageError('CONFIG_INVALID', `endpoint ${name} is added twice`);
      if (intakeStopped !== null) throw new VantageError('SHUTTING_DOWN', `endpoint ${name}: the responder is stopping`);
      const ep: EndpointState = {
        name,
        subject: e.subject,
        queue: e.queue ?? opts.name,
        metadata: Object.freeze({ ...(e.metadata ?? {}) }),
        opts: e,
        sub: null,
        inFlight: 0,
        requests: 0,
        errors: 0,
        lastError: '',
        processingNs: 0,
        ok: metrics?.requests.series(name, 'ok'),
        refused: metrics?.requestsRefused.series(name, 'overloaded'),
        seconds: metrics?.requestSeconds.series(name),
        gauge: metrics?.requestsInFlight.series(name),
      };
      ep.sub = subscribe(e.subject, ep.queue, (msg) => receive(ep, msg), name);
      endpoints.push(ep);
      return ep;
    },
    stopIntake,
    async stop() {
      stopped ??= (async () => {
        await stopIntake();
        await drained();
        await closeDiscovery();
      })();
      return stopped;
    },
    registerShutdown(shutdown) {
      shutdown.register(`stop ${opts.name} endpoints`, 'intake', stopIntake);
      shutdown.register(`finish ${opts.name} requests in flight`, 'drain', drained);
      shutdown.register(`stop ${opts.name} discovery`, 'close', closeDiscovery);
    },
  };
}
