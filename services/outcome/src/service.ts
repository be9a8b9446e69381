/**
 * The outcome service: JetStream (decisions, lifecycle events) → join →
 * Kafka (decisions, outcomes, dead letters), exactly once. README.md explains
 * the design; the comments here say why each step is where it is.
 *
 *   fetch loops (one per stream) ──▶ inbox (bounded) ──▶ batch loop:
 *       decode / dead-letter / dedupe ─▶ Joiner ─▶ one Kafka transaction
 *       (records + one progress record) ─▶ commit ─▶ ack the sources
 */
import { randomBytes } from 'node:crypto';
import { AckPolicy, DeliverPolicy, DiscardPolicy, jetstream, jetstreamManager, type Consumer as JsConsumer, type JsMsg } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import {
  decodeSingleObject,
  DECISION_REGISTRY,
  encodeSingleObject,
  OUTCOME_RECORD_CURRENT,
  type DecisionRecord,
  type LifecycleEventInput,
  type OutcomeRecord,
  type SourcePart,
} from '@vantage/records';
import { ensureDurableConsumer, ensureStream, natsConnected, OutageClock, RateLimitedLog, type ServiceContext, type VantageProducer } from '@vantage/runtime';
import type { Consumer as KafkaConsumer, Message as KafkaMessage } from 'kafkajs';
import { checkOutcomeConfig, type OutcomeConfig, type OutcomeConfigShape } from './config';
import { deadLetterMessage, type DeadLetterReason } from './deadletter';
import { Joiner, type ClosedJoin, type Source } from './joiner';
import { parseDelivery } from './delivery';
import { ReadPosition } from './readposition';
import { decodeLifecycle } from './lifecycle';
import { outcomeMetrics, type OutcomeMetrics } from './metrics';
import { acceptProgress, CommittedSet, progressRecord, type ProgressRecord } from './progress';

export type OutcomeContext = ServiceContext<OutcomeConfigShape, true>;
type Ctx = OutcomeContext;
type Kind = 'decision' | 'lifecycle';

/** One delivery of a JetStream message, and until when this instance may still write it. */
export interface Held {
  msg: JsMsg;
  /**
   * Local receive time + ack_wait / 2. Before this instant the server cannot
   * have redelivered the message to anyone else, so a transaction committed
   * before it is the only writer of the message (README, "ownership").
   */
  ownedUntilMs: number;
  /** Stream sequence (from the delivery info, parsed once). */
  seq: number;
}

/** A fetched message waiting in the inbox; it is also its own `Held` handle (one object per message). */
interface InboxItem extends Held {
  kind: Kind;
  stream: string;
  receivedAtMs: number;
  redelivered: boolean;
  publishMs: number;
}

interface Batch {
  nonce: string;
  byTopic: Map<string, KafkaMessage[]>;
  records: number;
  /** Approximate output bytes (values), against maxBatchBytes. */
  bytes: number;
  /** Acked after commit. */
  done: Held[];
  doneSeqs: Map<string, number[]>;
  /** Decisions copied to the decisions topic whose join is still open: must be owned at commit, acked later. */
  copied: Held[];
  copiedSeqs: Map<string, number[]>;
  newestPublishMs: number;
  /** Request ids whose outcome this batch carries (un-closed again if the batch is abandoned). */
  closedIds: string[];
  /** Output records by `kind \0 status`, counted into metrics after commit. */
  counts: Map<string, number>;
  deadLetters: DeadLetterReason[];
}

export interface OutcomeService {
  readonly metrics: OutcomeMetrics;
  /** The current leader term's joiner (a fresh one per term). */
  readonly joiner: Joiner<Held>;
  readonly transactionalId: string;
  /** Active–standby: only the holder of the leadership lease consumes (README, "Replicas"). */
  readonly role: 'leader' | 'standby';
  /** Resolves when the loops have stopped (after shutdown). */
  readonly stopped: Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Time kept, within a message's ownership, for the transaction that writes its join. */
const COMMIT_MARGIN_MS = 2_000;

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const a = m.get(k);
  if (a === undefined) m.set(k, [v]);
  else a.push(v);
}


