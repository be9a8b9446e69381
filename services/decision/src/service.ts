/**
 * The decision service: wires the route endpoint, the parameter-set file, the
 * lifecycle and worker-registration subscriptions, the decision-record
 * publisher, metrics and the shutdown sequence.
 */
import { lifecycleEventCodec, lifecycleSubject, workerRegistrationCodec, workersSubject, type MessageCodec } from '@vantage/protocol';
import { createResponder, ensureStream, Outbox, RateLimitedLog, Requester, VantageError, type Endpoint, type Responder, type ServiceContext } from '@vantage/runtime';
import type { Subscription } from '@nats-io/transport-node';
import type { DecisionSettings } from './config';
import { endsInFlight, InFlight } from './inflight';
import { EndpointTable } from './endpoints';
import { decisionMetrics, type DecisionMetrics } from './metrics';
import { ParameterFile } from './params';
import { LocalPools } from './pools';
import { RecordPublisher } from './publisher';
import { Router } from './route';

const DECISION_VERSION = '0.1.0';

export interface DecisionHandle {
  readonly router: Router;
  readonly params: ParameterFile;
  readonly inFlight: InFlight;
  readonly publisher: RecordPublisher | null;
  readonly metrics: DecisionMetrics;
  /** The route endpoint and the responder serving it ($SRV name `vantage-decision`). */
  readonly server: Endpoint;
  readonly responder: Responder;
  /** The pools this process holds (`source: "local"`). */
  readonly pools: LocalPools;
}

