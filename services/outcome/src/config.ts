// Outcome service configuration: the runtime's base section plus `outcome`.
// Every key maps to one environment variable (VANTAGE_OUTCOME_JOIN_WINDOW_MS,
// VANTAGE_OUTCOME_TOPICS_OUTCOMES, ...); see README.md for the table.
import { baseConfigSchema, s, VantageError, type DeepReadonly, type Static } from '@vantage/runtime';

export const outcomeConfigSchema = s.extend(baseConfigSchema, {
  outcome: s.object({
    nats: s.object({
      /** JetStream stream holding decision records (Avro single-object bytes). */
      decisionsStream: s.string({ minLength: 1, default: 'VANTAGE_DECISIONS' }),
      decisionsSubject: s.string({ minLength: 1, default: 'vantage.v1.decisions' }),
      /** JetStream stream holding gateway lifecycle events (JSON). */
      lifecycleStream: s.string({ minLength: 1, default: 'VANTAGE_LIFECYCLE' }),
      /** Must end in `.>`: the last token is the pool. */
      lifecycleSubject: s.string({ minLength: 3, pattern: '\\.>$', default: 'vantage.v1.lifecycle.>' }),
      /** Durable pull consumer name, shared by every replica (one queue of work). */
      durable: s.string({ minLength: 1, default: 'outcome' }),
      /** Stream retention: long enough to outlive any Kafka outage we intend to ride out. */
      streamMaxAgeMs: s.integer({ minimum: 60_000, default: 7 * 24 * 3600_000 }),
      streamMaxBytes: s.integer({ minimum: -1, default: 8 * 1024 ** 3 }),
      /**
       * What a full stream does: `new` refuses new messages (the decision service's publisher then holds
       * and retries its records, counted; a gateway's core-NATS lifecycle publish is refused by the
       * server), `old` drops the oldest message, acknowledged or not. Default `new`: nothing unread is
       * silently lost.
       */
      streamDiscard: s.enum(['new', 'old'] as const, { default: 'new' }),
      /** JetStream replicas of both streams (3 on a three-node production cluster; 1 on a single server). */
      streamReplicas: s.integer({ minimum: 1, maximum: 5, default: 1 }),
      /** Server-side redelivery timer. Must exceed joinWindowMs + terminalGraceMs (checked at start). */
      ackWaitMs: s.integer({ minimum: 1000, default: 150_000 }),
      /** Bound on unacknowledged messages per consumer: the server stops delivering beyond it. */
      maxAckPending: s.integer({ minimum: 1, default: 200_000 }),
      /** Messages per pull request. */
      fetchBatch: s.integer({ minimum: 1, maximum: 10_000, default: 2000 }),
      /** How long one pull request waits for messages. */
      fetchExpiresMs: s.integer({ minimum: 100, default: 1000 }),
    }),
    topics: s.object({
      decisions: s.string({ minLength: 1, default: 'vantage.decisions.v1' }),
      outcomes: s.string({ minLength: 1, default: 'vantage.outcomes.v1' }),
      deadLetter: s.string({ minLength: 1, default: 'vantage.deadletter.v1' }),
      /** Single-partition log of which source sequences each transaction wrote (exactly-once bookkeeping). */
      progress: s.string({ minLength: 1, default: 'vantage.outcome-progress.v1' }),
      partitions: s.integer({ minimum: 1, default: 6 }),
      /** Replication factor of every topic at creation (3 on a three-broker production cluster). */
      replicationFactor: s.integer({ minimum: 1, default: 1 }),
      /** Topic `min.insync.replicas` at creation (2 with replication factor 3: a write survives one broker down). */
      minInsyncReplicas: s.integer({ minimum: 1, default: 1 }),
      retentionMs: s.integer({ minimum: 60_000, default: 30 * 24 * 3600_000 }),
      /** Topic `max.message.bytes` set at creation: one transaction's record batch per partition must fit. */
      maxMessageBytes: s.integer({ minimum: 1024 * 1024, default: 16 * 1024 * 1024 }),
    }),
    /**
     * ONE id shared by every replica of this pair of streams (not per process): a new leader's
     * InitProducerId fences the previous leader, so a stale leader can never commit. Empty =
     * `<service>-txn`.
     */
    transactionalId: s.string({ default: '' }),
    /** Active–standby leadership: a lease in a JetStream KV bucket; only its holder consumes (README, "Replicas"). */
    leader: s.object({
      /** KV bucket (created when missing, TTL = leaseMs). */
      bucket: s.string({ minLength: 1, pattern: '^[-\\w]+$', default: 'vantage_outcome_leader' }),
      /** Lease key; empty = the transactional id (the lease guards who uses it). */
      key: s.string({ default: '' }),
      /** The key's TTL (bucket max_age): a leader that stopped renewing loses the lease this long after its last renewal. */
      leaseMs: s.integer({ minimum: 1000, default: 5_000 }),
      /** Renewal period of the leader, and the standby's polling period. */
      renewMs: s.integer({ minimum: 100, default: 1_000 }),
    }),
    transactionTimeoutMs: s.integer({ minimum: 1000, default: 60_000 }),
    /** A join closes as `deadline` this long after its first message arrived. */
    joinWindowMs: s.integer({ minimum: 10, default: 60_000 }),
    /** After decision + terminal event, wait this long for a usage report before closing. */
    terminalGraceMs: s.integer({ minimum: 0, default: 2_000 }),
    /** Cap on open joins: fetching pauses while it is reached. */
    maxPendingJoins: s.integer({ minimum: 1, default: 100_000 }),
    /** Cap on messages read but not yet processed: fetching pauses above it. */
    maxInbox: s.integer({ minimum: 1, default: 20_000 }),
    /** Most output records in one Kafka transaction. */
    maxBatchRecords: s.integer({ minimum: 1, default: 5_000 }),
    /** Approximate bytes of output in one Kafka transaction (kept well under topics.maxMessageBytes). */
    maxBatchBytes: s.integer({ minimum: 64 * 1024, default: 4 * 1024 * 1024 }),
    /** Wait for more input before committing a small batch. */
    lingerMs: s.integer({ minimum: 0, default: 5 }),
    /** Messages larger than this are dead-lettered as OVERSIZED. */
    maxMessageBytes: s.integer({ minimum: 1024, default: 1024 * 1024 }),
    /** Original bytes kept in a dead letter. */
    maxDeadLetterBytes: s.integer({ minimum: 0, default: 64 * 1024 }),
    /** Late events remembered per request id after its join closed (dead-lettered as JOIN_LATE). */
    recentlyClosedCap: s.integer({ minimum: 0, default: 200_000 }),
    /** Clock-skew allowance when seeking the progress log by timestamp. */
    clockSkewMs: s.integer({ minimum: 0, default: 60_000 }),
    health: s.object({
      /** /healthz is unhealthy once Kafka has been unreachable (probe or transactions failing) this long. */
      kafkaDownMs: s.integer({ minimum: 100, default: 10_000 }),
      /** How often the leader probes Kafka when nothing else would notice it gone, and the probe's own bound. */
      kafkaProbeMs: s.integer({ minimum: 100, default: 2_000 }),
    }),
  }),
});

