/** The decision service's Prometheus metrics. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface DecisionMetrics {
  /** Routes by the rules' reason, the variant in force and the final role. */
  readonly routes: Counter<'reason' | 'variant' | 'choice'>;
  readonly routeSeconds: Histogram<'outcome'>;
  readonly observeSeconds: Histogram<'pool' | 'outcome'>;
  readonly indexerUnavailable: Counter<'pool' | 'status'>;
  readonly inFlight: Gauge<'model'>;
  readonly inFlightExpired: Counter<'model'>;
  readonly bookings: Counter<'pool'>;
  readonly recordsPublished: Counter;
  readonly recordPublishFailures: Counter;
  readonly recordsDropped: Counter<'cause'>;
  readonly recordsQueued: Gauge;
  readonly parameterSetInfo: Gauge<'version' | 'variant'>;
  readonly parameterReloads: Counter<'outcome'>;
}

// Sub-millisecond buckets: the route's whole budget is a few ms.
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

export function decisionMetrics(registry: Registry): DecisionMetrics {
  const r = [registry];
  return {
    routes: new Counter({ name: 'vantage_decision_routes_total', help: 'Route decisions by reason, variant and final role', labelNames: ['reason', 'variant', 'choice'], registers: r }),
    routeSeconds: new Histogram({ name: 'vantage_decision_route_seconds', help: 'Route handling time, receipt to reply', labelNames: ['outcome'], buckets: LATENCY_BUCKETS, registers: r }),
    observeSeconds: new Histogram({ name: 'vantage_decision_observe_seconds', help: 'Indexer observe round trip by pool and outcome', labelNames: ['pool', 'outcome'], buckets: LATENCY_BUCKETS, registers: r }),
    indexerUnavailable: new Counter({ name: 'vantage_decision_indexer_unavailable_total', help: 'Observe queries without a usable answer (timeout, no responders, error)', labelNames: ['pool', 'status'], registers: r }),
    inFlight: new Gauge({ name: 'vantage_decision_in_flight', help: 'Reserved calls of this process not yet past first token, by model', labelNames: ['model'], registers: r }),
    inFlightExpired: new Counter({ name: 'vantage_decision_in_flight_expired_total', help: 'Reservations released by timeout (no lifecycle event)', labelNames: ['model'], registers: r }),
    bookings: new Counter({ name: 'vantage_decision_bookings_total', help: 'Booking events published', labelNames: ['pool'], registers: r }),
    recordsPublished: new Counter({ name: 'vantage_decision_records_published_total', help: 'Decision records acked by JetStream', registers: r }),
    recordPublishFailures: new Counter({ name: 'vantage_decision_record_publish_failures_total', help: 'Failed decision-record publish attempts (each is retried)', registers: r }),
    recordsDropped: new Counter({ name: 'vantage_decision_records_dropped_total', help: 'Decision records not published (queue full, encode error), each logged', labelNames: ['cause'], registers: r }),
    recordsQueued: new Gauge({ name: 'vantage_decision_records_queued', help: 'Decision records queued or awaiting ack', registers: r }),
    parameterSetInfo: new Gauge({ name: 'vantage_decision_parameter_set_info', help: 'Active parameter set (value 1)', labelNames: ['version', 'variant'], registers: r }),
    parameterReloads: new Counter({ name: 'vantage_decision_parameter_reloads_total', help: 'Parameter-set reload attempts by outcome', labelNames: ['outcome'], registers: r }),
  };
}
