/** The indexer's Prometheus metrics (all labelled by pool). */
import { Counter, Gauge, type Histogram, type LabelValues, type Registry } from 'prom-client';

/** One label set of an `ObserveHistogram`: observing is a bucket scan and three increments. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: LabelValues<string>,
    private readonly bounds: Float64Array,
  ) {
    this.counts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    if (i < b.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

interface HistogramValue {
  readonly labels: LabelValues<string>;
  readonly sharedLabels?: LabelValues<string>;
  readonly value: number;
  readonly metricName: string;
}

/** What a prom-client metric's get() returns (the registry reads these members). */
interface HistogramValues {
  readonly name: string;
  readonly help: string;
  readonly type: 'histogram';
  readonly aggregator: 'sum';
  readonly values: HistogramValue[];
}

/**
 * A histogram for the observe hot path: prom-client's `Histogram.observe` hashes its label object
 * into a key on every call; here the caller keeps its series (`series(pool, outcome)`) and an
 * observation is a few array updates. Registered as a metric of its own: the exposition is the
 * one prom-client's Histogram gives for the same observations (cumulative `_bucket` lines with
 * `le`, `_sum`, `_count`; a series appears from its first observation).
 */
export class ObserveHistogram {
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  readonly labelNames = ['pool', 'outcome'] as const;
  private readonly bounds: Float64Array;
  private readonly map = new Map<string, HistogramSeries>();

  constructor(
    registry: Registry,
    readonly name: string,
    readonly help: string,
    buckets: readonly number[],
  ) {
    this.bounds = Float64Array.from([...buckets].sort((a, b) => a - b));
    // The registry only needs name, help, type, get() and reset(); it is typed for prom-client's classes.
    registry.registerMetric(this as unknown as Histogram);
  }

  series(pool: string, outcome: string): HistogramSeries {
    const key = `${pool}\u0000${outcome}`;
    let s = this.map.get(key);
    if (s === undefined) this.map.set(key, (s = new HistogramSeries({ pool, outcome }, this.bounds)));
    return s;
  }

  /** Convenience for cold paths (errors): looks the series up by its labels. */
  observe(labels: { pool: string; outcome: string }, value: number): void {
    this.series(labels.pool, labels.outcome).observe(value);
  }

  reset(): void {
    for (const s of this.map.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }

  /** Buckets with `le` as their own label and the series' labels shared, as prom-client's getForPromString. */
  getForPromString(): Promise<HistogramValues> {
    const values: HistogramValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.map.values()) {
      if (s.count === 0) continue;
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i]!;
        values.push({ labels: { le: this.bounds[i]! }, sharedLabels: s.labels, value: acc, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** Labels merged (the series' and `le`), as prom-client's get(). */
  async get(): Promise<HistogramValues> {
    const m = await this.getForPromString();
    return { ...m, values: m.values.map((v) => ({ labels: { ...v.sharedLabels, ...v.labels }, value: v.value, metricName: v.metricName })) };
  }
}

export interface IndexerMetrics {
  readonly received: Counter<'pool' | 'source'>;
  readonly rejected: Counter<'pool' | 'source' | 'reason'>;
  readonly dropped: Counter<'pool' | 'source'>;
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
  readonly observeSeconds: ObserveHistogram;
  readonly snapshots: Counter<'pool' | 'outcome'>;
  readonly snapshotBytes: Gauge<'pool'>;
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
    observeSeconds: new ObserveHistogram(
      registry,
      'vantage_indexer_observe_seconds',
      'observe handling time inside the service',
      [0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05],
    ),
    snapshots: new Counter({ name: 'vantage_indexer_snapshots_total', help: 'Snapshots written or restored', labelNames: ['pool', 'outcome'], ...reg }),
    snapshotBytes: new Gauge({ name: 'vantage_indexer_snapshot_bytes', help: 'Size of the last snapshot', labelNames: ['pool'], ...reg }),
  };
}
