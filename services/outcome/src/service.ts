/**
 * The outcome service: JetStream (decisions, lifecycle events) → join →
 * Kafka (decisions, outcomes, dead letters), exactly once. README.md explains
 * the design. This file sets up streams, consumers and topics, runs the
 * leadership loop (one `Term` per lease held, `term.ts`), and reports health.
 *
 *   intake (one pull loop per stream) ──▶ inbox (bounded) ──▶ pipeline:
 *       batch: decode / dead-letter / dedupe ─▶ Joiner ─▶ one Kafka transaction
 *       (records + one progress record) ─▶ commit ─▶ ack the sources
 */
import { AckPolicy, DeliverPolicy, DiscardPolicy, jetstreamManager } from '@nats-io/jetstream';
import { ensureDurableConsumer, ensureStream, natsConnected, OutageClock, RateLimitedLog, type ServiceContext } from '@vantage/runtime';
import { checkOutcomeConfig, type OutcomeConfig, type OutcomeConfigShape } from './config';
import { JetStreamIntake, type Kind } from './intake';
import { setTimeout as sleep } from 'node:timers/promises';
import { LeadershipLease } from './lease';
import { outcomeMetrics } from './metrics';
import { Term } from './term';
import { KafkaSession } from './transactions';

type OutcomeContext = ServiceContext<OutcomeConfigShape, true>;

export interface OutcomeService {
  /** Active–standby: only the holder of the leadership lease consumes (README, "Replicas"). */
  readonly role: 'leader' | 'standby';
}