export type OutcomeConfigShape = Static<typeof outcomeConfigSchema>;
export type OutcomeConfig = DeepReadonly<OutcomeConfigShape>;

/** Cross-field rules the schema cannot express; thrown as CONFIG_INVALID at start. */
export function checkOutcomeConfig(cfg: OutcomeConfig): void {
  const o = cfg.outcome;
  const problems: string[] = [];
  // A pending message must never reach its redelivery timer while its join is
  // still open, or a second replica would start the same join (see README).
  if (o.nats.ackWaitMs < 2 * (o.joinWindowMs + o.terminalGraceMs) + 5_000) {
    problems.push(`outcome.nats.ackWaitMs (${o.nats.ackWaitMs}) must be >= 2 * (joinWindowMs + terminalGraceMs) + 5000 = ${2 * (o.joinWindowMs + o.terminalGraceMs) + 5_000}`);
  }
  if (o.leader.leaseMs < 3 * o.leader.renewMs) {
    problems.push(`outcome.leader.leaseMs (${o.leader.leaseMs}) must be >= 3 * outcome.leader.renewMs (${3 * o.leader.renewMs})`);
  }
  if (o.topics.minInsyncReplicas > o.topics.replicationFactor) {
    problems.push(`outcome.topics.minInsyncReplicas (${o.topics.minInsyncReplicas}) must be <= outcome.topics.replicationFactor (${o.topics.replicationFactor})`);
  }
  if (o.transactionTimeoutMs >= o.nats.ackWaitMs) {
    problems.push(`outcome.transactionTimeoutMs (${o.transactionTimeoutMs}) must be below outcome.nats.ackWaitMs (${o.nats.ackWaitMs})`);
  }
  if (problems.length > 0) throw new VantageError('CONFIG_INVALID', `invalid outcome configuration:\n  - ${problems.join('\n  - ')}`, { details: { problems } });
}
