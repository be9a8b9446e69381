/**
 * The decision service's Prometheus metrics.
 *
 * The ones updated on every route are @vantage/runtime's lazy metrics (plain
 * numbers on the hot path, read by prom-client when scraped). Metrics that only
 * move on failures or reloads stay plain prom-client metrics.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { LazyCounter, LazyGauge, LazyHistogram } from '@vantage/runtime';

export type DecisionMetrics = ReturnType<typeof decisionMetrics>;

// Sub-millisecond buckets: the route's whole budget is a few ms.
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

export function decisionMetrics(registry: Registry) {
  const r = [registry];
  return {
    /** Routes by the rules' reason, the variant in force and the final role. */
    routes: new LazyCounter(registry, 'vantage_decision_routes_total', 'Route decisions by reason, variant and final role', ['reason', 'variant', 'choice']),
    /** Label `outcome`: only `ok` is observed (answered routes, receipt to reply built); rejected requests are in the runtime's request metrics. */
    routeSeconds: new LazyHistogram(registry, 'vantage_decision_route_seconds', 'Route handling time, receipt to reply', ['outcome'], LATENCY_BUCKETS),
    observeSeconds: new LazyHistogram(registry, 'vantage_decision_observe_seconds', 'Indexer observe round trip by pool and outcome', ['pool', 'outcome'], LATENCY_BUCKETS),
    indexerUnavailable: new Counter({ name: 'vantage_decision_indexer_unavailable_total', help: 'Observe queries without a usable answer (timeout, no responders, error)', labelNames: ['pool', 'status'], registers: r }),
    inFlight: new LazyGauge(registry, 'vantage_decision_in_flight', 'Reserved calls of this process not yet past first token, by model', ['model']),
    inFlightExpired: new Counter({ name: 'vantage_decision_in_flight_expired_total', help: 'Reservations released by timeout (no lifecycle event)', labelNames: ['model'], registers: r }),
    bookings: new LazyCounter(registry, 'vantage_decision_bookings_total', 'Booking events published', ['pool']),
    recordsPublished: new LazyCounter(registry, 'vantage_decision_records_published_total', 'Decision records acked by JetStream'),
    recordPublishFailures: new Counter({ name: 'vantage_decision_record_publish_failures_total', help: 'Failed decision-record publish attempts (each is retried)', registers: r }),
    recordsDropped: new Counter({ name: 'vantage_decision_records_dropped_total', help: 'Decision records not published (queue full, encode error), each logged', labelNames: ['cause'], registers: r }),
    recordsQueued: new LazyGauge(registry, 'vantage_decision_records_queued', 'Decision records queued or awaiting ack'),
    parameterSetInfo: new Gauge({ name: 'vantage_decision_parameter_set_info', help: 'Active parameter set (value 1)', labelNames: ['version', 'variant'], registers: r }),
    /** Messages on the lifecycle and workers subscriptions: received = accepted + rejected, per source. */
    received: new Counter({ name: 'vantage_decision_messages_received_total', help: 'Lifecycle and worker-registration messages received, by source', labelNames: ['source'], registers: r }),
    accepted: new Counter({ name: 'vantage_decision_messages_accepted_total', help: 'Messages decoded and applied (received = accepted + rejected)', labelNames: ['source'], registers: r }),
    rejected: new Counter({ name: 'vantage_decision_messages_rejected_total', help: 'Messages refused (undecodable, pool mismatch, endpoint refused, table full), by reason', labelNames: ['source', 'reason'], registers: r }),
    limitHits: new Counter({ name: 'vantage_decision_limit_hits_total', help: 'Entries refused or released early because a table was full, by limit', labelNames: ['limit'], registers: r }),
    parameterReloads: new Counter({ name: 'vantage_decision_parameter_reloads_total', help: 'Parameter-set reload attempts by outcome', labelNames: ['outcome'], registers: r }),
  };
}
