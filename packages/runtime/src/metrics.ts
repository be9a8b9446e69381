// Metrics the runtime itself records. Services register their own beside
// these on the same registry. Label values are bounded: endpoints are the
// fixed endpoint names of a service (never per-request), outcomes are `ok` or
// an error-catalogue label.

import { Counter, type Registry } from 'prom-client';
import { ERROR_CODES, type ErrorCode } from './errors';
import { LazyCounter, LazyGauge, LazyHistogram } from './lazy-metrics';

export interface RuntimeMetrics {
  /** `vantage_requests_total{endpoint,outcome}`: every request a responder answered. */
  requests: LazyCounter;
  /** `vantage_request_duration_seconds{endpoint}`: from receipt to the reply handed to the connection. */
  requestSeconds: LazyHistogram;
  /** `vantage_requests_in_flight{endpoint}`: received and not yet answered. */
  requestsInFlight: LazyGauge;
  /** `vantage_requests_refused_total{endpoint,reason}`: refused before any handler ran (in-flight limit). */
  requestsRefused: LazyCounter;
  natsStatus: Counter<'type'>;
  /** Counts an error by its catalogue label: `vantage_errors_total{code="overloaded"}`. */
  countError(code: ErrorCode): void;
}

/** Registers the runtime's metrics on `registry` (once per registry: prom-client refuses a second registration). */
export function runtimeMetrics(registry: Registry): RuntimeMetrics {
  const registers = [registry];
  const errors = new Counter({ name: 'vantage_errors_total', help: 'Errors by catalogue code label', labelNames: ['code'], registers });
  return {
    requests: new LazyCounter(registry, 'vantage_requests_total', 'Request-reply requests answered, by endpoint and outcome (ok or error label)', ['endpoint', 'outcome']),
    // Routing decisions are sub-millisecond to tens of ms; the tail past 1 s is a fault.
    requestSeconds: new LazyHistogram(registry, 'vantage_request_duration_seconds', 'Request-reply time from receipt to reply', ['endpoint'], [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5]),
    requestsInFlight: new LazyGauge(registry, 'vantage_requests_in_flight', 'Request-reply requests received and not yet answered', ['endpoint']),
    requestsRefused: new LazyCounter(registry, 'vantage_requests_refused_total', 'Request-reply requests refused before any handler ran', ['endpoint', 'reason']),
    natsStatus: new Counter({ name: 'vantage_nats_status_events_total', help: 'NATS connection status events by type', labelNames: ['type'], registers }),
    countError: (code) => errors.inc({ code: ERROR_CODES[code].label }),
  };
}