export async function startDecision(ctx: ServiceContext<DecisionSettings, false>): Promise<DecisionHandle> {
  const { config, nc, log, registry, shutdown } = ctx;
  const cfg = config.decision;
  if (cfg.pools.efficient.pool === cfg.pools.capable.pool) {
    throw new VantageError('CONFIG_INVALID', `decision.pools: efficient and capable must be different pools (both "${cfg.pools.efficient.pool}")`);
  }
  const metrics = decisionMetrics(registry);

  const params = await ParameterFile.open({
    path: cfg.parameterSetFile,
    log,
    onActive: (set, prev) => {
      if (prev !== null) metrics.parameterSetInfo.remove({ version: prev.version, variant: prev.variant });
      metrics.parameterSetInfo.set({ version: set.version, variant: set.variant }, 1);
    },
    onReload: (outcome) => metrics.parameterReloads.inc({ outcome }),
  });
  for (const role of ['efficient', 'capable'] as const) {
    const want = params.current().models[role].name;
    const have = cfg.pools[role].model;
    // Not fatal: a later reload may fix it, and until then every decision says why it fell back.
    if (want !== have) log.warn({ role, parameterSetModel: want, configuredModel: have }, 'parameter set and configuration name different models: the rule will fall back (invalid observation)');
  }
  let poll: NodeJS.Timeout | null = null;
  if (cfg.parameterSetFile !== '' && cfg.reloadPollMs > 0) {
    poll = setInterval(() => void params.reload(), cfg.reloadPollMs);
    poll.unref();
  }
  const onHup = (): void => {
    log.info({ path: cfg.parameterSetFile }, 'SIGHUP: reloading the parameter set');
    void params.reload(true);
  };
  if (cfg.reloadOnSighup) process.on('SIGHUP', onHup);

  // Local in-flight accounting, released by lifecycle events or by timeout.
  const rejections = new RateLimitedLog(log, { intervalMs: cfg.rejectionLogIntervalMs });
  for (const limit of ['in_flight_entries', 'endpoints_per_pool']) metrics.limitHits.inc({ limit }, 0);
  const inFlight = new InFlight(
    cfg.inFlightTimeoutMs,
    (model, n) => (metrics.inFlight.series(model).n = n),
    cfg.inFlightMaxEntries,
    (e) => {
      metrics.limitHits.inc({ limit: 'in_flight_entries' });
      rejections.warn('in_flight_entries', { model: e.model, pool: e.pool, maxEntries: cfg.inFlightMaxEntries }, 'in-flight table full: oldest reservation released early');
    },
  );
  for (const role of ['efficient', 'capable'] as const) metrics.inFlight.series(cfg.pools[role].model).n = 0;
  const sweep = setInterval(() => {
    for (const e of inFlight.expire(Date.now())) {
      metrics.inFlightExpired.inc({ model: e.model });
      log.warn({ model: e.model, pool: e.pool, timeoutMs: cfg.inFlightTimeoutMs }, 'reservation released by timeout: no lifecycle event');
    }
  }, Math.min(1000, cfg.inFlightTimeoutMs));
  sweep.unref();

  const subs: Subscription[] = [];
  const endpoints = new EndpointTable({ schemes: cfg.endpoints.schemes, allow: cfg.endpoints.allow }, cfg.endpoints.maxPerPool);
  /** Counted once per message: received = accepted + rejected (per source). */
  const reject = (source: string, pool: string, reason: string, detail: string): void => {
    metrics.rejected.inc({ source, reason });
    rejections.warn(`${source}:${reason}`, { source, pool, reason, detail: detail.slice(0, 256) }, 'message rejected');
  };
  /** A pool's subscription: each message counted, decoded and checked to be this pool's (another pool's must not touch its reservations or endpoints). */
  const subscribe = <T extends { readonly pool: string }>(source: string, subject: string, pool: string, codec: MessageCodec<T>, what: string, apply: (v: T) => void): Subscription =>
    nc.subscribe(subject, {
      callback: (err, m) => {
        if (err) return log.error({ err, pool }, `${source} subscription error`);
        metrics.received.inc({ source });
        const r = codec.decode(m.data);
        if (!r.ok) return reject(source, pool, r.code, r.reason);
        if (r.value.pool !== pool) return reject(source, pool, 'pool_mismatch', `${what} for pool ${r.value.pool}`);
        apply(r.value);
      },
    });
  for (const role of ['efficient', 'capable'] as const) {
    const pool = cfg.pools[role].pool;
    subs.push(
      subscribe('lifecycle', lifecycleSubject(pool), pool, lifecycleEventCodec, 'event', (e) => {
        metrics.accepted.inc({ source: 'lifecycle' });
        if (endsInFlight(e.kind)) inFlight.release(e.requestId);
      }),
      subscribe('workers', workersSubject(pool), pool, workerRegistrationCodec, 'registration', (g) => {
        if (g.kind === 'deregister') {
          endpoints.remove(pool, g.workerId);
          metrics.accepted.inc({ source: 'workers' });
          return;
        }
        const o = endpoints.offer(pool, g.workerId, g.endpoint);
        if (o.outcome === 'endpoints_per_pool') metrics.limitHits.inc({ limit: 'endpoints_per_pool' });
        if (o.outcome === 'stored' || o.outcome === 'unchanged' || o.outcome === 'removed') metrics.accepted.inc({ source: 'workers' });
        else reject('workers', pool, o.outcome, `worker ${g.workerId}: ${o.reason ?? ''}`);
      }),
    );
  }

  // Everything this service sends leaves through one outbox: one socket write per event-loop turn (the runtime's Outbox).
  const outbox = new Outbox(nc);
  // Observe queries and record publishes share one inbox subscription (see requester.ts).
  const requester = new Requester(nc, outbox);
  let publisher: RecordPublisher | null = null;
  if (cfg.records.enabled) {
    // Only name and subjects: retention is the outcome service's to set (it owns the stream's consumers),
    // and ensureStream compares only the fields given, so the two services never fight over the config.
    await ensureStream(nc, { name: cfg.records.stream, subjects: [cfg.records.subject] }, log);
    const published = metrics.recordsPublished.series();
    const queued = metrics.recordsQueued.series();
    const p = new RecordPublisher({
      requester,
      subject: cfg.records.subject,
      log,
      maxInFlight: cfg.records.maxInFlight,
      maxQueued: cfg.records.maxQueued,
      publishTimeoutMs: cfg.records.publishTimeoutMs,
      retryBaseMs: cfg.records.retryBaseMs,
      retryMaxMs: cfg.records.retryMaxMs,
      sendDelayMs: cfg.records.sendDelayMs,
      sendBatch: cfg.records.sendBatch,
      onPublished: () => void published.n++,
      onFailure: () => metrics.recordPublishFailures.inc(),
      onDropped: () => metrics.recordsDropped.inc({ cause: 'queue_full' }),
      onLeftAtShutdown: (n) => metrics.recordsDropped.inc({ cause: 'shutdown' }, n),
      onQueueDepth: (n) => (queued.n = n),
    });
    // Held decision records leave with whatever the service writes next.
    outbox.beforeFlush(() => p.kick());
    publisher = p;
  }
  await nc.flush();

  // Local pools: subscribed and restoring before the endpoint opens; routes fall back until each is ready.
  const pools = await LocalPools.start({ nc, cfg, log, registry, instanceId: ctx.instanceId });
  if (pools.size > 0) ctx.addHealthCheck('pools', () => pools.health());

  const router = new Router({
    cfg,
    log,
    metrics,
    inFlight,
    publisher,
    requester,
    pools,
    outbox,
    instanceId: ctx.instanceId,
    params: () => params.current(),
    endpointOf: (pool, workerId) => endpoints.get(pool, workerId),
  });
  // Replies leave through the outbox too, in the same write as the bookings and queries of their turn.
  const responder = createResponder(nc, {
    name: 'vantage-decision',
    version: DECISION_VERSION,
    description: 'Routing decisions between two Dynamo model pools',
    metadata: { efficient: cfg.pools.efficient.pool, capable: cfg.pools.capable.pool },
    log,
    metrics: ctx.metrics,
    maxInFlight: cfg.maxInFlight,
    outbox,
  });
  const server = responder.add('route', { subject: cfg.subject, queue: cfg.queueGroup, handler: (msg) => router.handle(msg.data) });

  for (const cause of ['queue_full', 'shutdown']) metrics.recordsDropped.inc({ cause }, 0);
  // Decision records that cannot be published: the queue past records.unhealthyQueued, or every attempt
  // failing for records.unhealthyFailingMs (stream deleted or full, JetStream down).
  ctx.addHealthCheck('decision', () => {
    const depth = publisher?.depth ?? 0;
    const failingMs = publisher?.failingForMs() ?? 0;
    const problems: string[] = [];
    if (depth > cfg.records.unhealthyQueued) problems.push(`${depth} decision records queued (threshold ${cfg.records.unhealthyQueued})`);
    if (failingMs >= cfg.records.unhealthyFailingMs) problems.push(`decision records failing to publish for ${failingMs} ms: ${publisher?.lastError ?? ''}`);
    return {
      ok: problems.length === 0,
      details: {
        parameterSetVersion: params.current().version,
        variant: params.current().variant,
        inFlight: inFlight.size,
        recordsQueued: depth,
        recordsFailingForMs: failingMs,
        ...(problems.length > 0 ? { reason: problems.join('; ') } : {}),
      },
    };
  });
  // While publishing fails, the stream may be gone (deleted by an operator): ensure it again (name and
  // subjects only, as at start) every few seconds, so records flow again without a restart.
  let ensuring = false;
  const reEnsure = setInterval(() => {
    if (publisher === null || ensuring || publisher.failingForMs() < 2_000) return;
    ensuring = true;
    ensureStream(nc, { name: cfg.records.stream, subjects: [cfg.records.subject] }, log)
      .catch((e: unknown) => rejections.warn('ensure_stream', { err: e, stream: cfg.records.stream }, 'decision stream could not be ensured; retrying'))
      .finally(() => (ensuring = false));
  }, 3_000);
  reEnsure.unref();

  // intake: stop taking routes; drain: answer those in flight; close: stop answering discovery.
  responder.registerShutdown(shutdown);
  shutdown.register('stop subscriptions and timers', 'drain', async () => {
    if (poll) clearInterval(poll);
    clearInterval(sweep);
    clearInterval(reEnsure);
    process.off('SIGHUP', onHup);
    for (const s of subs) await s.drain().catch(() => {});
    await pools.stop();
  });
  shutdown.register('flush decision records', 'flush', async () => {
    if (publisher === null) return;
    router.flushRecords();
    outbox.flushNow();
    // Leave a margin inside the shutdown deadline for the close phase.
    const left = await publisher.flush(Math.max(100, config.shutdown.deadlineMs - 1000));
    if (left > 0) throw new Error(`${left} decision records not published`);
  });
  shutdown.register('stop the request inbox', 'close', () => {
    requester.close();
    return Promise.resolve();
  });

  log.info({ subject: cfg.subject, queue: cfg.queueGroup, efficient: { pool: cfg.pools.efficient.pool, source: cfg.pools.efficient.source }, capable: { pool: cfg.pools.capable.pool, source: cfg.pools.capable.source }, parameterSetVersion: params.current().version }, 'decision service ready');
  return { router, params, inFlight, publisher, metrics, server, responder, pools };
}
