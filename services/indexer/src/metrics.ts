/** The indexer's Prometheus metrics (all labelled by pool): its pools' intake, and the observe endpoint. */
import type { Registry } from 'prom-client';
import { ingestMetrics, type IngestMetrics } from '@vantage/ingest';
import { LazyHistogram } from '@vantage/runtime';

export interface IndexerMetrics extends IngestMetrics {
  /** Labelled pool, outcome; the hot path keeps its series (`series(pool, 'ok')`). */
  readonly observeSeconds: LazyHistogram;
}

export function indexerMetrics(registry: Registry): IndexerMetrics {
  return {
    ...ingestMetrics(registry, 'vantage_indexer'),
    observeSeconds: new LazyHistogram(
      registry,
      'vantage_indexer_observe_seconds',
      'observe handling time inside the service',
      ['pool', 'outcome'],
      [0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05],
    ),
  };
}
