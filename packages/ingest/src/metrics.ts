/** A pool's intake metrics (all labelled by pool). */
import { Counter, Gauge, type Registry } from 'prom-client';

/** One metric: its kind, its name after the service's prefix, its help and its label names. */
type MetricSpec = readonly [kind: 'counter' | 'gauge', name: string, help: string, labels: readonly string[]];

/** The metrics a table of specs makes: a counter or gauge per key, with the spec's labels. */
export type MetricSet<S extends Record<string, MetricSpec>> = {
  readonly [K in keyof S]: S[K][0] extends 'counter' ? Counter<S[K][3][number]> : Gauge<S[K][3][number]>;
};

/** Register every metric of `specs` on `registry`, each named `{prefix}_{name}`. */
export function metricSet<const S extends Record<string, MetricSpec>>(registry: Registry, prefix: string, specs: S): MetricSet<S> {
  const out: Record<string, Counter<string> | Gauge<string>> = {};
  for (const [key, [kind, name, help, labelNames]] of Object.entries(specs)) {
    const config = { name: `${prefix}_${name}`, help, labelNames, registers: [registry] };
    out[key] = kind === 'counter' ? new Counter(config) : new Gauge(config);
  }
  return out as MetricSet<S>;
}

const INGEST_METRICS = {
  received: ['counter', 'messages_received_total', 'Messages received, by source subject kind', ['pool', 'source']],
  rejected: ['counter', 'messages_rejected_total', 'Messages that failed to decode or validate, by reason code; never applied', ['pool', 'source', 'reason']],
  dropped: ['counter', 'messages_dropped_total', 'Messages dropped because the writer queue was full', ['pool', 'source']],
  accepted: ['counter', 'messages_accepted_total', 'Messages decoded and queued for the writer (received = accepted + rejected + dropped)', ['pool', 'source']],
  limitHits: ['counter', 'limit_hits_total', 'Messages refused because a limit was reached (nothing applied), by limit', ['pool', 'limit']],
  applied: ['counter', 'events_applied_total', 'Messages applied by the writer, by kind', ['pool', 'kind']],
  duplicates: ['counter', 'kv_duplicates_total', 'KV events ignored as duplicate or older event ids', ['pool']],
  gaps: ['counter', 'kv_gaps_total', 'Event-id gaps detected (each marks a worker suspect)', ['pool']],
  missedEvents: ['counter', 'kv_missed_events_total', 'KV events lost according to event-id gaps', ['pool']],
  unknownParents: ['counter', 'kv_unknown_parent_total', 'Stored events whose parent block was unknown', ['pool']],
  /** Already counted in accepted. */
  kvRefused: ['counter', 'kv_refused_total', "KV events refused whole by the index, as Dynamo's router refuses them (reason self_referencing: a block id repeated within the event or equal to its parent); nothing applied", ['pool', 'reason']],
  queueDepth: ['gauge', 'queue_depth', 'Messages waiting for the writer', ['pool']],
  queueHighWater: ['gauge', 'queue_high_water', 'Largest writer queue depth seen', ['pool']],
  bookings: ['gauge', 'bookings', 'Live bookings', ['pool']],
  leaks: ['counter', 'booking_leaks_total', 'Bookings expired because their lifecycle never ended', ['pool']],
  workers: ['gauge', 'workers', 'Known (worker, dp rank) pairs', ['pool']],
  suspectWorkers: ['gauge', 'suspect_workers', '(worker, dp rank) pairs whose index is suspect', ['pool']],
  indexBlocks: ['gauge', 'index_blocks', '(worker, block) pairs resident in the index', ['pool']],
  indexPositions: ['gauge', 'index_positions', 'Distinct block positions in the index tree (a prefix shared by workers counts once)', ['pool']],
  indexRoom: ['gauge', 'index_room_positions', 'Block positions handed out: the tree plus room stranded by evictions (compaction bounds it)', ['pool']],
  indexBytes: ['gauge', 'index_bytes', 'Bytes of the index tables (typed arrays)', ['pool']],
  indexCompactions: ['counter', 'index_compactions_total', 'Index compactions (the tree rebuilt into tight room)', ['pool']],
  snapshots: ['counter', 'snapshots_total', 'Snapshots written or restored', ['pool', 'outcome']],
  snapshotBytes: ['gauge', 'snapshot_bytes', 'Size of the last snapshot', ['pool']],
  discoveryWorkers: ['gauge', 'discovery_workers', "Workers Dynamo's discovery lists for the pool's endpoint", ['pool']],
  discoveryChanges: ['counter', 'discovery_changes_total', 'Workers added, changed or removed by discovery after its initial listing', ['pool', 'kind']],
} as const;

export type IngestMetrics = MetricSet<typeof INGEST_METRICS>;

/** The ingest metrics, named `{prefix}_…` (`vantage_indexer` in the indexer, `vantage_decision_pool` in the decision service). */
export function ingestMetrics(registry: Registry, prefix: string): IngestMetrics {
  return metricSet(registry, prefix, INGEST_METRICS);
}