export async function startOutcome(ctx: OutcomeContext): Promise<OutcomeService> {
  const cfg: OutcomeConfig = ctx.config;
  checkOutcomeConfig(cfg);
  const o = cfg.outcome;
  const log = ctx.log.child({ component: 'outcome' });
  const kafka = ctx.kafka;
  const metrics = outcomeMetrics(ctx.registry);
  // One transactional id for every replica: a new leader's InitProducerId fences the old one.
  const transactionalId = o.transactionalId === '' ? `${cfg.service}-txn` : o.transactionalId;
  const streams: { kind: Kind; stream: string; subject: string }[] = [
    { kind: 'decision', stream: o.nats.decisionsStream, subject: o.nats.decisionsSubject },
    { kind: 'lifecycle', stream: o.nats.lifecycleStream, subject: o.nats.lifecycleSubject },
  ];
  const streamNames = streams.map((s) => s.stream);

  // ---------------------------------------------------------------- set-up
  for (const s of streams) {
    // The durable buffer that lets Kafka be down for as long as max_age (README, "What it owns").
    const discard = o.nats.streamDiscard === 'new' ? DiscardPolicy.New : DiscardPolicy.Old;
    await ensureStream(ctx.nc, { name: s.stream, subjects: [s.subject], max_age: o.nats.streamMaxAgeMs * 1e6, max_bytes: o.nats.streamMaxBytes, discard, num_replicas: o.nats.streamReplicas }, log);
    const consumer = { durable_name: o.nats.durable, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: o.nats.ackWaitMs * 1e6, max_ack_pending: o.nats.maxAckPending, max_deliver: -1 };
    await ensureDurableConsumer(ctx.nc, s.stream, consumer, log);
  }
  const config = { 'retention.ms': String(o.topics.retentionMs), 'max.message.bytes': String(o.topics.maxMessageBytes), 'min.insync.replicas': String(o.topics.minInsyncReplicas) };
  const topic = (name: string, partitions = o.topics.partitions) => ({ topic: name, partitions, replicationFactor: o.topics.replicationFactor, config });
  // The progress topic has one partition: the follower's "read up to my sentinel" is only a total order within a partition.
  await kafka.ensureTopics([topic(o.topics.decisions), topic(o.topics.outcomes), topic(o.topics.deadLetter), topic(o.topics.progress, 1)]);

  /** Kafka reachability for /healthz: unhealthy once transactions or the probe have failed for health.kafkaDownMs. */
  const kafkaClock = new OutageClock(o.health.kafkaDownMs);
  const kafkaHealth = { ok: () => kafkaClock.ok(), fail: (err: unknown) => kafkaClock.fail(err instanceof Error ? err.message : String(err)) };
  const refusals = new RateLimitedLog(log);
  const intake = new JetStreamIntake(ctx.nc, streams, o, metrics, log);
  const lease = await LeadershipLease.open(ctx.nc, o.leader, transactionalId, ctx.instanceId, log);
  const { holder, key: leaseKey } = lease;

  // ------------------------------------------------------------ leadership
  let term: Term | null = null; // null while standby
  let shuttingDown = false;
  metrics.leader.set(0);

  const runTerm = async (): Promise<void> => {
    const t = new Term({ o, transactionalId, streams: streamNames, lease, kafka: new KafkaSession({ kafka, nc: ctx.nc, o, transactionalId, streams: streamNames, metrics, log, refusals }), intake, metrics, log, kafkaHealth });
    term = t;
    if (shuttingDown) t.stop();
    metrics.leader.set(1);
    metrics.leadershipChanges.inc({ to: 'leader' });
    log.info({ role: 'leader', holder, key: leaseKey, transactionalId }, 'leader: lease acquired; fencing the previous leader and reading the progress log');
    const { cause, naked } = await t.run();
    term = null;
    metrics.leader.set(0);
    metrics.leadershipChanges.inc({ to: 'standby' });
    const lost = cause === 'lost';
    log.info({ role: 'standby', naked, lost, holder }, `standby: leadership ${lost ? 'lost' : 'released'}; held messages released for redelivery`);
  };

  const stopped = (async () => {
    let waiting = false;
    while (!shuttingDown) {
      if (await lease.acquire()) {
        waiting = false;
        await runTerm();
        if (shuttingDown) break;
      } else if (!waiting) {
        waiting = true;
        log.info({ role: 'standby', holder, key: leaseKey }, 'standby: another replica holds the leadership lease');
      }
      await sleep(o.leader.renewMs);
    }
  })();

  // Reconnects restart the pruning clock (see CommittedSet).
  void (async () => {
    for await (const s of ctx.nc.status()) if (s.type === 'reconnect') (term as Term | null)?.committed.noteReconnect(Date.now());
  })().catch(() => {});

  const jsm = await jetstreamManager(ctx.nc);
  const lagTimer = setInterval(() => {
    for (const s of streamNames) jsm.consumers.info(s, o.nats.durable).then((ci) => metrics.consumerPending.set({ stream: s }, ci.num_pending), () => {});
  }, 5_000);
  lagTimer.unref();
  // A stall report: when work is waiting and nothing has committed for a
  // while, say where the pipeline is (an operator's first question).
  const stallTimer = setInterval(() => {
    const t = term;
    if (t !== null && Date.now() - t.lastCommitMs > 10_000) {
      log.warn({ stage: t.stage, inbox: t.inboxSize(), pendingJoins: t.joiner.pending, sinceCommitMs: Date.now() - t.lastCommitMs, kafkaHealthy: !kafkaClock.failing, fetch: intake.fetchState }, 'outcome pipeline idle or stalled');
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
    // The bound marks Kafka failing at once; the next probe starts only once this call has settled
    // (kafkajs retries inside it), whose own answer then counts.
    const bound = setTimeout(() => kafkaHealth.fail(new Error(`kafka probe: no answer in ${o.health.kafkaProbeMs} ms`)), o.health.kafkaProbeMs);
    kafka.admin
      .describeCluster()
      .then(() => kafkaHealth.ok(), kafkaHealth.fail)
      .finally(() => {
        probing = false;
        clearTimeout(bound);
      });
  }, o.health.kafkaProbeMs);
  kafkaProbe.unref();
  ctx.addHealthCheck('kafka', () => kafkaClock.health(kafkaClock.failing ? { error: kafkaClock.reason } : {}));
  ctx.addHealthCheck('pipeline', () => ({
    ok: natsConnected(ctx.nc),
    details: { role: term === null ? 'standby' : 'leader', holder, leaseKey, pendingJoins: term?.joiner.pending ?? 0, inbox: term?.inboxSize() ?? 0, committedTransactions: term?.committed.size ?? 0 },
  }));

  // Shutdown (README, "Exactly once"): nothing unjoined is written early, since an `incomplete`
  // record for a request whose events are merely in flight would be a wrong fact.
  ctx.shutdown.register('outcome-intake', 'intake', () => {
    shuttingDown = true;
    term?.stop();
  });
  ctx.shutdown.register('outcome-flush', 'flush', async () => {
    const deadline = setTimeout(() => {
      if (term !== null) term.giveUp = true;
    }, Math.max(0, cfg.shutdown.deadlineMs - 1_500));
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

  log.info({ transactionalId, leaseBucket: o.leader.bucket, leaseKey, holder, streams: streamNames, topics: o.topics }, 'outcome service running');
  return {
    get role() {
      return term === null ? 'standby' : 'leader';
    },
  };
}
