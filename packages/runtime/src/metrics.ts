// Metrics the runtime itself records. Services register their own beside
// these on the same registry. Label values are bounded: subjects are the
// fixed service subjects (never per-request), outcomes are `ok` or an
// error-catalogue label.

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { errorLabel, type ErrorCode } from './errors';

export interface RuntimeMetrics {
  requests: Counter<'subject' | 'outcome'>;
  requestSeconds: Histogram<'subject'>;
  requestsInFlight: Gauge<'subject'>;
  errors: Counter<'code'>;
  natsStatus: Counter<'type'>;
  /** Counts an error by its catalogue label: `vantage_errors_total{code="overloaded"}`. */
  countError(code: ErrorCode): void;
}

const cache = new WeakMap<Registry, RuntimeMetrics>();

/** Idempotent per registry, so every helper can ask for it without double registration. */
export function runtimeMetrics(registry: Registry): RuntimeMetrics {
  const hit = cache.get(registry);
  if (hit !== undefined) return hit;
  const registers = [registry];
  const errors = new Counter({ name: 'vantage_errors_total', help: 'Errors by catalogue code label', labelNames: ['code'], registers });
  const m: RuntimeMetrics = {
    requests: new Counter({
      name: 'vantage_requests_total',
      help: 'Request-reply requests served, by subject and outcome (ok or error label)',
      labelNames: ['subject', 'outcome'],
      registers,
    }),
    requestSeconds: new Histogram({
      name: 'vantage_request_duration_seconds',
      help: 'Handler time for request-reply requests',
      labelNames: ['subject'],
      // Routing decisions are sub-millisecond to tens of ms; the tail past 1 s is a fault.
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers,
    }),
    requestsInFlight: new Gauge({
      name: 'vantage_requests_in_flight',
      help: 'Request-reply handlers currently running',
      labelNames: ['subject'],
      registers,
    }),
    errors,
    natsStatus: new Counter({ name: 'vantage_nats_status_events_total', help: 'NATS connection status events by type', labelNames: ['type'], registers }),
    countError: (code) => errors.inc({ code: errorLabel(code) }),
  };
  cache.set(registry, m);
  return m;
}
