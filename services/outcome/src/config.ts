// Outcome service configuration: the runtime's base section plus `outcome`.
// Every key maps to one environment variable (VANTAGE_OUTCOME_JOIN_WINDOW_MS,
// VANTAGE_OUTCOME_TOPICS_OUTCOMES, ...); README.md, "Configuration", says what each does.
import { baseConfigSchema, s, VantageError, type DeepReadonly, type Static } from '@vantage/runtime';

export const outcomeConfigSchema = s.extend(baseConfigSchema, {
  outcome: s.object({
    nats: s.object({
      decisionsStream: s.string({ minLength: 1, default: 'VANTAGE_DECISIONS' }),
      decisionsSubject: s.string({ minLength: 1, default: 'vantage.v1.decisions' }),
      lifecycleStream: s.string({ minLength: 1, default: 'VANTAGE_LIFECYCLE' }),
      /** Must end in `.>`: the last token is the pool. */
      lifecycleSubject: s.string({ minLength: 3, pattern: '\\.>$', default: 'vantage.v1.lifecycle.>' }),
      durable: s.string({ minLength: 1, default: 'outcome' }),
      streamMaxAgeMs: s.integer({ minimum: 60_000, default: 7 * 24 * 3600_000 }),
      streamMaxBytes: s.integer({ minimum: -1, default: 8 * 1024 ** 3 }),
      /**
       * What a full stream does: `new` refuses new messages (the decision service's publisher then holds
       * and retries its records, counted; a gateway's core-NATS lifecycle publish is refused by the
       * server), `old` drops the oldest message, acknowledged or not. Default `new`: nothing unread is
       * silently lost.
       */
      streamDiscard: s.enum(['new', 'old'] as const, { default: 'new' }),
      streamReplicas: s.integer({ minimum: 1, maximum: 5, default: 1 }),
      ackWaitMs: s.integer({ minimum: 1000, default: 150_000 }),
      maxAckPending: s.integer({ minimum: 1, default: 200_000 }),
      fetchBatch: s.integer({ minimum: 1, maximum: 10_000, default: 2000 }),
      fetchExpiresMs: s.integer({ minimum: 100, default: 1000 }),
    }),
    topics: s.object({
      decisions: s.string({ minLength: 1, default: 'vantage.decisions.v1' }),
      outcomes: s.string({ minLength: 1, default: 'vantage.outcomes.v1' }),
      deadLetter: s.string({ minLength: 1, default: 'vantage.deadletter.v1' }),
      progress: s.string({ minLength: 1, default: 'vantage.outcome-progress.v1' }),
      partitions: s.integer({ minimum: 1, default: 6 }),
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
      bucket: s.string({ minLength: 1, pattern: '^[-\\w]+$', default: 'vantage_outcome_leader' }),
      key: s.string({ default: '' }),
      leaseMs: s.integer({ minimum: 1000, default: 5_000 }),
      renewMs: s.integer({ minimum: 100, default: 1_000 }),
    }),
    transactionTimeoutMs: s.integer({ minimum: 1000, default: 60_000 }),
    joinWindowMs: s.integer({ minimum: 10, default: 60_000 }),
    terminalGraceMs: s.integer({ minimum: 0, default: 2_000 }),
    maxPendingJoins: s.integer({ minimum: 1, default: 100_000 }),
    maxInbox: s.integer({ minimum: 1, default: 20_000 }),
    maxBatchRecords: s.integer({ minimum: 1, default: 5_000 }),
    /** Approximate bytes of output in one Kafka transaction (kept well under topics.maxMessageBytes). */
    maxBatchBytes: s.integer({ minimum: 64 * 1024, default: 4 * 1024 * 1024 }),
    lingerMs: s.integer({ minimum: 0, default: 5 }),
    maxMessageBytes: s.integer({ minimum: 1024, default: 1024 * 1024 }),
    maxDeadLetterBytes: s.integer({ minimum: 0, default: 64 * 1024 }),
    recentlyClosedCap: s.integer({ minimum: 0, default: 200_000 }),
    clockSkewMs: s.integer({ minimum: 0, default: 60_000 }),
    health: s.object({
      kafkaDownMs: s.integer({ minimum: 100, default: 10_000 }),
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
