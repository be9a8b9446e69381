// Outcome service metrics (served on /metrics beside the runtime's own).
// Label values are bounded: kinds, reason codes and topic roles are fixed sets.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export function outcomeMetrics(registry: Registry) {
  const registers = [registry];
  return {
    recordsIn: new Counter({ name: 'vantage_outcome_records_in_total', help: 'Source messages taken from JetStream, by kind (decision, lifecycle)', labelNames: ['kind'], registers }),
    recordsOut: new Counter({ name: 'vantage_outcome_records_out_total', help: 'Records committed to Kafka, by kind (decision, outcome, dead_letter) and outcome status', labelNames: ['kind', 'status'], registers }),
    deadLetters: new Counter({ name: 'vantage_outcome_dead_letters_total', help: 'Messages dead-lettered, by reason code', labelNames: ['reason'], registers }),
    pendingJoins: new Gauge({ name: 'vantage_outcome_pending_joins', help: 'Open joins held in memory', registers }),
    inbox: new Gauge({ name: 'vantage_outcome_inbox_messages', help: 'Messages fetched but not yet processed', registers }),
    joinsHeld: new Gauge({ name: 'vantage_outcome_joins_held', help: 'Open joins past their deadline waiting for a stream backlog to be read (README, "Joins after an outage")', registers }),
    joinTimeouts: new Counter({ name: 'vantage_outcome_join_timeouts_total', help: 'Joins closed by their deadline (status incomplete or timeout)', labelNames: ['status'], registers }),
    produceSeconds: new Histogram({
      name: 'vantage_outcome_kafka_transaction_seconds',
      help: 'Kafka transaction time (sends + commit) per batch',
      buckets: [0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    transactions: new Counter({ name: 'vantage_outcome_kafka_transactions_total', help: 'Kafka transactions by result (committed, aborted, failed, sentinel)', labelNames: ['result'], registers }),
    batchRecords: new Histogram({ name: 'vantage_outcome_batch_records', help: 'Output records per transaction', buckets: [1, 10, 100, 500, 1000, 2500, 5000, 10000], registers }),
    lagSeconds: new Gauge({ name: 'vantage_outcome_lag_seconds', help: 'Age (publish to commit) of the newest source message in the last committed batch', registers }),
    consumerPending: new Gauge({ name: 'vantage_outcome_consumer_pending', help: 'Messages in the stream not yet delivered to the durable consumer', labelNames: ['stream'], registers }),
    redeliveriesSkipped: new Counter({ name: 'vantage_outcome_redeliveries_skipped_total', help: 'Redelivered messages already in Kafka (acked, not written again), by what was found', labelNames: ['found'], registers }),
    redeliveries: new Counter({ name: 'vantage_outcome_redeliveries_total', help: 'Messages delivered more than once', registers }),
    syncs: new Counter({ name: 'vantage_outcome_progress_syncs_total', help: 'Progress-log synchronisations (sentinel round trips)', registers }),
    resets: new Counter({ name: 'vantage_outcome_resets_total', help: 'In-memory state dropped after losing ownership of messages (JetStream redelivers them)', registers }),
    expiredDropped: new Counter({ name: 'vantage_outcome_expired_dropped_total', help: 'Fetched messages dropped unprocessed because their ownership lapsed while queued (redelivered later)', registers }),
    leader: new Gauge({ name: 'vantage_outcome_leader', help: '1 while this replica holds the leadership lease and consumes, 0 while standby', registers }),
    leadershipChanges: new Counter({ name: 'vantage_outcome_leadership_changes_total', help: 'Leadership transitions, by the role taken (leader, standby)', labelNames: ['to'], registers }),
    progressRefused: new Counter({ name: 'vantage_outcome_progress_refused_total', help: 'Progress-topic records not taken (another writer than this transactional id, or malformed), by reason', labelNames: ['reason'], registers }),
    fetchPaused: new Gauge({ name: 'vantage_outcome_fetch_paused', help: '1 while fetching is paused by backpressure', registers }),
  };
}

export type OutcomeMetrics = ReturnType<typeof outcomeMetrics>;
