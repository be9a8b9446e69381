/**
 * One leader term's Kafka side: the transactional producer and the progress
 * follower (README, "Exactly once", rules 2–4). A fresh `KafkaSession` per
 * term; `close()` ends both. Created by the leader only: with the shared
 * transactional id, creating a producer fences whoever else has it.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import type { RateLimitedLog, KafkaClient, Logger, NatsConnection, VantageProducer } from '@vantage/runtime';
import type { Consumer as KafkaConsumer, Message as KafkaMessage } from 'kafkajs';
import type { OutcomeConfig } from './config';
import { retrying } from './lease';
import type { OutcomeMetrics } from './metrics';
import { acceptProgress, type ProgressRecord } from './progress';

/** One produce request of a transaction. */
export type TopicMessages = { topic: string; messages: KafkaMessage[] };

/** The Kafka side as a leader term uses it. */
export interface TermKafka {
  /**
   * A fresh producer with the shared transactional id: InitProducerId fences
   * the old epoch (a previous leader, or our own failed producer) and finishes
   * or aborts its open transaction.
   */
  fence(): Promise<void>;
  /**
   * One transaction: the requests in order, then commit if `owned()` still
   * holds (else abort). Resolves whether it committed; rejects on any failure
   * (the outcome is then unknown until the progress log says).
   */
  transact(requests: readonly (readonly TopicMessages[])[], owned: () => boolean): Promise<boolean>;
  /** Starts following the progress log (read_committed) from the bound of this moment; every accepted record goes to `onRecord`. */
  follow(onRecord: (rec: ProgressRecord) => void, onCrash: (why: string) => void): Promise<void>;
  /** Disconnects the producer and the follower. */
  close(): Promise<void>;
}

type KafkaSessionDeps = { kafka: KafkaClient; nc: NatsConnection; o: OutcomeConfig['outcome']; transactionalId: string; streams: readonly string[]; metrics: OutcomeMetrics; log: Logger; refusals: RateLimitedLog };

export class KafkaSession implements TermKafka {
  private producer: VantageProducer | null = null;
  private follower: KafkaConsumer | null = null;
  private closed = false;

  constructor(private readonly d: KafkaSessionDeps) {}

  async fence(): Promise<void> {
    await this.producer?.disconnect().catch(() => {});
    this.producer = null;
    this.producer = await this.d.kafka.createProducer({ transactionalId: this.d.transactionalId, transactionTimeoutMs: this.d.o.transactionTimeoutMs });
  }

  async transact(requests: readonly (readonly TopicMessages[])[], owned: () => boolean): Promise<boolean> {
    if (this.producer === null) throw new Error('no Kafka producer: not the leader');
    const txn = await this.producer.raw.transaction();
    try {
      // Several produce requests, one transaction: all of them commit or none.
      for (const topicMessages of requests) await txn.sendBatch({ topicMessages: topicMessages as TopicMessages[], acks: -1 });
      if (!owned()) {
        await txn.abort();
        return false;
      }
      await txn.commit();
      return true;
    } catch (e) {
      await txn.abort().catch(() => {});
      throw e;
    }
  }

  async follow(onRecord: (rec: ProgressRecord) => void, onCrash: (why: string) => void): Promise<void> {
    const { kafka, o, transactionalId, metrics, log, refusals } = this.d;
    const group = `${transactionalId}-progress-${randomBytes(4).toString('hex')}`;
    const startOffset = await this.progressStartOffset();
    // The start position is committed for the (new, empty) group before it
    // joins, rather than seeked: kafkajs restarts a crashed consumer (e.g. after
    // a broker restart) from committed offsets, and a seek would be forgotten.
    await retrying('progress follower start offset', () => kafka.admin.setOffsets({ groupId: group, topic: o.topics.progress, partitions: [{ partition: 0, offset: startOffset }] }));
    // Short session: after a broker restart the group waits out the old member's session before rejoining, and syncs wait on this follower.
    const retry = { retries: 10, initialRetryTime: 200, maxRetryTime: 2_000 };
    const follower = await kafka.createConsumer({ groupId: group, readUncommitted: false, maxWaitTimeInMs: 100, sessionTimeout: 6_000, heartbeatInterval: 1_000, retry });
    if (this.closed) {
      // The term that asked for it is over (set-up aborted): do not leak a consumer.
      await follower.disconnect().catch(() => {});
      throw new Error('leader term ended while its progress follower was starting');
    }
    this.follower = follower;
    // A follower that crashed for good (e.g. a broker restart while it was
    // joining) would stall every sync: the term ends; the next one starts afresh.
    follower.on(follower.events.CRASH, (e) => {
      if (e.payload.restart === false) onCrash(`progress follower crashed: ${e.payload.error.message}`);
    });
    await follower.subscribe({ topic: o.topics.progress, fromBeginning: true });
    await follower.run({
      autoCommit: true,
      eachMessage: async ({ message }) => {
        const got = acceptProgress(message.value, transactionalId);
        if (!got.ok) {
          metrics.progressRefused.inc({ reason: got.code });
          refusals.warn(`progress:${got.code}`, { reason: got.code, detail: got.reason, offset: message.offset }, 'progress record refused');
          return;
        }
        onRecord(got.rec);
      },
    });
    log.info({ topic: o.topics.progress, offset: startOffset }, 'progress follower started');
  }

  /**
   * Where the follower must start so that every committed transaction that
   * could still have unacked sources is read: each stream's first unacked
   * message (ack floor + 1) was published before any transaction containing a
   * later sequence committed, so its publish time (minus clock skew) bounds
   * the read. With nothing unacked there is nothing to read.
   */
  private async progressStartOffset(): Promise<string> {
    const { nc, o, kafka, log } = this.d;
    const jsm = await jetstreamManager(nc);
    let bound = Date.now();
    for (const stream of this.d.streams) {
      const ci = await jsm.consumers.info(stream, o.nats.durable);
      const si = await jsm.streams.info(stream);
      const floor = ci.ack_floor.stream_seq;
      if (floor >= si.state.last_seq) continue;
      const m = await jsm.streams.getMessage(stream, { seq: Math.max(floor + 1, si.state.first_seq) }).catch(() => null);
      bound = Math.min(bound, m === null ? 0 : m.time.getTime());
    }
    bound = Math.max(0, bound - o.clockSkewMs);
    // Right after topic creation the partition may not have a leader yet: retry briefly.
    const offsets = await retrying('progress offsets by timestamp', () => kafka.admin.fetchTopicOffsetsByTimestamp(o.topics.progress, bound));
    const p0 = offsets.find((x) => x.partition === 0);
    log.info({ boundMs: bound, offset: p0?.offset }, 'progress log read-back bound');
    return p0?.offset ?? '0';
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.follower?.disconnect().catch(() => {});
    this.follower = null;
    await this.producer?.disconnect().catch(() => {});
    this.producer = null;
  }
}
