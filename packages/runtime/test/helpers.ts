// Test helpers: a logger whose lines are captured as parsed JSON objects, and a one-endpoint responder.
import { createLogger, type Logger } from '../src/logger';
import type { RuntimeMetrics } from '../src/metrics';
import type { NatsConnection } from '../src/nats';
import { createResponder, type Endpoint, type RequestHandler } from '../src/responder';

export interface CapturedLog {
  log: Logger;
  lines: Record<string, unknown>[];
  messages(): string[];
}

export function captureLogger(level: 'debug' | 'info' = 'debug'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    service: 'test',
    instanceId: 'i-1',
    level,
    destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  });
  return { log, lines, messages: () => lines.map((l) => String(l['msg'])) };
}

/** One endpoint without discovery, named (and labelled in metrics) by its subject. */
export function serveRequests(
  nc: NatsConnection,
  subject: string,
  opts: { queue?: string; log: Logger; metrics?: RuntimeMetrics; maxInFlight?: number },
  handler: RequestHandler,
): Endpoint & { stop(): Promise<void> } {
  const r = createResponder(nc, {
    name: subject,
    log: opts.log,
    discovery: false,
    ...(opts.metrics === undefined ? {} : { metrics: opts.metrics }),
    ...(opts.maxInFlight === undefined ? {} : { maxInFlight: opts.maxInFlight }),
  });
  return Object.assign(r.add(subject, { subject, queue: opts.queue ?? '', handler }), { stop: () => r.stop() });
}
