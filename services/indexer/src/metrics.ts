/** The indexer's Prometheus metrics (all labelled by pool). */
import { Counter, Gauge, type Registry } from 'prom-client';
import { LazyHistogram } from '@vantage/runtime';

export interface IndexerMetrics {
  readonly received: Counter<'pool' | 'source'>;
  readonly rejected: Counter<'pool' | 'source' | 'reason'>;
  readonly dropped: Counter<'pool' | 'source'>;
  /** Messages decoded and queued for the writer: received = accepted + rejected + dropped, per source. */
  readonly accepted: Counter<'pool' | 'source'>;
  /** Messages refused by a limit (indexer.limits), one series per limit. */
  readonly limitHits: Counter<'pool' | 'limit'>;
  readonly applied: Counter<'pool' | 'kind'>;
  readonly duplicates: Counter<'pool'>;
  readonly gaps: Counter<'pool'>;
  readonly missedEvents: Counter<'pool'>;
  readonly unknownParents: Counter<'pool'>;
  readonly queueDepth: Gauge<'pool'>;
  readonly queueHighWater: Gauge<'pool'>;
  readonly bookings: Gauge<'pool'>;
  readonly leaks: Counter<'pool'>;
  readonly workers: Gauge<'pool'>;
  readonly suspectWorkers: Gauge<'pool'>;
  readonly indexBlocks: Gauge<'pool'>;
  readonly indexPositions: Gauge<'pool'>;
  readonly indexRoom: Gauge<'pool'>;
  readonly indexBytes: Gauge<'pool'>;
  readonly indexCompactions: Counter<'pool'>;
  /** Labelled pool, outcome; the hot path keeps its series (`series(pool, 'ok')`). */
  readonly observeSeconds: LazyHistogram;
  readonly snapshots: Counter<'pool' | 'outcome'>;
  readonly snapshotBytes: Gauge<'pool'>;
  readonly discoveryWorkers: Gauge<'pool'>;
  readonly discoveryChanges: Counter<'pool' | 'kind'>;
}

export function indexerMetrics(registry: Registry): IndexerMetrics {
  const reg = { registers: [registry] };
  return {
    received: new Counter({ name: 'vantage_indexer_messages_received_total', help: 'Messages received, by source subject kind', labelNames: ['pool', 'source'], ...reg }),
    rejected: new Counter({
      name: 'vantage_indexer_messages_rejected_total',
      help: 'Messages that failed to decode or validate, by reason code; never applied',
      labelNames: ['pool', 'source', 'reason'],
      ...reg,
    }),
    dropped: new Counter({ name: 'vantage_indexer_messages_dropped_total', help: 'Messages dropped because the writer queue was full', labelNames: ['pool', 'source'], ...reg }),
    accepted: new Counter({ name: 'vantage_indexer_messages_accepted_total', help: 'Messages decoded and queued for the writer (received = accepted + rejected + dropped)', labelNames: ['pool', 'source'], ...reg }),
    limitHits: new Counter({ name: 'vantage_indexer_limit_hits_total', help: 'Messages refused because a limit was reached (nothing applied), by limit', labelNames: ['pool', 'limit'], ...reg }),
    applied: new Counter({ name: 'vantage_indexer_events_applied_total', help: 'Messages applied by the writer, by kind', labelNames: ['pool', 'kind'], ...reg }),
    duplicates: new Counter({ name: 'vantage_indexer_kv_duplicates_total', help: 'KV events ignored as duplicate or older event ids', labelNames: ['pool'], ...reg }),
    gaps: new Counter({ name: 'vantage_indexer_kv_gaps_total', help: 'Event-id gaps detected (each marks a worker suspect)', labelNames: ['pool'], ...reg }),
    missedEvents: new Counter({ name: 'vantage_indexer_kv_missed_events_total', help: 'KV events lost according to event-id gaps', labelNames: ['pool'], ...reg }),
    unknownParents: new Counter({ name: 'vantage_indexer_kv_unknown_parent_total', help: 'Stored events whose parent block was unknown', labelNames: ['pool'], ...reg }),
    queueDepth: new Gauge({ name: 'vantage_indexer_queue_depth', help: 'Messages waiting for the writer', labelNames: ['pool'], ...reg }),
    queueHighWater: new Gauge({ name: 'vantage_indexer_queue_high_water', help: 'Largest writer queue depth seen', labelNames: ['pool'], ...reg }),
    bookings: new Gauge({ name: 'vantage_indexer_bookings', help: 'Live bookings', labelNames: ['pool'], ...reg }),
    leaks: new Counter({ name: 'vantage_indexer_booking_leaks_total', help: 'Bookings expired because their lifecycle never ended', labelNames: ['pool'], ...reg }),
    workers: new Gauge({ name: 'vantage_indexer_workers', help: 'Known (worker, dp rank) pairs', labelNames: ['pool'], ...reg }),
    suspectWorkers: new Gauge({ name: 'vantage_indexer_suspect_workers', help: '(worker, dp rank) pairs whose index is suspect', labelNames: ['pool'], ...reg }),
    indexBlocks: new Gauge({ name: 'vantage_indexer_index_blocks', help: '(worker, block) pairs resident in the index', labelNames: ['pool'], ...reg }),
    indexPositions: new Gauge({ name: 'vantage_indexer_index_positions', help: 'Distinct block positions in the index tree (a prefix shared by workers counts once)', labelNames: ['pool'], ...reg }),
    indexRoom: new Gauge({ name: 'vantage_indexer_index_room_positions', help: 'Block positions handed out: the tree plus room stranded by evictions (compaction bounds it)', labelNames: ['pool'], ...reg }),
    indexBytes: new Gauge({ name: 'vantage_indexer_index_bytes', help: 'Bytes of the index tables (typed arrays)', labelNames: ['pool'], ...reg }),
    indexCompactions: new Counter({ name: 'vantage_indexer_index_compactions_total', help: 'Index compactions (the tree rebuilt into tight room)', labelNames: ['pool'], ...reg }),
    observeSeconds: new LazyHistogram(
      registry,
      'vantage_indexer_observe_seconds',
      'observe handling time inside the service',
      ['pool', 'outcome'],
      [0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05],
    ),
    snapshots: new Counter({ name: 'vantage_indexer_snapshots_total', help: 'Snapshots written or restored', labelNames: ['pool', 'outcome'], ...reg }),
    snapshotBytes: new Gauge({ name: 'vantage_indexer_snapshot_bytes', help: 'Size of the last snapshot', labelNames: ['pool'], ...reg }),
    discoveryWorkers: new Gauge({ name: 'vantage_indexer_discovery_workers', help: "Workers Dynamo's discovery lists for the pool's endpoint", labelNames: ['pool'], ...reg }),
    discoveryChanges: new Counter({
      name: 'vantage_indexer_discovery_changes_total',
      help: 'Workers added, changed or removed by discovery after its initial listing',
      labelNames: ['pool', 'kind'],
      ...reg,
    }),
  };
}
