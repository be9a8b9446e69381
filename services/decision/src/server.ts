/**
 * The `route` endpoint's request server: the runtime's `serveRequests`
 * contract (queue group, OVERLOADED past `maxInFlight`, errors as headers with
 * the runtime's codes, the runtime's request metrics, `stop` drains and waits
 * for handlers in flight), with the reply sent through the service's Outbox so
 * that it shares its socket write with everything else sent in the same turn
 * of the event loop (the booking before it, other routes' replies and observe
 * queries).
 *
 * The request metrics are the runtime's (`vantage_requests_total`,
 * `vantage_request_duration_seconds`, `vantage_requests_in_flight`): the
 * duration is observed per request; the counts of answered requests and the
 * in-flight gauge are brought up to date once per write instead of per
 * request (the values are exact after each write).
 */
import { Empty, type Msg } from '@nats-io/transport-node';
import {
  drainSubscription,
  errorReplyHeaders,
  handlerFailure,
  subscribeRequests,
  VantageError,
  type Logger,
  type NatsConnection,
  type RequestServer,
  type RuntimeMetrics,
} from '@vantage/runtime';
import type { Outbox } from './outbox';

export interface RouteServerOptions {
  readonly queue: string;
  readonly log: Logger;
  readonly metrics: RuntimeMetrics | undefined;
  readonly maxInFlight: number;
  readonly outbox: Outbox;
}

const hrSeconds = (): number => performance.now() / 1000;

export function serveRoutes(nc: NatsConnection, subject: string, o: RouteServerOptions, handler: (data: Uint8Array) => Promise<Uint8Array>): RequestServer {
  const { log, metrics, outbox } = o;
  let inFlight = 0;
  let idle: (() => void) | null = null;
  // Answered since the last write, and the in-flight count last reported.
  let okSinceFlush = 0;
  let reportedInFlight = -1;
  const seconds = metrics?.requestSeconds.labels({ subject });
  const reportCounts = (): void => {
    if (metrics === undefined) return;
    if (okSinceFlush > 0) metrics.requests.inc({ subject, outcome: 'ok' }, okSinceFlush);
    okSinceFlush = 0;
    if (inFlight !== reportedInFlight) metrics.requestsInFlight.set({ subject }, (reportedInFlight = inFlight));
  };
  outbox.beforeFlush(reportCounts);

  // The connection closed under us: the requester will see a timeout.
  const unsent = (e: unknown): void => log.warn({ err: e, subject }, 'could not send reply');
  const replyError = (msg: Msg, err: VantageError): void => outbox.publish(msg.reply!, Empty, undefined, errorReplyHeaders(subject, err, metrics), unsent);

  const handleOne = async (msg: Msg): Promise<void> => {
    if (inFlight >= o.maxInFlight) {
      replyError(msg, new VantageError('OVERLOADED', `${subject}: ${inFlight} requests in flight`, { details: { subject } }));
      return;
    }
    inFlight++;
    const t0 = hrSeconds();
    try {
      const body = await handler(msg.data);
      outbox.publish(msg.reply!, body, undefined, undefined, unsent);
      okSinceFlush++;
    } catch (e) {
      replyError(msg, handlerFailure(e, subject, log));
    } finally {
      seconds?.observe(hrSeconds() - t0);
      inFlight--;
      if (inFlight === 0 && idle !== null) idle();
    }
  };

  const sub = subscribeRequests(nc, subject, o.queue, log, (msg) => void handleOne(msg));

  return {
    subject,
    get inFlight() {
      return inFlight;
    },
    async stop() {
      await drainSubscription(sub, subject, log);
      if (inFlight > 0) await new Promise<void>((resolve) => (idle = resolve));
      outbox.flushNow();
      reportCounts(); // flushNow runs the hook only when something was queued
    },
  };
}