/** Retries a start-up call that fails transiently (leader elections, coordinator loading). */
async function retrying<T>(what: string, fn: () => Promise<T>, attempts = 30): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (e) {
      if (i >= attempts) throw new Error(`${what}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      await sleep(200);
    }
  }
}

export async function startOutcome(ctx: Ctx): Promise<OutcomeService> {
  const cfg: OutcomeConfig = ctx.config;
  checkOutcomeConfig(cfg);
  const o = cfg.outcome;
  const log = ctx.log.child({ component: 'outcome' });
  const kafka = ctx.kafka;
  const metrics = outcomeMetrics(ctx.registry);
  // One transactional id for every replica: a new leader's InitProducerId fences the old one.
  const transactionalId = o.transactionalId === '' ? `${cfg.service}-txn` : o.transactionalId;
  const ackWaitMs = o.nats.ackWaitMs;
  const ownershipMs = Math.floor(ackWaitMs / 2);
  const lifecyclePrefix = o.nats.lifecycleSubject.slice(0, -1); // "vantage.v1.lifecycle."
  const streams: { kind: Kind; stream: string; subject: string }[] = [
    { kind: 'decision', stream: o.nats.decisionsStream, subject: o.nats.decisionsSubject },
    { kind: 'lifecycle', stream: o.nats.lifecycleStream, subject: o.nats.lifecycleSubject },
  ];

  // ---------------------------------------------------------------- set-up
  for (const s of streams) {
    await ensureStream(
      ctx.nc,
      {
        name: s.stream,
        subjects: [s.subject],
        // Limits retention, file storage: the stream is the durable buffer
        // that lets Kafka be down for as long as max_age without loss.
        max_age: o.nats.streamMaxAgeMs * 1_000_000,
        max_bytes: o.nats.streamMaxBytes,
        // A full stream refuses new input (publishers hold and retry) rather than drop the oldest unread.
        discard: o.nats.streamDiscard === 'new' ? DiscardPolicy.New : DiscardPolicy.Old,
        num_replicas: o.nats.streamReplicas,
      },
      log,
    );
    await ensureDurableConsumer(
      ctx.nc,
      s.stream,
      {
        durable_name: o.nats.durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: ackWaitMs * 1_000_000,
        max_ack_pending: o.nats.maxAckPending,
        max_deliver: -1,
      },
      log,
    );
  }
  const retention = String(o.topics.retentionMs);
  const topicConfig = { 'retention.ms': retention, 'max.message.bytes': String(o.topics.maxMessageBytes), 'min.insync.replicas': String(o.topics.minInsyncReplicas) };
  await kafka.ensureTopics([
    { topic: o.topics.decisions, partitions: o.topics.partitions, replicationFactor: o.topics.replicationFactor, config: topicConfig },
    { topic: o.topics.outcomes, partitions: o.topics.partitions, replicationFactor: o.topics.replicationFactor, config: topicConfig },
    { topic: o.topics.deadLetter, partitions: o.topics.partitions, replicationFactor: o.topics.replicationFactor, config: topicConfig },
    // One partition: the follower's "read up to my sentinel" is only a total
    // order within a partition.
    { topic: o.topics.progress, partitions: 1, replicationFactor: o.topics.replicationFactor, config: topicConfig },
  ]);

  // Per leader term (fresh at each takeover): what is committed, the open joins, the inbox.
  let committed = new CommittedSet(2 * ackWaitMs);
  // A join held for the streams' read position (Joiner.takeExpired) closes terminalGraceMs + COMMIT_MARGIN_MS before its
  // first message's ownership ends, leaving that long for its transaction (README, "Joins after an outage").
  const maxHoldMs = Math.max(0, ownershipMs - o.joinWindowMs - o.terminalGraceMs - COMMIT_MARGIN_MS);
  const newJoiner = (): Joiner<Held> =>
    new Joiner<Held>({ joinWindowMs: o.joinWindowMs, terminalGraceMs: o.terminalGraceMs, recentlyClosedCap: o.recentlyClosedCap, maxHoldMs });
  let joiner = newJoiner();
  const inbox: InboxItem[] = [];
  let inboxHead = 0;
  const inboxSize = (): number => inbox.length - inboxHead;
  /** How far both streams have been read (per term: cleared at each takeover). */
  const reading = new ReadPosition(streams.map((s) => s.stream));
  /**
   * The publish time up to which both streams have been read and joined, for `Joiner.takeExpired`
   * (README, "Joins after an outage"). At `maxPendingJoins` nothing is held (the memory bound first).
   */
  const readUpTo = (now: number): number => (joiner.pending >= o.maxPendingJoins ? Infinity : reading.upTo(now, inbox, inboxHead));

  /** The leader term's loops stop (shutdown or lost lease). */
  let stopping = false;
  /** The service is shutting down: no new leader term. */
  let shuttingDown = false;
  /** Handles of an abandoned batch at the end of a term: naked with the rest. */
  const abandoned: Held[] = [];
  /** Set near the shutdown deadline: a Kafka retry loop gives up and leaves its messages unacked. */
  let giveUp = false;
  let kafkaHealthy = true;
  let lastKafkaError: string | undefined;
  /** Kafka reachability for /healthz: unhealthy once transactions or the probe have failed for health.kafkaDownMs. */
  const kafkaClock = new OutageClock(o.health.kafkaDownMs);
  const setKafka = (up: boolean, err?: unknown): void => {
    kafkaHealthy = up;
    if (up) kafkaClock.ok();
    else {
      lastKafkaError = err instanceof Error ? err.message : String(err);
      kafkaClock.fail(lastKafkaError);
    }
  };
  const refusals = new RateLimitedLog(log);
  let wake: (() => void) | null = null;
  /** Where the batch loop is, for the stall report. */
  let stage = 'starting';
  let lastCommitMs = Date.now();
  const poke = (): void => {
    const w = wake;
    wake = null;
    w?.();
  };

  // ------------------------------------------------------------- producer
  // Created by the leader only: with the shared transactional id, creating one fences whoever else has it.
  let producer: VantageProducer | null = null;
  const prod = (): VantageProducer => {
    if (producer === null) throw new Error('no Kafka producer: not the leader');
    return producer;
  };

  /**
   * A fresh producer with the shared transactional id: InitProducerId fences
   * the old epoch (a previous leader, or our own failed producer) and finishes
   * or aborts its open transaction. Only while this replica provably holds the
   * lease (a renewal just succeeded): a stale leader must never fence the
   * current one.
   */
  async function recreateProducer(): Promise<void> {
    await producer?.disconnect().catch(() => {});
    producer = null;
    for (let attempt = 0; ; attempt++) {
      if (giveUp) throw new Error('not re-creating the Kafka producer: shutting down or no longer the leader');
      if (!(await renewLease())) throw new Error('leadership lease not held: not re-creating the Kafka producer');
      try {
        producer = await kafka.createProducer({ transactionalId, transactionTimeoutMs: o.transactionTimeoutMs });
        return;
      } catch (e) {
        if (giveUp) throw e;
        log.warn({ err: e, attempt }, 'kafka producer re-creation failed; retrying');
        await sleep(Math.min(5000, 200 * 2 ** Math.min(attempt, 5)));
      }
    }
  }

  // ---------------------------------------------------- progress follower
  const sentinelWaiters = new Map<string, () => void>();
  let currentFollower: KafkaConsumer | null = null;
  /** Counts leader terms (a set-up step that outlives its term must not touch the next one). */
  let termNo = 0;
  /** Started at each leader term, from the ack floors of that moment (see progressStartOffset). */
  async function startFollower(): Promise<KafkaConsumer> {
  const myTerm = termNo;
  const followerGroup = `${transactionalId}-progress-${randomBytes(4).toString('hex')}`;
  const startOffset = await progressStartOffset();
  // The start position is committed for the (new, empty) group before it
  // joins, rather than seeked: kafkajs restarts a crashed consumer (e.g. after
  // a broker restart) from committed offsets, and a seek would be forgotten.
  await retrying('progress follower start offset', () => kafka.admin.setOffsets({ groupId: followerGroup, topic: o.topics.progress, partitions: [{ partition: 0, offset: startOffset }] }));
  const follower: KafkaConsumer = await kafka.createConsumer({
    groupId: followerGroup,
    readUncommitted: false,
    maxWaitTimeInMs: 100,
    // Short session: after a broker restart the group waits out the old
    // member's session before rejoining, and syncs wait on this follower.
    sessionTimeout: 6_000,
    heartbeatInterval: 1_000,
    retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 2_000 },
  });
  if (termNo !== myTerm) {
    // The term that asked for it is over (set-up aborted): do not leak a consumer.
    await follower.disconnect().catch(() => {});
    throw new Error('leader term ended while its progress follower was starting');
  }
  currentFollower = follower;
  // A follower that crashed for good (e.g. a broker restart while it was
  // joining) would stall every sync: end the term; the next one starts afresh.
  follower.on(follower.events.CRASH, (e) => {
    if (e.payload.restart === false) failTerm(`progress follower crashed: ${e.payload.error.message}`);
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
      const rec = got.rec;
      committed.add(rec, Date.now());
      sentinelWaiters.get(rec.nonce)?.();
    },
  });
  log.info({ topic: o.topics.progress, offset: startOffset }, 'progress follower started');
  return follower;
  }

  /**
   * Where the follower must start so that every committed transaction that
   * could still have unacked sources is read: each stream's first unacked
   * message (ack floor + 1) was published before any transaction containing a
   * later sequence committed, so its publish time (minus clock skew) bounds
   * the read. With nothing unacked there is nothing to read.
   */
  async function progressStartOffset(): Promise<string> {
    const jsm = await jetstreamManager(ctx.nc);
    let bound = Date.now();
    for (const s of streams) {
      const ci = await jsm.consumers.info(s.stream, o.nats.durable);
      const si = await jsm.streams.info(s.stream);
      const floor = ci.ack_floor.stream_seq;
      if (floor >= si.state.last_seq) continue;
      const m = await jsm.streams.getMessage(s.stream, { seq: Math.max(floor + 1, si.state.first_seq) }).catch(() => null);
      bound = Math.min(bound, m === null ? 0 : m.time.getTime());
    }
    bound = Math.max(0, bound - o.clockSkewMs);
    // Right after topic creation the partition may not have a leader yet: retry briefly.
    const offsets = await retrying('progress offsets by timestamp', () => kafka.admin.fetchTopicOffsetsByTimestamp(o.topics.progress, bound));
    const p0 = offsets.find((x) => x.partition === 0);
    log.info({ boundMs: bound, offset: p0?.offset }, 'progress log read-back bound');
    return p0?.offset ?? '0';
  }

  /**
   * Read the progress log up to "now": commit a sentinel record and wait until
   * the follower sees it. Read_committed delivers in offset order and stops at
   * the first open transaction, so everything committed before the sentinel
   * (including a transaction that was open when we wrote it) is known after.
   */
  async function sync(): Promise<void> {
    metrics.syncs.inc();
    const outer = stage;
    stage = `${outer}/sync`;
    for (let attempt = 0; ; attempt++) {
      const nonce = `s-${randomBytes(8).toString('hex')}`;
      const seen = new Promise<void>((resolve) => sentinelWaiters.set(nonce, resolve));
      try {
        const txn = await prod().raw.transaction();
        try {
          await txn.send({ topic: o.topics.progress, acks: -1, messages: [{ partition: 0, value: JSON.stringify(progressRecord(transactionalId, nonce, Date.now(), new Map(), new Map())) }] });
          await txn.commit();
        } catch (e) {
          await txn.abort().catch(() => {});
          throw e;
        }
        metrics.transactions.inc({ result: 'sentinel' });
        const timeout = sleep(Math.max(30_000, o.transactionTimeoutMs + 5_000)).then(() => 'timeout' as const);
        if ((await Promise.race([seen.then(() => 'seen' as const), timeout])) === 'seen') {
          stage = outer;
          return;
        }
        log.warn({ nonce }, 'progress sentinel not seen in time; retrying');
      } catch (e) {
        setKafka(false, e);
        if (giveUp) throw e;
        log.warn({ err: e, attempt }, 'progress sync failed; re-creating producer');
        await sleep(Math.min(5000, 200 * 2 ** Math.min(attempt, 5)));
        await recreateProducer();
      } finally {
        sentinelWaiters.delete(nonce);
      }
    }
  }


  // ---------------------------------------------------------- fetch loops
  const js = jetstream(ctx.nc);
  const fetchState: Record<string, { state: string; sinceMs: number; fetched: number; lastError?: string }> = {};
  const fetchLoop = async (s: (typeof streams)[number]): Promise<void> => {
    let consumer: JsConsumer | undefined;
    const st = (fetchState[s.stream] = { state: 'starting', sinceMs: Date.now(), fetched: 0 } as (typeof fetchState)[string]);
    const set = (state: string): void => {
      if (st.state !== state) {
        st.state = state;
        st.sinceMs = Date.now();
      }
    };
    while (!stopping) {
      const room = Math.min(o.maxInbox - inboxSize(), o.nats.fetchBatch);
      if (room <= 0 || joiner.pending >= o.maxPendingJoins) {
        // Backpressure: Kafka slow or down, or too many open joins. Stop
        // pulling; JetStream keeps the messages.
        metrics.fetchPaused.set(1);
        set('paused');
        await sleep(5);
        continue;
      }
      metrics.fetchPaused.set(0);
      try {
        set('consumer');
        consumer ??= await js.consumers.get(s.stream, o.nats.durable);
        set('fetching');
        const iter = await consumer.fetch({ max_messages: room, expires: o.nats.fetchExpiresMs, idle_heartbeat: Math.max(500, Math.floor(o.nats.fetchExpiresMs / 2)) });
        let got = 0;
        // A pull request lost in a server restart can leave the iterator
        // waiting forever; a fetch never legitimately outlives its expiry by much.
        const watchdog = setTimeout(() => void iter.stop(), o.nats.fetchExpiresMs * 2 + 2_000);
        try {
          for await (const m of iter) {
            if (stopping) {
              // Term over (lost lease or shutdown): the pull still delivers; give it straight back.
              m.nak();
              continue;
            }
            // The ack subject read directly (JsMsg.info builds a dozen strings per message); the client's parser is the fallback.
            // (`reply` is public on the client's message class, not on its JsMsg interface.)
            const reply = (m as JsMsg & { readonly reply?: unknown }).reply;
            const d = typeof reply === 'string' ? parseDelivery(reply) : null;
            const deliveryCount = d === null ? m.info.deliveryCount : d.deliveryCount;
            const publishMs = d === null ? Math.floor(m.info.timestampNanos / 1_000_000) : d.publishMs;
            reading.delivered(s.stream, publishMs, d === null ? m.info.pending : d.pending);
            got++;
            const receivedAtMs = Date.now();
            inbox.push({
              kind: s.kind,
              stream: s.stream,
              msg: m,
              receivedAtMs,
              ownedUntilMs: receivedAtMs + ownershipMs,
              seq: d === null ? m.info.streamSequence : d.streamSeq,
              redelivered: deliveryCount > 1,
              publishMs,
            });
            st.fetched++;
            if (inboxSize() >= o.nats.fetchBatch || inboxSize() === 1) poke();
          }
        } finally {
          clearTimeout(watchdog);
        }
        // A pull that waited out its expiry with nothing to deliver: this stream is caught up.
        if (got === 0) reading.caughtUp(s.stream);
        poke();
      } catch (e) {
        if (stopping) break;
        log.debug({ err: e, stream: s.stream }, 'fetch failed; retrying');
        set('error');
        st.lastError = e instanceof Error ? e.message : String(e);
        consumer = undefined;
        await sleep(250);
      }
    }
  };

  // ----------------------------------------------------------- processing
  function newBatch(): Batch {
    return {
      nonce: `t-${randomBytes(8).toString('hex')}`,
      byTopic: new Map(),
      records: 0,
      bytes: 0,
      done: [],
      doneSeqs: new Map(),
      copied: [],
      copiedSeqs: new Map(),
      newestPublishMs: 0,
      closedIds: [],
      counts: new Map(),
      deadLetters: [],
    };
  }

  function emit(b: Batch, topic: string, m: KafkaMessage, kind: string, status: string): void {
    push(b.byTopic, topic, m);
    b.records++;
    b.bytes += (m.value as Buffer | null)?.length ?? 0;
    const key = `${kind}\u0000${status}`;
    b.counts.set(key, (b.counts.get(key) ?? 0) + 1);
  }

  function markDone(b: Batch, h: Held, stream: string): void {
    b.done.push(h);
    push(b.doneSeqs, stream, h.seq);
  }

  function deadLetter(b: Batch, item: InboxItem, reason: DeadLetterReason, detail: string): void {
    emit(b, o.topics.deadLetter, deadLetterMessage(item.msg, item.stream, reason, detail, o.maxDeadLetterBytes), 'dead_letter', reason);
    b.deadLetters.push(reason);
    markDone(b, item, item.stream);
  }

  function copyDecision(b: Batch, item: InboxItem, d: DecisionRecord): void {
    emit(
      b,
      o.topics.decisions,
      {
        key: d.sessionId,
        // A view of the received bytes, not a copy: they live until the commit anyway.
        value: Buffer.from(item.msg.data.buffer, item.msg.data.byteOffset, item.msg.data.byteLength),
        headers: { 'vantage-source-stream': item.stream, 'vantage-source-seq': String(item.seq) },
      },
      'decision',
      'copied',
    );
  }

  function emitOutcome(b: Batch, c: ClosedJoin<Held>): void {
    b.closedIds.push(c.record.requestId);
    let value: Buffer;
    const r: OutcomeRecord = c.record;
    try {
      value = encodeSingleObject(OUTCOME_RECORD_CURRENT, r);
    } catch (e) {
      // A value the schema refuses (e.g. a timestamp beyond 2^53) must not
      // stop the pipeline: the join goes to the dead-letter topic as JSON.
      const json = JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
      const first = c.sources[0];
      emit(
        b,
        o.topics.deadLetter,
        {
          key: r.requestId,
          value: Buffer.from(json.slice(0, Math.max(0, o.maxDeadLetterBytes))),
          headers: {
            'vantage-dlq-reason': 'OUTCOME_ENCODE_FAILED',
            'vantage-dlq-detail': e instanceof Error ? e.message.slice(0, 1024) : String(e),
            'vantage-source-stream': first?.stream ?? '',
            'vantage-source-seq': String(first?.seq ?? ''),
          },
        },
        'dead_letter',
        'OUTCOME_ENCODE_FAILED',
      );
      b.deadLetters.push('OUTCOME_ENCODE_FAILED');
      for (const s of c.sources) markDone(b, s.handle, s.stream);
      return;
    }
    emit(b, o.topics.outcomes, { key: r.sessionId ?? r.requestId, value }, 'outcome', r.status);
    if (r.join.closedBy === 'deadline') metrics.joinTimeouts.inc({ status: r.status });
    for (const s of c.sources) markDone(b, s.handle, s.stream);
  }

  /** Decode, dead-letter or join one message. `seenAs` is what the progress log says about a redelivery. */
  function processOne(b: Batch, item: InboxItem, seenAs: 'decision' | undefined): void {
    const { msg, stream, seq } = item;
    if (item.publishMs > b.newestPublishMs) b.newestPublishMs = item.publishMs;
    if (msg.data.length > o.maxMessageBytes) {
      deadLetter(b, item, 'OVERSIZED', `${msg.data.length} bytes > ${o.maxMessageBytes}`);
      return;
    }
    if (item.kind === 'decision') {
      const r = decodeSingleObject(msg.data, DECISION_REGISTRY);
      if (!r.ok) {
        deadLetter(b, item, r.code, r.reason);
        return;
      }
      const d = r.value;
      if (d.requestId === '' || d.sessionId === '') {
        deadLetter(b, item, 'DECISION_INVALID', 'requestId and sessionId must be non-empty');
        return;
      }
      const h: Held = item;
      // Only a redelivery can be a message a join already holds (first deliveries skip the lookup).
      if (item.redelivered && joiner.rehandle(d.requestId, stream, seq, h)) return; // redelivery of a message we hold
      const src: Source<Held> = { stream, seq, part: 'decision', handle: h };
      const res = joiner.addDecision(d, src, item.receivedAtMs, item.publishMs);
      if (seenAs !== 'decision') copyDecision(b, item, d);
      if (res === 'late') {
        // Its request's outcome is already written: keep the decision (copied
        // above) and record why it joined nothing.
        deadLetter(b, item, 'JOIN_LATE', `decision for request ${d.requestId} arrived after its outcome was written`);
        return;
      }
      if (seenAs !== 'decision') {
        b.copied.push(h);
        push(b.copiedSeqs, stream, seq);
      }
      return;
    }
    const pool = msg.subject.startsWith(lifecyclePrefix) ? msg.subject.slice(lifecyclePrefix.length) : undefined;
    const r = decodeLifecycle(msg.data, pool);
    if (!r.ok) {
      deadLetter(b, item, r.code, r.reason);
      return;
    }
    const ev: LifecycleEventInput = r.value.event;
    const h: Held = item;
    if (item.redelivered && joiner.rehandle(ev.requestId, stream, seq, h)) return;
    const res = joiner.addEvent(ev, { stream, seq, part: ev.kind as SourcePart, handle: h }, item.receivedAtMs, r.value, item.publishMs);
    if (res === 'late') deadLetter(b, item, 'JOIN_LATE', `${ev.kind} event for request ${ev.requestId} arrived after its outcome was written`);
  }

  function owned(b: Batch, nowMs: number): boolean {
    // The lease first: a replica that may no longer be the leader writes nothing.
    if (!leaseValid(nowMs)) return false;
    for (const h of b.done) if (h.ownedUntilMs <= nowMs) return false;
    for (const h of b.copied) if (h.ownedUntilMs <= nowMs) return false;
    return true;
  }

  /**
   * One transaction for the whole batch: the records plus the progress
   * record. Returns false when ownership of a source was lost (the caller
   * resets). An error of any kind leads to a fresh producer (which resolves
   * the old transaction) and a sync, after which the progress log says
   * whether the batch committed: this is how an ambiguous commit is settled.
   */
  async function commit(b: Batch): Promise<boolean> {
    const prog: ProgressRecord = progressRecord(transactionalId, b.nonce, Date.now(), b.doneSeqs, b.copiedSeqs);
    const requests = sendRequests(b.byTopic, { topic: o.topics.progress, messages: [{ partition: 0, value: JSON.stringify(prog) } as KafkaMessage] });
    for (let attempt = 0; ; attempt++) {
      if (!owned(b, Date.now())) return false;
      const stop = metrics.produceSeconds.startTimer();
      try {
        const txn = await prod().raw.transaction();
        try {
          // Several produce requests, one transaction: all of them commit or none.
          for (const topicMessages of requests) await txn.sendBatch({ topicMessages, acks: -1 });
          if (!owned(b, Date.now())) {
            await txn.abort();
            metrics.transactions.inc({ result: 'aborted' });
            return false;
          }
          await txn.commit();
        } catch (e) {
          await txn.abort().catch(() => {});
          throw e;
        }
        stop();
        metrics.transactions.inc({ result: 'committed' });
        committed.add(prog, Date.now());
        setKafka(true);
        return true;
      } catch (e) {
        metrics.transactions.inc({ result: 'failed' });
        setKafka(false, e);
        if (giveUp) throw e;
        log.warn({ err: e, attempt, records: b.records }, 'kafka transaction failed; re-creating producer and checking the progress log');
        await sleep(Math.min(5000, 100 * 2 ** Math.min(attempt, 6)));
        await recreateProducer();
        await sync();
        if (committed.has(b.nonce)) {
          log.info({ nonce: b.nonce }, 'transaction had committed before the failure was reported');
          setKafka(true);
          return true;
        }
      }
    }
  }

  /** Lost ownership: forget all in-memory work; JetStream redelivers it and the progress log dedupes. */
  function reset(b: Batch): void {
    metrics.resets.inc();
    joiner.forgetClosed(b.closedIds);
    if (stopping) {
      // The term is ending (lost lease): everything held goes back at once.
      for (const h of joiner.heldHandles()) abandoned.push(h);
      abandoned.push(...b.done);
    }
    log.warn({ pendingJoins: joiner.pending }, 'ownership of held messages lapsed; dropping in-memory joins for redelivery');
    joiner.clear();
  }

  /**
   * Take up to one batch from the inbox and turn it into records: decode,
   * dead-letter, dedupe redeliveries, join, close due joins. Synchronous
   * except for a sync when a redelivered message is unknown to the progress
   * log (the caller has no transaction in flight then).
   */
  async function buildBatch(): Promise<Batch> {
    const b = newBatch();
    const take = Math.min(inboxSize(), o.maxBatchRecords);
    const items = inbox.slice(inboxHead, inboxHead + take);
    inboxHead += take;

    // Redeliveries first: anything not held in memory and not known as
    // committed may have been written by a replica that died before acking.
    let redeliveries = 0;
    let needSync = false;
    for (const it of items) {
      if (!it.redelivered) continue;
      redeliveries++;
      if (!needSync && committed.lookup(it.stream, it.seq) !== 'done') needSync = true;
    }
    if (redeliveries > 0) {
      metrics.redeliveries.inc(redeliveries);
      if (needSync) await sync();
    }
    const skip: Held[] = [];
    const startedMs = Date.now();
    let used = 0;
    let decisionsIn = 0;
    let expired = 0;
    for (const it of items) {
      // Byte cap: the rest stays in the inbox for the next transaction.
      if (b.bytes >= o.maxBatchBytes) break;
      used++;
      if (it.kind === 'decision') decisionsIn++;
      // Held so long (Kafka down) that the server may have redelivered it:
      // not ours to write any more. Dropped unacked; its redelivery decides.
      if (it.receivedAtMs + ownershipMs <= startedMs) {
        expired++;
        continue;
      }
      let seenAs: 'decision' | undefined;
      if (it.redelivered) {
        const s = committed.lookup(it.stream, it.seq);
        if (s === 'done') {
          metrics.redeliveriesSkipped.inc({ found: 'done' });
          skip.push(it);
          continue;
        }
        if (s === 'decision') {
          metrics.redeliveriesSkipped.inc({ found: 'decision_copy' });
          seenAs = 'decision';
        }
      }
      processOne(b, it, seenAs);
    }
    if (decisionsIn > 0) metrics.recordsIn.inc({ kind: 'decision' }, decisionsIn);
    if (used > decisionsIn) metrics.recordsIn.inc({ kind: 'lifecycle' }, used - decisionsIn);
    if (expired > 0) metrics.expiredDropped.inc(expired);
    inboxHead -= items.length - used;
    if (inboxHead > 65_536 && inboxHead * 2 > inbox.length) {
      inbox.splice(0, inboxHead);
      inboxHead = 0;
    }
    metrics.inbox.set(inboxSize());
    // Already in Kafka: ack now, nothing to write.
    for (const h of skip) h.msg.ack();

    const now = Date.now();
    // Closed joins are bounded per batch too; the rest close in the next one.
    const room = (): number => (b.bytes >= o.maxBatchBytes ? 0 : Math.max(1, o.maxBatchRecords - b.records));
    for (const c of joiner.takeComplete(now, room())) emitOutcome(b, c);
    for (const c of joiner.takeExpired(now, room(), readUpTo(now))) emitOutcome(b, c);
    metrics.pendingJoins.set(joiner.pending);
    metrics.joinsHeld.set(joiner.held);
    return b;
  }

  /** After a commit: acknowledge the batch's finished sources and count. */
  function finish(b: Batch): void {
    lastCommitMs = Date.now();
    for (const h of b.done) h.msg.ack();
    metrics.batchRecords.observe(b.records);
    for (const [key, n] of b.counts) {
      const i = key.indexOf('\u0000');
      metrics.recordsOut.inc({ kind: key.slice(0, i), status: key.slice(i + 1) }, n);
    }
    for (const r of b.deadLetters) metrics.deadLetters.inc({ reason: r });
    if (b.newestPublishMs > 0) metrics.lagSeconds.set((Date.now() - b.newestPublishMs) / 1000);
    committed.prune(Date.now());
  }

  /**
   * The batch loop is a two-stage pipeline: while batch k's transaction is
   * in flight (Kafka round trips, broker work), batch k+1 is decoded and
   * joined. Order and the exactly-once rules are unchanged:
   *  - at most one transaction is open (batch k+1 is committed only after k
   *    settled), so the progress log and the commits stay in order;
   *  - a batch is acked only after its own commit;
   *  - a batch that needs a sync (unknown redelivery) waits for the
   *    transaction in flight first, so the sync and its lookups see it;
   *  - if batch k lost ownership, everything in memory is dropped (reset) and
   *    batch k+1, built on that memory, is abandoned with it, unacked: its
   *    messages are redelivered like the rest.
   */
  async function batchLoop(): Promise<void> {
    let inFlight: { b: Batch; result: Promise<boolean> } | null = null;
    /** Waits for the transaction in flight; false when the loop must stop (gave up at shutdown). */
    const settle = async (): Promise<{ ok: boolean; lost: boolean }> => {
      if (inFlight === null) return { ok: true, lost: false };
      const { b, result } = inFlight;
      inFlight = null;
      let committedOk: boolean;
      try {
        committedOk = await result;
      } catch (e) {
        log.error({ err: e }, 'giving up on the current batch (shutdown or lost lease); its messages are released unacked');
        abandoned.push(...b.done);
        return { ok: false, lost: false };
      }
      if (!committedOk) {
        reset(b);
        return { ok: true, lost: true };
      }
      finish(b);
      return { ok: true, lost: false };
    };

    while (!stopping) {
      const now0 = Date.now();
      const due = joiner.nextDueMs(now0, readUpTo(now0));
      if (inboxSize() === 0 && (due === undefined || due > now0)) {
        if (inFlight !== null) {
          // Nothing to overlap with: finish the transaction in flight first.
          stage = 'commit';
          if (!(await settle()).ok) return;
          stage = 'idle';
          continue;
        }
        await new Promise<void>((resolve) => {
          const t = setTimeout(() => {
            wake = null;
            resolve();
          }, due === undefined ? 250 : Math.max(1, due - now0));
          wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        if (stopping) break;
      }
      if (o.lingerMs > 0 && inFlight === null && inboxSize() > 0 && inboxSize() < o.nats.fetchBatch) await sleep(o.lingerMs);
      if (stopping) break;

      // A redelivered message may need the progress log up to date: no
      // transaction may be in flight while it is looked up.
      if (inFlight !== null && hasRedeliveryAhead()) {
        stage = 'commit';
        if (!(await settle()).ok) return;
      }
      stage = 'process';
      const b = await buildBatch();
      if (inFlight !== null) {
        stage = 'commit';
        const s = await settle();
        if (!s.ok) {
          joiner.forgetClosed(b.closedIds);
          abandoned.push(...b.done);
          return;
        }
        if (s.lost) {
          // Built on the memory that reset() dropped: abandoned, unacked.
          joiner.forgetClosed(b.closedIds);
          if (stopping) abandoned.push(...b.done);
          continue;
        }
      }
      if (b.records === 0) {
        stage = 'idle';
        continue;
      }
      stage = 'commit';
      inFlight = { b, result: commit(b) };
      // A rejection is handled by settle(); never leave it unobserved meanwhile.
      inFlight.result.catch(() => {});
    }
    // Stopping: the transaction in flight still commits (or gives up near the deadline).
    await settle();
  }

  /** Whether the next batch holds a redelivered message. */
  function hasRedeliveryAhead(): boolean {
    const end = Math.min(inbox.length, inboxHead + o.maxBatchRecords);
    for (let i = inboxHead; i < end; i++) if ((inbox[i] as InboxItem).redelivered) return true;
    return false;
  }

  // Reconnects restart the pruning clock (see CommittedSet).
  void (async () => {
    for await (const s of ctx.nc.status()) if (s.type === 'reconnect') committed.noteReconnect(Date.now());
  })().catch(() => {});

  // ------------------------------------------------------------ leadership
  // Active–standby (README, "Replicas"): a join needs both halves of a request
  // in one process, so exactly one replica consumes. The lease is a key in a
  // JetStream KV bucket whose TTL (max_age) is leaseMs: created if absent,
  // renewed by the holder with a revision-checked update every renewMs. A
  // killed leader stops renewing and its key expires; a standby polling with
  // create-if-absent then takes over. Kafka fencing (one transactional id for
  // all replicas) makes sure a stale leader can never commit after that.
  const kv = await retrying('leader KV bucket', () => new Kvm(ctx.nc).create(o.leader.bucket, { ttl: o.leader.leaseMs, history: 1 }));
  const leaseKey = o.leader.key === '' ? transactionalId.replace(/[^-/_=.a-zA-Z0-9]/g, '_') : o.leader.key;
  const holder = `${ctx.instanceId}-${randomBytes(4).toString('hex')}`;
  let role: 'leader' | 'standby' = 'standby';
  let leaseRev = 0;
  let lastRenewOkMs = 0;
  /** The current term lost the lease (set once per term). */
  let lost = false;
  let renewing: Promise<boolean> | null = null;
  metrics.leader.set(0);

  /**
   * Whether this replica may still act as leader: it holds the lease and its
   * last successful renewal is recent enough that the key cannot have expired
   * (expiry is leaseMs after the last write; one renew period of margin).
   */
  function leaseValid(nowMs: number): boolean {
    return role === 'leader' && !lost && nowMs - lastRenewOkMs < o.leader.leaseMs - o.leader.renewMs;
  }

  /** Ends the current term after a failure it cannot recover from by itself (the lease is released; the next term starts afresh). */
  let abortTerm: ((e: Error) => void) | null = null;
  function failTerm(why: string): void {
    if (role !== 'leader' || stopping) return;
    log.warn({ why }, 'leader term failing; starting afresh');
    stopping = true;
    giveUp = true;
    poke();
    abortTerm?.(new Error(why));
  }

  function loseLeadership(why: string, err?: unknown): void {
    if (lost || role !== 'leader') return;
    lost = true;
    stopping = true;
    giveUp = true;
    log.warn({ err, why, holder, key: leaseKey }, 'leadership lost: stop consuming, release open work unacked');
    poke();
  }

  /** One revision-checked renewal (concurrent callers share it). False when the lease is not (or no longer) held. */
  function renewLease(): Promise<boolean> {
    if (renewing !== null) return renewing;
    renewing = (async () => {
      if (role !== 'leader' || lost) return false;
      try {
        leaseRev = await kv.update(leaseKey, holder, leaseRev);
        lastRenewOkMs = Date.now();
        return true;
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        // The server says the key moved on (another holder, or it expired): lost now.
        // Anything else (timeout, disconnected) is lost once the lease may have lapsed.
        if (/wrong last sequence/i.test(msg)) loseLeadership('lease revision changed (taken over or expired)', e);
        else if (!leaseValid(Date.now())) loseLeadership('lease not renewed in time', e);
        else log.warn({ err: e }, 'lease renewal failed; retrying');
        return false;
      }
    })().finally(() => {
      renewing = null;
    });
    return renewing;
  }

  async function tryAcquire(): Promise<boolean> {
    try {
      leaseRev = await kv.create(leaseKey, holder);
      lastRenewOkMs = Date.now();
      return true;
    } catch {
      // Still ours (a term ended on a NATS outage while the key outlived it)? Then take it back.
      const e = await kv.get(leaseKey).catch(() => null);
      if (e === null || e.operation !== 'PUT' || e.string() !== holder) return false;
      try {
        leaseRev = await kv.update(leaseKey, holder, e.revision);
        lastRenewOkMs = Date.now();
        return true;
      } catch {
        return false;
      }
    }
  }

  /** Nak everything this term holds (inbox, open joins, abandoned batches) so the next leader gets it at once. */
  function releaseHeld(): number {
    let naked = 0;
    for (let i = inboxHead; i < inbox.length; i++) {
      inbox[i]?.msg.nak();
      naked++;
    }
    inbox.length = 0;
    inboxHead = 0;
    naked += nakOpenJoins(joiner);
    for (const h of abandoned) h.msg.nak();
    naked += abandoned.length;
    abandoned.length = 0;
    metrics.inbox.set(0);
    metrics.pendingJoins.set(0);
    metrics.joinsHeld.set(0);
    return naked;
  }

  /** One leader term: fence, read the progress log, consume until shutdown or the lease is lost. */
  async function term(): Promise<void> {
    lost = false;
    stopping = false;
    giveUp = false;
    termNo++;
    role = 'leader';
    metrics.leader.set(1);
    metrics.leadershipChanges.inc({ to: 'leader' });
    log.info({ role, holder, key: leaseKey, transactionalId }, 'leader: lease acquired; fencing the previous leader and reading the progress log');
    const renewTimer = setInterval(() => void renewLease(), o.leader.renewMs);
    currentFollower = null;
    const aborted = new Promise<never>((_, reject) => (abortTerm = reject));
    aborted.catch(() => {});
    // Setting up (fence, follower, sync) must not hang on a broker restart in the middle of it.
    const setupTimer = setTimeout(() => failTerm('leader term set-up took longer than 60 s'), 60_000);
    try {
      joiner = newJoiner();
      committed = new CommittedSet(2 * ackWaitMs);
      reading.clear();
      // InitProducerId with the shared transactional id: the previous leader's
      // producer is fenced and its open transaction aborted (or completed) here.
      await Promise.race([recreateProducer(), aborted]);
      // Then the previous leaders' committed progress, before any message is
      // taken: the follower starts at this moment's ack floors, and the
      // sentinel sync waits until every transaction committed before it is read.
      await Promise.race([startFollower(), aborted]);
      await Promise.race([sync(), aborted]);
      clearTimeout(setupTimer);
      log.info({ committedTransactions: committed.size }, 'progress log read back; consuming');
      lastCommitMs = Date.now();
      if (!stopping) await Promise.all([...streams.map((s) => fetchLoop(s)), batchLoop()]);
    } catch (e) {
      if (!lost && !shuttingDown) log.error({ err: e }, 'leader term failed; releasing the lease');
    } finally {
      clearInterval(renewTimer);
      clearTimeout(setupTimer);
      abortTerm = null;
      stopping = true;
      const naked = releaseHeld();
      await ctx.nc.flush().catch(() => {});
      await (currentFollower as KafkaConsumer | null)?.disconnect().catch(() => {});
      currentFollower = null;
      await producer?.disconnect().catch(() => {});
      producer = null;
      // Hand the lease over at once on shutdown or failure (a standby need not wait for the TTL).
      if (!lost) await kv.delete(leaseKey, { previousSeq: leaseRev }).catch(() => {});
      role = 'standby';
      metrics.leader.set(0);
      metrics.leadershipChanges.inc({ to: 'standby' });
      log.info({ role, naked, lost, holder }, lost ? 'standby: leadership lost; held messages released for redelivery' : 'standby: leadership released; held messages released for redelivery');
    }
  }

  const leadership = (async () => {
    let waiting = false;
    while (!shuttingDown) {
      if (await tryAcquire()) {
        waiting = false;
        await term();
        if (shuttingDown) break;
      } else if (!waiting) {
        waiting = true;
        log.info({ role, holder, key: leaseKey }, 'standby: another replica holds the leadership lease');
      }
      await sleep(o.leader.renewMs);
    }
  })();
  const stopped = leadership.then(() => undefined);

  const jsm = await jetstreamManager(ctx.nc);
  const lagTimer = setInterval(() => {
    for (const s of streams) {
      jsm.consumers
        .info(s.stream, o.nats.durable)
        .then((ci) => metrics.consumerPending.set({ stream: s.stream }, ci.num_pending))
        .catch(() => {});
    }
  }, 5_000);
  lagTimer.unref();
  // A stall report: when work is waiting and nothing has committed for a
  // while, say where the pipeline is (an operator's first question).
  const stallTimer = setInterval(() => {
    if (role === 'leader' && Date.now() - lastCommitMs > 10_000) {
      log.warn({ stage, inbox: inboxSize(), pendingJoins: joiner.pending, sinceCommitMs: Date.now() - lastCommitMs, kafkaHealthy, fetch: fetchState }, 'outcome pipeline idle or stalled');
    }
  }, 10_000);
  stallTimer.unref();

  // An idle service would not notice Kafka gone: probe it (a cluster metadata request, bounded in
  // time; it reads no partition, so it cannot disturb a topic whose leader is still being elected),
  // one probe at a time. Transactions report their own failures and successes too.
  let probing = false;
  const kafkaProbe = setInterval(() => {
    if (probing) return;
    probing = true;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`kafka probe: no answer in ${o.health.kafkaProbeMs} ms`)), o.health.kafkaProbeMs)));
    // The bound marks Kafka failing at once; the next probe starts only once this call has settled
    // (kafkajs retries inside it), whose own answer then counts.
    bound.catch((e: unknown) => setKafka(false, e));
    kafka.admin
      .describeCluster()
      .then(
        () => setKafka(true),
        (e: unknown) => setKafka(false, e),
      )
      .finally(() => {
        clearTimeout(timer);
        probing = false;
      });
  }, o.health.kafkaProbeMs);
  kafkaProbe.unref();
  ctx.addHealthCheck('kafka', () => kafkaClock.health(kafkaHealthy ? {} : { error: lastKafkaError }));
  ctx.addHealthCheck('pipeline', () => ({
    ok: natsConnected(ctx.nc),
    details: { role, holder, leaseKey, pendingJoins: joiner.pending, inbox: inboxSize(), committedTransactions: committed.size },
  }));

  // Shutdown: stop intake; let the batch in flight commit (or give up near
  // the deadline); then nak what is held so a replica or the next start takes
  // it at once instead of after ack_wait, and hand the lease over. Nothing
  // unjoined is written early: an `incomplete` record for a request whose
  // events are merely in flight would be a wrong fact.
  ctx.shutdown.register('outcome-intake', 'intake', () => {
    shuttingDown = true;
    stopping = true;
    poke();
  });
  ctx.shutdown.register('outcome-flush', 'flush', async () => {
    const deadline = setTimeout(() => (giveUp = true), Math.max(0, cfg.shutdown.deadlineMs - 1_500));
    try {
      await stopped;
    } finally {
      clearTimeout(deadline);
    }
    clearInterval(lagTimer);
    clearInterval(stallTimer);
    clearInterval(kafkaProbe);
    log.info('outcome pipeline stopped');
  });

  log.info({ transactionalId, leaseBucket: o.leader.bucket, leaseKey, holder, streams: streams.map((s) => s.stream), topics: o.topics }, 'outcome service running');
  return {
    metrics,
    get joiner() {
      return joiner;
    },
    transactionalId,
    get role() {
      return role;
    },
    stopped,
  };
}

/**
 * Most records per kafkajs `sendBatch` call. kafkajs groups a call's records
 * per partition by copying the partition's array for every record, so its
 * cost grows with the square of the records per partition in one call;
 * smaller calls inside the same transaction keep it down, for one produce
 * round trip each.
 */
export const SEND_CHUNK_RECORDS = 1000;

/** The batch's records as produce requests of at most SEND_CHUNK_RECORDS; `last` (the progress record) goes in the final one. */
export function sendRequests(byTopic: ReadonlyMap<string, KafkaMessage[]>, last: { topic: string; messages: KafkaMessage[] }): { topic: string; messages: KafkaMessage[] }[][] {
  const out: { topic: string; messages: KafkaMessage[] }[][] = [];
  let cur: { topic: string; messages: KafkaMessage[] }[] = [];
  let n = 0;
  for (const [topic, messages] of byTopic) {
    for (let i = 0; i < messages.length; ) {
      if (n === SEND_CHUNK_RECORDS) {
        out.push(cur);
        cur = [];
        n = 0;
      }
      const take = Math.min(messages.length - i, SEND_CHUNK_RECORDS - n);
      cur.push({ topic, messages: i === 0 && take === messages.length ? messages : messages.slice(i, i + take) });
      n += take;
      i += take;
    }
  }
  cur.push(last);
  out.push(cur);
  return out;
}

function nakOpenJoins(joiner: Joiner<Held>): number {
  let n = 0;
  for (const h of joiner.heldHandles()) {
    h.msg.nak();
    n++;
  }
  joiner.clear();
  return n;
}
