/** A pool's intake metrics (all labelled by pool). */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface IngestMetrics {
  readonly received: Counter<'pool' | 'source'>;
  readonly rejected: Counter<'pool' | 'source' | 'reason'>;
  readonly dropped: Counter<'pool' | 'source'>;
  /** Messages decoded and queued for the writer: received = accepted + rejected + dropped, per source. */
  readonly accepted: Counter<'pool' | 'source'>;
  /** Messages refused by a limit (the limits), one series per limit. */
  readonly limitHits: Counter<'pool' | 'limit'>;
  readonly applied: Counter<'pool' | 'kind'>;
  readonly duplicates: Counter<'pool'>;
  readonly gaps: Counter<'pool'>;
  readonly missedEvents: Counter<'pool'>;
  readonly unknownParents: Counter<'pool'>;
  /** KV events accepted from the wire but refused whole by the index (e.g. `self_referencing`); already counted in accepted. */
  readonly kvRefused: Counter<'pool' | 'reason'>;
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
  readonly snapshots: Counter<'pool' | 'outcome'>;
  readonly snapshotBytes: Gauge<'pool'>;
  readonly discoveryWorkers: Gauge<'pool'>;
  readonly discoveryChanges: Counter<'pool' | 'kind'>;
}


/** The ingest metrics, named `{prefix}_…` (`vantage_indexer` in the indexer, `vantage_decision_pool` in the decision service). */
export function ingestMetrics(registry: Registry, prefix: string): IngestMetrics {
  const reg = { registers: [registry] };
  return {
    received: new Counter({ name: `${prefix}_messages_received_total`, help: 'Messages received, by source subject kind', labelNames: ['pool', 'source'], ...reg }),
    rejected: new Counter({
      name: `${prefix}_messages_rejected_total`,
      help: 'Messages that failed to decode or validate, by reason code; never applied',
      labelNames: ['pool', 'source', 'reason'],
      ...reg,
    }),
    dropped: new Counter({ name: `${prefix}_messages_dropped_total`, help: 'Messages dropped because the writer queue was full', labelNames: ['pool', 'source'], ...reg }),
    accepted: new Counter({ name: `${prefix}_messages_accepted_total`, help: 'Messages decoded and queued for the writer (received = accepted + rejected + dropped)', labelNames: ['pool', 'source'], ...reg }),
    limitHits: new Counter({ name: `${prefix}_limit_hits_total`, help: 'Messages refused because a limit was reached (nothing applied), by limit', labelNames: ['pool', 'limit'], ...reg }),
    applied: new Counter({ name: `${prefix}_events_applied_total`, help: 'Messages applied by the writer, by kind', labelNames: ['pool', 'kind'], ...reg }),
    duplicates: new Counter({ name: `${prefix}_kv_duplicates_total`, help: 'KV events ignored as duplicate or older event ids', labelNames: ['pool'], ...reg }),
    gaps: new Counter({ name: `${prefix}_kv_gaps_total`, help: 'Event-id gaps detected (each marks a worker suspect)', labelNames: ['pool'], ...reg }),
    missedEvents: new Counter({ name: `${prefix}_kv_missed_events_total`, help: 'KV events lost according to event-id gaps', labelNames: ['pool'], ...reg }),
    unknownParents: new Counter({ name: `${prefix}_kv_unknown_parent_total`, help: 'Stored events whose parent block was unknown', labelNames: ['pool'], ...reg }),
    kvRefused: new Counter({
      name: `${prefix}_kv_refused_total`,
      help: "KV events refused whole by the index, as Dynamo's router refuses them (reason self_referencing: a block id repeated within the event or equal to its parent); nothing applied",
      labelNames: ['pool', 'reason'],
      ...reg,
    }),
    queueDepth: new Gauge({ name: `${prefix}_queue_depth`, help: 'Messages waiting for the writer', labelNames: ['pool'], ...reg }),
    queueHighWater: new Gauge({ name: `${prefix}_queue_high_water`, help: 'Largest writer queue depth seen', labelNames: ['pool'], ...reg }),
    bookings: new Gauge({ name: `${prefix}_bookings`, help: 'Live bookings', labelNames: ['pool'], ...reg }),
    leaks: new Counter({ name: `${prefix}_booking_leaks_total`, help: 'Bookings expired because their lifecycle never ended', labelNames: ['pool'], ...reg }),
    workers: new Gauge({ name: `${prefix}_workers`, help: 'Known (worker, dp rank) pairs', labelNames: ['pool'], ...reg }),
    suspectWorkers: new Gauge({ name: `${prefix}_suspect_workers`, help: '(worker, dp rank) pairs whose index is suspect', labelNames: ['pool'], ...reg }),
    indexBlocks: new Gauge({ name: `${prefix}_index_blocks`, help: '(worker, block) pairs resident in the index', labelNames: ['pool'], ...reg }),
    indexPositions: new Gauge({ name: `${prefix}_index_positions`, help: 'Distinct block positions in the index tree (a prefix shared by workers counts once)', labelNames: ['pool'], ...reg }),
    indexRoom: new Gauge({ name: `${prefix}_index_room_positions`, help: 'Block positions handed out: the tree plus room stranded by evictions (compaction bounds it)', labelNames: ['pool'], ...reg }),
    indexBytes: new Gauge({ name: `${prefix}_index_bytes`, help: 'Bytes of the index tables (typed arrays)', labelNames: ['pool'], ...reg }),
    indexCompactions: new Counter({ name: `${prefix}_index_compactions_total`, help: 'Index compactions (the tree rebuilt into tight room)', labelNames: ['pool'], ...reg }),
    snapshots: new Counter({ name: `${prefix}_snapshots_total`, help: 'Snapshots written or restored', labelNames: ['pool', 'outcome'], ...reg }),
    snapshotBytes: new Gauge({ name: `${prefix}_snapshot_bytes`, help: 'Size of the last snapshot', labelNames: ['pool'], ...reg }),
    discoveryWorkers: new Gauge({ name: `${prefix}_discovery_workers`, help: "Workers Dynamo's discovery lists for the pool's endpoint", labelNames: ['pool'], ...reg }),
    discoveryChanges: new Counter({
      name: `${prefix}_discovery_changes_total`,
      help: 'Workers added, changed or removed by discovery after its initial listing',
      labelNames: ['pool', 'kind'],
      ...reg,
    }),
  };
}
