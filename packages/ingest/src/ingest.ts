/**
 * One pool's intake (README.md, "What it owns"). Start-up order: subscribe first (messages queue up
 * in the paused writer), restore the snapshot, then let the writer drain (services/indexer/README.md,
 * "Restart without loss").
 */
import { hostname } from 'node:os';
import { jetstream, jetstreamManager, AckPolicy, DeliverPolicy, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { WorkerCapacity } from '@vantage/bookings';
import { PrefixIndex } from '@vantage/prefix-index';
import { OutageClock, type HealthResult, type Logger, type RateLimitedLog } from '@vantage/runtime';
import { capacityOf, type KvEvent, type WorkerId } from '@vantage/types';
import { DiscoveryView, etcdDiscoveryStore, fileDiscoveryStore, type DiscoveredWorker, type DiscoveryEvent, type DiscoveryStore } from '@vantage/discovery';
import { readBytes, readSecretFile, VantageError } from '@vantage/runtime';
import {
  activeSequencesSubject,
  decodeActiveLoad,
  decodeActiveSequenceEvents,
  decodeEventPlaneMessage,
  decodeRouterEventJson,
  endpointSubjectPrefix,
  prefixedSubject,
  TOPIC_ACTIVE_SEQUENCES,
  TOPIC_FORWARD_PASS_METRICS,
  TOPIC_KV_EVENTS,
  TOPIC_KV_METRICS,
  jetStreamKvStreamName,
  jetStreamKvSubject,
  kvEventsSubject,
  kvMetricsSubject,
  legacyKvEventsSubject,
  sniffMessage,
  type ActiveLoad,
  type ActiveSequenceEvent,
  type ForwardPassMetrics,
} from '@vantage/wire';
import type { LimitsConfig, PoolConfig, RecoveryConfig } from './config';
import type { IngestMetrics } from './metrics';
import { PoolState, type PoolLimitName } from '@vantage/observation';
import { bookingsChannel, publishBooking } from './diagnostics';
import { WriterQueue } from './queue';
import type { RecoveryTarget } from './worker-query';
import { Recovery, type RecoveryAnswer, type RecoveryMetrics, type WorkerQuerier } from './recovery';
import { decodeSnapshot, encodeSnapshot, type SnapshotHeader } from './snapshot';
import { bookingsSubject, lifecycleEventCodec, lifecycleSubject, workerRegistrationCodec, workersSubject, type LifecycleEvent, type WorkerRegistration } from '@vantage/protocol';
import { decodeBooking, type BookingMessage } from './messages';

type Item =
  | { kind: 'kv'; event: KvEvent; streamSeq: number | null; msg: JsMsg | null }
  | { kind: 'load'; load: ActiveLoad; adopt: boolean }
  | { kind: 'fpm'; metrics: ForwardPassMetrics }
  | { kind: 'disc'; add: boolean; worker: DiscoveredWorker }
  | { kind: 'seq'; event: ActiveSequenceEvent }
  | { kind: 'book'; booking: BookingMessage }
  | { kind: 'life'; event: LifecycleEvent }
  | { kind: 'reg'; reg: WorkerRegistration }
  | { kind: 'recovery'; answer: RecoveryAnswer };

interface IngestOptions {
  readonly nc: NatsConnection;
  readonly log: Logger;
  readonly metrics: IngestMetrics;
  readonly queueDepth: number;
  readonly applyBatch: number;
  readonly bookingTtlMs: number;
  readonly workerTtlMs: number;
  readonly snapshotBucket: string | null;
  /** JetStream replicas of the snapshot bucket when it is created (3 on a three-node cluster). */
  readonly snapshotReplicas?: number;
  readonly durableName: string;
  readonly limits: LimitsConfig;
  /** Rejection and refusal lines, rate-limited per source and reason (the counters stay exact). */
  readonly rejections: RateLimitedLog;
  /** JetStream mode: /healthz turns unhealthy once consumption has been stopped this long. */
  readonly jetstreamStalledMs: number;
  /** Recovery of suspect workers from their local indexes (null: off, a suspect waits for a `cleared`). */
  readonly recovery?: { readonly querier: WorkerQuerier; readonly metrics: RecoveryMetrics; readonly config: RecoveryConfig } | null;
  /** This process's booking origin, its instance id: needed by `bookLocal` (README.md, "What it owns"). */
  readonly origin?: string;
}

/** The store a pool's `discovery` section names; null for `none`. */
export function discoveryStoreFor(cfg: PoolConfig): DiscoveryStore | null {
  const d = cfg.discovery;
  switch (d.backend) {
    case 'none':
      return null;
    case 'file':
      if (d.dir === '') throw new VantageError('CONFIG_INVALID', `pool ${cfg.name}: discovery.backend "file" needs discovery.dir (Dynamo's DYN_FILE_KV)`);
      return fileDiscoveryStore(d.dir, { pollMs: d.pollMs });
    case 'etcd': {
      if (d.endpoints.length === 0) throw new VantageError('CONFIG_INVALID', `pool ${cfg.name}: discovery.backend "etcd" needs discovery.endpoints (Dynamo's ETCD_ENDPOINTS)`);
      if ((d.username === '') !== (d.passwordFile === '')) throw new VantageError('CONFIG_INVALID', `pool ${cfg.name}: discovery.username and discovery.passwordFile go together`);
      const pem = (what: 'caFile' | 'certFile' | 'keyFile'): Uint8Array | undefined => (d[what] === '' ? undefined : readBytes(d[what], `pool ${cfg.name}: discovery.${what}`));
      const password = d.passwordFile === '' ? '' : readSecretFile(d.passwordFile, `pool ${cfg.name}: discovery.passwordFile`);
      const ca = pem('caFile');
      const cert = pem('certFile');
      const key = pem('keyFile');
      return etcdDiscoveryStore({
        endpoints: d.endpoints,
        root: d.root,
        ...(d.username !== '' ? { auth: { username: d.username, password } } : {}),
        ...(ca || cert || key ? { tls: { ca, cert, key } } : {}),
      });
    }
  }
}

export class PoolIngest {
  state!: PoolState;
  readonly queue: WriterQueue<Item>;
  /** When this process restored a snapshot (null: started empty). */
  restoredAtMs: number | null = null;
  /** Index compactions already counted in the metrics (the index counts its own). */
  private compactionsSeen = 0;
  private readonly subs: Subscription[] = [];
  private jsMessages: ConsumerMessages | null = null;
  private lastStreamSeq: number | null = null;
  private pendingAck: JsMsg | null = null;
  private paused = true;
  private readonly held: Item[] = [];
  /** Resolves waiters (the JetStream loop) once the held messages are released. */
  private releasedWaiters: (() => void)[] = [];
  /** What happened to the message being handled by a subscription callback (one outcome per message). */
  private msgOutcome: 'accepted' | 'rejected' | 'dropped' = 'accepted';
  /** JetStream mode: whether consumption is running (null in core-NATS modes). */
  readonly jetstream: OutageClock | null;
  private jsStopped = false;
  private store: ObjectStore | null = null;
  private readonly now = Date.now;
  private readonly pool: string;
  /** Null when recovery is off. */
  readonly recovery: Recovery | null = null;
  private recoveryTimer: NodeJS.Timeout | null = null;
  /** kv-events publisher ids whose listing has been answered with a recovery. */
  private readonly recoveryListed = new Set<bigint>();
  /** Tokens per block: the model cards' when discovery lists any at start, else the configuration's. */
  blockSize: number;
  /** Dynamo's discovery for this pool's endpoint; null without discovery. */
  discovery: DiscoveryView | null = null;
  private readonly subscribed = new Set<string>();
  /** Set once the restore is done and the messages held meanwhile have been applied. */
  private complete = false;
  /** JetStream mode: the stream's last sequence when consumption started, until applied (null: nothing to wait for). */
  private replayTarget: number | null = null;

  constructor(
    readonly cfg: PoolConfig,
    private readonly o: IngestOptions,
  ) {
    this.pool = cfg.name;
    this.blockSize = cfg.blockSize;
    this.jetstream = cfg.kvEvents === 'jetstream' ? new OutageClock(o.jetstreamStalledMs, this.now) : null;
    this.queue = new WriterQueue<Item>(
      o.queueDepth,
      o.applyBatch,
      (it) => this.apply(it),
      (err, it) => o.log.error({ err, pool: this.pool, kind: it.kind }, 'applying a message failed; continuing'),
    );
    const rc = o.recovery;
    if (rc) {
      this.recovery = new Recovery({
        pool: this.pool,
        state: () => this.state,
        targetOf: (w, dp) => this.recoveryTargetOf(w, dp),
        querier: rc.querier,
        // An answer is applied by the writer in turn; it is never dropped for a full queue (it holds no
        // live event, and dropping it would leave the worker suspect until the next attempt).
        deliver: (answer) => this.deliverRecovery({ kind: 'recovery', answer }),
        settings: rc.config,
        metrics: rc.metrics,
        log: o.log,
        now: this.now,
      });
    }
  }

  /** Where a (worker, dp rank)'s local index answers: discovery's `recovery_target` for it (null: unknown). */
  private recoveryTargetOf(workerId: WorkerId, dpRank: number): RecoveryTarget | null {
    for (const p of this.discovery?.publishers() ?? []) {
      if (p.topic !== TOPIC_KV_EVENTS || p.workerId !== workerId || p.dpRank !== dpRank) continue;
      const t = p.recoveryTarget;
      if (t === null || t.transport === null) continue;
      return { workerId, dpRank, transport: t.transport.kind, address: t.transport.address, codec: t.codec };
    }
    return null;
  }

  /** Every kv-events publisher with a recovery target is recovered once when it is first listed. */
  private recoverListed(): void {
    if (!this.recovery) return;
    for (const p of this.discovery?.publishers() ?? []) {
      if (p.topic !== TOPIC_KV_EVENTS || p.recoveryTarget === null || this.recoveryListed.has(p.publisherId)) continue;
      this.recoveryListed.add(p.publisherId);
      this.recovery.request(p.workerId, p.dpRank, 'listed');
    }
  }

  private deliverRecovery(item: Item): void {
    if (this.paused) {
      this.held.push(item);
      return;
    }
    if (this.queue.push(item) || !this.queue.accepting) return;
    const t = setTimeout(() => this.deliverRecovery(item), 10);
    t.unref();
  }

  /** Queue a decoded item; while paused (restoring) items are held in order. */
  private enqueue(item: Item, source: string): void {
    if (this.paused) {
      if (this.held.length >= this.o.limits.heldDuringRestore) {
        // A flood while the snapshot is read must not grow memory without bound: dropped like a full queue.
        this.msgOutcome = 'dropped';
        this.refuse('held_during_restore', source, { held: this.held.length });
        return;
      }
      this.held.push(item);
      return;
    }
    if (!this.queue.push(item)) this.msgOutcome = 'dropped';
  }

  /** Count a rejected message; log it, rate-limited per (pool, source, reason). */
  private reject(source: string, reason: string, detail: string, subject: string): void {
    this.msgOutcome = 'rejected';
    this.o.metrics.rejected.inc({ pool: this.pool, source, reason });
    // The detail may quote the payload: cut short, it can never make a line large.
    this.o.rejections.warn(`${this.pool}:${source}:${reason}`, { pool: this.pool, source, reason, detail: detail.slice(0, 256), subject }, 'message rejected');
  }

  /** A decoded message refused by a limit: counted per limit, logged rate-limited, nothing applied. */
  private refuse(limit: PoolLimitName | 'held_during_restore', source: string, fields: Record<string, unknown>): void {
    this.o.metrics.limitHits.inc({ pool: this.pool, limit });
    this.o.rejections.warn(`${this.pool}:${source}:${limit}`, { pool: this.pool, source, limit, ...fields }, 'message refused');
  }

  /** A message on `vantage.v1.{kind}.{pool}` must name the subject's pool: another pool's message is not this pool's to apply. */
  private samePool(source: string, bodyPool: string, subject: string): boolean {
    if (bodyPool === this.pool) return true;
    this.reject(source, 'pool_mismatch', `message for pool ${JSON.stringify(bodyPool).slice(0, 80)} on this pool's subject`, subject);
    return false;
  }

  private subscribe(subject: string, source: string, onMsg: (m: Msg) => void): void {
    // A subject learned from discovery may equal the configured fallback: one subscription each.
    if (this.subscribed.has(subject)) return;
    this.subscribed.add(subject);
    const sub = this.o.nc.subscribe(subject, {
      callback: (err, m) => {
        if (err) {
          this.o.log.error({ err, subject }, 'subscription error');
          return;
        }
        this.o.metrics.received.inc({ pool: this.pool, source });
        this.msgOutcome = 'accepted';
        try {
          onMsg(m);
        } catch (e) {
          // Decoders return rejections rather than throw; this guards against bugs.
          this.reject(source, 'internal', e instanceof Error ? e.message : String(e), m.subject);
        }
        // Exactly one of accepted, rejected or dropped per message received.
        if (this.msgOutcome === 'accepted') this.o.metrics.accepted.inc({ pool: this.pool, source });
        else if (this.msgOutcome === 'dropped') this.o.metrics.dropped.inc({ pool: this.pool, source });
      },
    });
    this.subs.push(sub);
  }

  /** Subscribe, restore, then start applying. */
  async start(): Promise<void> {
    const { cfg } = this;
    const ns = cfg.namespace;
    const comp = cfg.component;

    // Discovery first: the model cards give the block size, the event channels the subjects.
    const store = discoveryStoreFor(cfg);
    if (store !== null) await this.startDiscovery(store);

    // Dynamo's event plane (every topic in a msgpack envelope). `scoped`: the subject is this pool's
    // own endpoint (1.6.1), so a load report from a worker not seen yet is this pool's, not foreign.
    const onEventPlane = (source: string, scoped = false) => (m: Msg) => {
      const r = decodeEventPlaneMessage(m.data, { topic: m.subject });
      if (!r.ok) return this.reject(source, r.code, r.reason, m.subject);
      const v = r.value;
      if (v.kind === 'kv_event' || v.kind === 'kv_events') {
        const events = v.kind === 'kv_event' ? [v.event] : v.events;
        // 1.6.1: each kv-events publisher is one (worker, dp rank), listed in v1/event_sources. An
        // envelope whose events claim another worker is refused whole rather than applied as theirs.
        const pub = this.discovery?.publisher(v.envelope.publisherId);
        if (pub !== undefined && pub.topic === TOPIC_KV_EVENTS) {
          const bad = events.find((e) => e.workerId !== pub.workerId || e.dpRank !== pub.dpRank);
          if (bad !== undefined) {
            return this.reject(source, 'publisher_mismatch', `publisher ${v.envelope.publisherId} is worker ${pub.workerId} rank ${pub.dpRank}; event says ${bad.workerId} rank ${bad.dpRank}`, m.subject);
          }
        }
        for (const e of events) this.enqueue({ kind: 'kv', event: e, streamSeq: null, msg: null }, source);
      } else if (v.kind === 'active_load') this.enqueue({ kind: 'load', load: v.load, adopt: scoped }, source);
      else if (v.kind === 'forward_pass') this.enqueue({ kind: 'fpm', metrics: v.metrics }, source);
      else for (const e of v.events) this.enqueue({ kind: 'seq', event: e }, source);
    };

    // Dynamo 1.6.1: every topic under the endpoint's prefix; the configured endpoint's prefix always,
    // and each prefix discovery lists (subscribed as it appears).
    const subscribePrefix = (prefix: string): void => {
      if (cfg.kvEvents === 'event_plane') this.subscribe(prefixedSubject(prefix, TOPIC_KV_EVENTS), 'kv_events', onEventPlane('kv_events', true));
      this.subscribe(prefixedSubject(prefix, TOPIC_KV_METRICS), 'kv_metrics', onEventPlane('kv_metrics', true));
      this.subscribe(prefixedSubject(prefix, TOPIC_FORWARD_PASS_METRICS), 'forward_pass', onEventPlane('forward_pass', true));
      if (cfg.dynamoRouterSync) this.subscribe(prefixedSubject(prefix, TOPIC_ACTIVE_SEQUENCES), 'active_sequences', onEventPlane('active_sequences', true));
    };
    subscribePrefix(endpointSubjectPrefix(ns, comp, cfg.endpoint));
    for (const p of this.discovery?.subjectPrefixes() ?? []) subscribePrefix(p);
    this.discovery?.subscribe((e) => {
      if (e.kind === 'subjects_changed') {
        for (const p of e.prefixes) subscribePrefix(p);
        void this.o.nc.flush().catch(() => {});
      }
    });

    if (cfg.kvEvents === 'event_plane') this.subscribe(kvEventsSubject(ns, comp), 'kv_events', onEventPlane('kv_events'));
    if (cfg.kvEvents === 'legacy_json') {
      this.subscribe(legacyKvEventsSubject(ns, comp), 'kv_events', (m) => {
        const r = decodeRouterEventJson(m.data);
        if (!r.ok) return this.reject('kv_events', r.code, r.reason, m.subject);
        this.enqueue({ kind: 'kv', event: r.value, streamSeq: null, msg: null }, 'kv_events');
      });
    }
    // Load reports: the event-plane envelope in current releases; a bare ActiveLoad (msgpack or JSON) is accepted too.
    const kvMetricsEnvelope = onEventPlane('kv_metrics');
    this.subscribe(kvMetricsSubject(ns), 'kv_metrics', (m) => {
      const kind = sniffMessage(m.data);
      if (kind === 'envelope') return kvMetricsEnvelope(m);
      // A bare report may be msgpack or JSON ('{' first): the decoder must be told which.
      const r = decodeActiveLoad(m.data, { format: kind === 'router_event_json' ? 'json' : 'msgpack' });
      if (!r.ok) return this.reject('kv_metrics', r.code, r.reason, m.subject);
      this.enqueue({ kind: 'load', load: r.value, adopt: false }, 'kv_metrics');
    });
    if (cfg.dynamoRouterSync) {
      const sequencesEnvelope = onEventPlane('active_sequences');
      this.subscribe(activeSequencesSubject(ns, comp), 'active_sequences', (m) => {
        const kind = sniffMessage(m.data);
        if (kind === 'envelope') return sequencesEnvelope(m);
        const r = decodeActiveSequenceEvents(m.data, { format: kind === 'router_event_json' ? 'json' : 'msgpack' });
        if (!r.ok) return this.reject('active_sequences', r.code, r.reason, m.subject);
        for (const e of r.value) this.enqueue({ kind: 'seq', event: e }, 'active_sequences');
      });
    }
    // Our own subjects.
    const origin = this.o.origin;
    this.subscribe(bookingsSubject(this.pool), 'bookings', (m) => {
      if (origin !== undefined && m.headers?.get(BOOKING_ORIGIN_HEADER) === origin) {
        this.o.metrics.applied.inc({ pool: this.pool, kind: 'book_own' });
        return;
      }
      const r = decodeBooking(m.data);
      if (!r.ok) return this.reject('bookings', r.code, r.reason, m.subject);
      if (!this.samePool('bookings', r.value.pool, m.subject)) return;
      this.enqueue({ kind: 'book', booking: r.value }, 'bookings');
    });
    this.subscribe(lifecycleSubject(this.pool), 'lifecycle', (m) => {
      const r = lifecycleEventCodec.decode(m.data);
      if (!r.ok) return this.reject('lifecycle', r.code, r.reason, m.subject);
      if (!this.samePool('lifecycle', r.value.pool, m.subject)) return;
      this.enqueue({ kind: 'life', event: r.value }, 'lifecycle');
    });
    this.subscribe(workersSubject(this.pool), 'workers', (m) => {
      const r = workerRegistrationCodec.decode(m.data);
      if (!r.ok) return this.reject('workers', r.code, r.reason, m.subject);
      if (!this.samePool('workers', r.value.pool, m.subject)) return;
      this.enqueue({ kind: 'reg', reg: r.value }, 'workers');
    });
    await this.o.nc.flush();

    const header = await this.restore();
    for (const w of cfg.workers) {
      this.state.register(BigInt(w.workerId) as WorkerId, capacityOf(this.blockSize, w), null, this.now(), true);
    }
    // Discovered workers join through the writer, in order with everything else (held until restored).
    // The listing is the discovery store's, not a publisher's: never refused by heldDuringRestore.
    for (const w of this.discovery?.workers() ?? []) this.held.push({ kind: 'disc', add: true, worker: w });
    if (cfg.kvEvents === 'jetstream') {
      await this.openJetStream(header?.streamSeq ?? null);
      void this.superviseJetStream();
    }

    // Restored: release what queued up meanwhile, in arrival order, then run live.
    await this.releaseHeld();
    if (this.recovery && this.o.recovery) {
      // As Dynamo's router does for each worker it finds: its blocks as its own index holds them now
      // (this indexer may have missed them: a restart, or a worker that has been quiet since).
      if (this.o.recovery.config.onListing) {
        this.recoverListed();
        this.discovery?.subscribe((e) => {
          if (e.kind === 'publishers_changed') this.recoverListed();
        });
      }
      const rec = this.recovery;
      this.recoveryTimer = setInterval(() => rec.pump(), this.o.recovery.config.pumpMs);
      this.recoveryTimer.unref();
    }
    for (const w of this.releasedWaiters.splice(0)) w();
    void this.queue.idle().then(() => (this.complete = true));
  }

  /**
   * Move the held messages to the writer queue in arrival order, then run live. They may outnumber
   * the queue (heldDuringRestore above queueDepth, or the discovery listing): the rest waits for
   * room, still paused, so messages arriving meanwhile are held behind them (and refused past the
   * cap, counted) rather than overtaking them; none is lost in between.
   */
  private async releaseHeld(): Promise<void> {
    for (;;) {
      let moved = 0;
      while (moved < this.held.length && this.queue.push(this.held[moved]!)) moved++;
      this.held.splice(0, moved);
      // Empty, or the queue was stopped (shutdown during start-up): live from here.
      if (this.held.length === 0 || !this.queue.accepting) break;
      await this.queue.idle();
    }
    this.held.length = 0;
    this.paused = false;
  }

  /**
   * Watch Dynamo's discovery for this pool's endpoint. Resolves after the initial listing; from then
   * on, workers that join or leave discovery join or leave the pool (through the writer queue), and
   * new subject prefixes are subscribed. The block size is the model cards' if any are listed now.
   */
  private async startDiscovery(store: DiscoveryStore): Promise<void> {
    const { cfg } = this;
    const { log, metrics } = this.o;
    const view = new DiscoveryView(store, {
      namespace: cfg.namespace,
      component: cfg.component,
      endpoint: cfg.endpoint,
      onStoreError: (err) => log.warn({ pool: this.pool, backend: store.backend, err: err.message }, 'discovery store problem'),
    });
    this.discovery = view;
    let started = false;
    view.subscribe((e: DiscoveryEvent) => {
      if (e.kind === 'rejected') return this.reject('discovery', e.code, e.reason, e.key);
      if (!started) return; // the initial listing is applied below, after the block size is known
      if (e.kind === 'worker_added' || e.kind === 'worker_changed' || e.kind === 'worker_removed') {
        metrics.discoveryChanges.inc({ pool: this.pool, kind: e.kind });
        this.enqueue({ kind: 'disc', add: e.kind !== 'worker_removed', worker: e.worker }, 'discovery');
      }
    });
    await view.start();
    started = true;
    const sizes = [...new Set(view.workers().map((w) => w.capacity.blockSize))];
    if (sizes.length === 1) this.blockSize = sizes[0]!;
    if (sizes.length > 1) {
      log.error({ pool: this.pool, blockSizes: sizes, using: this.blockSize }, 'model cards disagree on the block size; workers with another size are left out');
    }
    log.info(
      { pool: this.pool, backend: store.backend, workers: view.workers().length, blockSize: this.blockSize, subjectPrefixes: view.subjectPrefixes(), publishers: view.publishers().length },
      'discovery listing read',
    );
  }

  /** A worker discovery lists joins (or its card changed); one it no longer lists leaves. */
  private applyDiscovered(add: boolean, w: DiscoveredWorker, now: number): void {
    const s = this.state;
    if (!add) {
      s.removeWorker(w.instanceId, now);
      this.recovery?.forget(w.instanceId);
      this.o.log.info({ pool: this.pool, workerId: String(w.instanceId) }, 'worker left discovery; removed from the pool');
      return;
    }
    const bs = w.capacity.blockSize;
    if (bs !== this.blockSize) {
      this.reject('discovery', 'block_size_mismatch', `worker ${w.instanceId} has block size ${bs}, the pool ${this.blockSize}`, w.instanceId.toString(16));
      return;
    }
    // Listed in discovery: never expires for being quiet (static), leaves only when discovery drops it.
    const err = s.register(w.instanceId, { ...w.capacity, schedulable: true }, null, now, true);
    if (err) this.reject('discovery', 'registration_refused', `worker ${w.instanceId}: ${err}`, w.instanceId.toString(16));
  }

  private async restore(): Promise<SnapshotHeader | null> {
    const L = this.o.limits;
    const mk = (index?: PrefixIndex): PoolState =>
      new PoolState({
        pool: this.pool,
        blockSize: this.blockSize,
        selection: { kind: 'kv_router', ...this.cfg.selection },
        bookingTtlMs: this.o.bookingTtlMs,
        workerTtlMs: this.o.workerTtlMs,
        limits: {
          dpRanksPerWorker: L.dpRanksPerWorker,
          workers: L.workersPerPool,
          ranks: L.ranksPerPool,
          bookingsPerRank: L.bookingsPerRank,
          bookings: L.bookingsPerPool,
        },
        ...(index ? { index } : {}),
      });
    this.state = mk();
    if (this.o.snapshotBucket === null) return null;
    try {
      const objm = new Objm(this.o.nc);
      this.store = await objm.create(this.o.snapshotBucket, { replicas: this.o.snapshotReplicas ?? 1 });
      const bytes = await this.store.getBlob(this.pool);
      if (bytes === null) {
        this.o.log.info({ pool: this.pool }, 'no snapshot; starting with an empty index');
        return null;
      }
      const snap = decodeSnapshot(bytes);
      if (snap.header.pool !== this.pool || snap.header.blockSize !== this.blockSize) {
        throw new Error(`snapshot is for pool ${snap.header.pool} (block size ${snap.header.blockSize})`);
      }
      this.state = mk(PrefixIndex.restore(snap.index));
      const pubs = this.state.adoptRestored(this.now());
      this.restoredAtMs = this.now();
      for (const r of snap.header.registrations) {
        this.state.register(BigInt(r.workerId) as WorkerId, r.capacity, r.ttlMs, this.now());
      }
      this.o.metrics.snapshots.inc({ pool: this.pool, outcome: 'restored' });
      this.o.log.info(
        { pool: this.pool, takenAt: new Date(snap.header.takenAtMs).toISOString(), publishers: pubs, streamSeq: snap.header.streamSeq },
        'snapshot restored; its facts carry their original ages',
      );
      return snap.header;
    } catch (e) {
      // A bad snapshot must not stop the service: start empty (every worker unknown until it speaks).
      this.o.metrics.snapshots.inc({ pool: this.pool, outcome: 'restore_failed' });
      this.o.log.error({ err: e, pool: this.pool }, 'snapshot restore failed; starting with an empty index');
      this.state = mk();
      return null;
    }
  }

  /**
   * JetStream mode: Dynamo's durable stream of JSON RouterEvents. The consumer is
   * (re)created at the position after the restored snapshot (or the stream's
   * start), so nothing between the snapshot and now is skipped; events the
   * snapshot already holds are ignored as duplicates by id.
   *
   * Consumption is supervised: when the consumer or the stream disappears (deleted by an operator,
   * a stream reset) the consume loop ends, `jetstream` records the outage (health: unhealthy past
   * `jetstreamStalledMs`), and the consumer is made again every second from the position after the
   * last message taken (from the stream's start when the stream was recreated: its sequence went
   * back), until it works; then healthy again. Missed heartbeats count as an outage until the next
   * message or heartbeat.
   */
  private async openJetStream(fromSeq: number | null): Promise<void> {
    const { nc, log } = this.o;
    const stream = jetStreamKvStreamName(this.cfg.namespace, this.cfg.component);
    const subject = jetStreamKvSubject(this.cfg.namespace, this.cfg.component);
    const jsm = await jetstreamManager(nc);
    let lastSeq = 0;
    try {
      lastSeq = (await jsm.streams.info(stream)).state.last_seq;
    } catch {
      // Dynamo's workers create it; creating it here (same settings) lets the indexer start first.
      await jsm.streams.add({ name: stream, subjects: [subject], max_age: 3600 * 1e9 });
    }
    // A stream whose last sequence is below the position taken was recreated: read it from its start.
    const startSeq = fromSeq !== null && fromSeq <= lastSeq ? fromSeq : null;
    if (!this.complete && lastSeq > (startSeq ?? 0)) this.replayTarget = lastSeq;
    const durable = this.o.durableName || `vantage-indexer-${hostname().replace(/[^A-Za-z0-9_-]/g, '_')}-${this.pool}`;
    try {
      await jsm.consumers.delete(stream, durable);
    } catch {
      /* did not exist */
    }
    await jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.All,
      max_ack_pending: 20_000,
      ...(startSeq !== null ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: startSeq + 1 } : { deliver_policy: DeliverPolicy.All }),
    });
    const consumer = await jetstream(nc).consumers.get(stream, durable);
    // Missing consumer or stream ends the loop (the supervisor recreates them) instead of retrying in silence;
    // 5 s pulls mean heartbeats every 2.5 s, so a stall is noticed within seconds.
    this.jsMessages = await consumer.consume({ max_messages: 1000, expires: 5_000, abort_on_missing_resource: true });
    this.jetstream?.ok();
    log.info({ pool: this.pool, stream, durable, fromSeq: startSeq === null ? 1 : startSeq + 1 }, 'consuming KV events from JetStream');
  }

  private async superviseJetStream(): Promise<void> {
    const { log } = this.o;
    const clock = this.jetstream!;
    while (!this.jsStopped) {
      const msgs = this.jsMessages;
      let reason = 'JetStream consumption ended';
      if (msgs !== null) {
        void (async () => {
          for await (const st of msgs.status()) {
            if (st.type === 'heartbeat') clock.ok();
            else if (st.type === 'heartbeats_missed') clock.fail(`JetStream heartbeats missed (${st.count})`);
            else if (st.type === 'consumer_deleted' || st.type === 'consumer_not_found' || st.type === 'stream_not_found') clock.fail(`JetStream ${st.type.replace(/_/g, ' ')}`);
          }
        })().catch(() => {});
        try {
          await this.consumeJetStream(msgs);
        } catch (e) {
          reason = `JetStream consumption stopped: ${e instanceof Error ? e.message : String(e)}`;
        }
      }
      if (this.jsStopped) return;
      clock.fail(reason);
      log.error({ pool: this.pool, reason, lastStreamSeq: this.lastStreamSeq }, 'JetStream consumption stopped; re-creating the consumer');
      // Re-create every second until it works (stream or consumer back, or made again here).
      for (;;) {
        await new Promise((r) => setTimeout(r, 1_000));
        if (this.jsStopped) return;
        try {
          await this.openJetStream(this.lastStreamSeq);
          break;
        } catch (e) {
          clock.fail(`${reason}; re-creating the consumer failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }
  }

  private async consumeJetStream(msgs: ConsumerMessages): Promise<void> {
    for await (const m of msgs) {
      this.jetstream?.ok();
      this.o.metrics.received.inc({ pool: this.pool, source: 'kv_events_js' });
      this.msgOutcome = 'accepted';
      const kind = sniffMessage(m.data);
      let ev: KvEvent | undefined;
      if (kind === 'envelope') {
        const r = decodeEventPlaneMessage(m.data, { topic: 'kv-events' });
        if (r.ok && r.value.kind === 'kv_event') ev = r.value.event;
        else this.reject('kv_events_js', r.ok ? 'wrong_type' : r.code, r.ok ? 'not a kv event' : r.reason, m.subject);
      } else {
        const r = decodeRouterEventJson(m.data);
        if (r.ok) ev = r.value;
        else this.reject('kv_events_js', r.code, r.reason, m.subject);
      }
      if (ev !== undefined) this.o.metrics.accepted.inc({ pool: this.pool, source: 'kv_events_js' });
      const item: Item = ev
        ? { kind: 'kv', event: ev, streamSeq: m.seq, msg: m }
        : { kind: 'kv', event: SKIP, streamSeq: m.seq, msg: m }; // keeps the position moving past bad messages
      // A durable stream is never dropped from: wait for room instead (held ones too, while restoring).
      while (this.paused && this.held.length >= this.o.limits.heldDuringRestore) await new Promise<void>((r) => this.releasedWaiters.push(r));
      while (!this.paused && this.queue.depth >= this.o.queueDepth - 1) await this.queue.idle();
      if (this.paused) this.held.push(item);
      else this.queue.push(item);
    }
  }

  /** JetStream mode: unhealthy once consumption has been stopped `jetstreamStalledMs`; null in core-NATS modes. */
  jetstreamHealth(): HealthResult | null {
    return this.jetstream === null ? null : this.jetstream.health({ lastStreamSeq: this.lastStreamSeq });
  }

  /** The single writer: everything that changes the pool goes through here, in order. */
  private apply(it: Item): void {
    const now = this.now();
    const s = this.state;
    const m = this.o.metrics;
    switch (it.kind) {
      case 'kv': {
        if (it.streamSeq !== null) {
          this.lastStreamSeq = it.streamSeq;
          this.pendingAck = it.msg;
        }
        if (it.event === SKIP) return;
        const limit = s.admitRank(it.event.workerId, it.event.dpRank);
        if (limit !== null) return this.refuse(limit, it.streamSeq === null ? 'kv_events' : 'kv_events_js', { workerId: String(it.event.workerId), dpRank: it.event.dpRank });
        const r = s.applyKvEvent(it.event, now);
        if (r.status === 'duplicate') m.duplicates.inc({ pool: this.pool });
        else {
          if (r.missedEvents > 0n) {
            m.gaps.inc({ pool: this.pool });
            m.missedEvents.inc({ pool: this.pool }, Number(r.missedEvents));
          }
          if (r.status === 'rejected') {
            const reason = r.rejection ?? 'rejected';
            m.kvRefused.inc({ pool: this.pool, reason });
            this.o.rejections.warn(`${this.pool}:kv_refused:${reason}`, { pool: this.pool, workerId: String(it.event.workerId), dpRank: it.event.dpRank, eventId: String(it.event.eventId), reason }, 'KV event refused by the index');
          } else {
            m.applied.inc({ pool: this.pool, kind: it.event.data.kind });
            if (r.unknownParent) m.unknownParents.inc({ pool: this.pool });
          }
        }
        this.recovery?.afterKvEvent(it.event, r);
        return;
      }
      case 'recovery':
        this.recovery?.applyAnswer(it.answer);
        return;
      case 'load': {
        const limit = s.admitRank(it.load.workerId, it.load.dpRank);
        if (limit !== null) return this.refuse(limit, 'kv_metrics', { workerId: String(it.load.workerId), dpRank: it.load.dpRank });
        m.applied.inc({ pool: this.pool, kind: s.applyLoad(it.load, now, it.adopt) ? 'load' : 'load_foreign_ignored' });
        return;
      }
      case 'fpm': {
        const limit = s.admitRank(it.metrics.workerId, it.metrics.dpRank);
        if (limit !== null) return this.refuse(limit, 'forward_pass_metrics', { workerId: String(it.metrics.workerId), dpRank: it.metrics.dpRank });
        s.applyForwardPass(it.metrics, now);
        m.applied.inc({ pool: this.pool, kind: 'forward_pass' });
        return;
      }
      case 'disc':
        this.applyDiscovered(it.add, it.worker, now);
        m.applied.inc({ pool: this.pool, kind: it.add ? 'discovered' : 'undiscovered' });
        return;
      case 'seq': {
        const e = it.event;
        if (e.data.kind === 'add_request') {
          const limit = s.admitRank(e.workerId, e.dpRank) ?? s.admitBooking(e.requestId, e.workerId, e.dpRank);
          if (limit !== null) return this.refuse(limit, 'active_sequences', { workerId: String(e.workerId), dpRank: e.dpRank, requestId: e.requestId.slice(0, 128) });
        }
        s.applySequenceEvent(e, now);
        m.applied.inc({ pool: this.pool, kind: 'dynamo_sequence' });
        return;
      }
      case 'book': {
        const b = it.booking;
        const limit = s.admitBooking(b.requestId, b.workerId, b.dpRank);
        if (limit !== null) return this.refuse(limit, 'bookings', { workerId: String(b.workerId), dpRank: b.dpRank, requestId: b.requestId.slice(0, 128) });
        const out = this.book(b, now);
        if (bookingsChannel.hasSubscribers) publishBooking(this.pool, b.requestId, 'subject', out.kind);
        m.applied.inc({ pool: this.pool, kind: `book_${out.kind}` });
        return;
      }
      case 'life': {
        const e = it.event;
        if (e.kind === 'first_token') s.ledger.markPrefillComplete(e.requestId, now);
        else if (e.kind === 'done') s.ledger.release(e.requestId, 'completed', now);
        else if (e.kind === 'cancelled') s.ledger.release(e.requestId, 'cancelled', now);
        else if (e.kind === 'failed') s.ledger.release(e.requestId, 'failed', now);
        m.applied.inc({ pool: this.pool, kind: `lifecycle_${e.kind}` });
        return;
      }
      case 'reg': {
        const r = it.reg;
        if (r.kind === 'deregister') {
          s.removeWorker(r.workerId, now);
          this.recovery?.forget(r.workerId);
        } else {
          const limit = s.admitRegistration(r.workerId, r.capacity);
          if (limit !== null) return this.refuse(limit, 'workers', { workerId: String(r.workerId), dpStartRank: r.capacity.dpStartRank, dpSize: r.capacity.dpSize });
          const err = s.register(r.workerId, r.capacity, r.ttlMs, now);
          if (err) this.o.log.warn({ pool: this.pool, workerId: String(r.workerId), err }, 'registration refused');
        }
        m.applied.inc({ pool: this.pool, kind: r.kind === 'deregister' ? 'deregister' : 'register' });
        return;
      }
    }
  }

  /** A decision service's booking into the ledger: the one mapping from the booking message, for echoes and local bookings. */
  private book(b: BookingMessage, now: number): ReturnType<PoolState['ledger']['book']> {
    return this.state.ledger.book({
      requestId: b.requestId,
      workerId: b.workerId,
      dpRank: b.dpRank,
      promptTokens: b.promptTokens,
      overlapBlocks: b.overlapBlocks,
      sequenceHashes: b.sequenceHashes,
      expectedOutputTokens: b.expectedOutputTokens,
      source: 'decision_service',
      nowMs: now,
    });
  }

  /**
   * Book a request this process routed, at once (before its booking message is published, with the
   * `origin` header): its echo from the subject is skipped undecoded (`book_own`), never applied again.
   * Returns the ledger's outcome kind, or the limit that refused it.
   */
  bookLocal(b: BookingMessage): string {
    if (this.o.origin === undefined) throw new VantageError('INTERNAL', `pool ${this.pool}: bookLocal needs the origin option`);
    const s = this.state;
    const now = this.now();
    const limit = s.admitBooking(b.requestId, b.workerId, b.dpRank);
    if (limit !== null) {
      this.refuse(limit, 'local_bookings', { workerId: String(b.workerId), dpRank: b.dpRank, requestId: b.requestId.slice(0, 128) });
      return limit;
    }
    const out = this.book(b, now);
    if (bookingsChannel.hasSubscribers) publishBooking(this.pool, b.requestId, 'local', out.kind);
    this.o.metrics.applied.inc({ pool: this.pool, kind: `book_local_${out.kind}` });
    return out.kind;
  }

  /** Whether the state is complete enough to route from (README.md, "What it owns": `readiness()`). */
  readiness(): { readonly ready: true } | { readonly ready: false; readonly reason: 'restoring' | 'replaying'; readonly detail: string } {
    if (!this.complete) return { ready: false, reason: 'restoring', detail: `pool ${this.pool}: restoring its state (snapshot, then the messages held meanwhile)` };
    if (this.replayTarget !== null) {
      if (this.lastStreamSeq !== null && this.lastStreamSeq >= this.replayTarget) this.replayTarget = null;
      else return { ready: false, reason: 'replaying', detail: `pool ${this.pool}: replaying JetStream to sequence ${this.replayTarget} (at ${this.lastStreamSeq ?? 0})` };
    }
    return { ready: true };
  }

  /** Periodic: expire leaks and silent workers; ack JetStream progress; refresh gauges. */
  housekeeping(): void {
    const now = this.now();
    const before = this.state.ledger.counters().expiredLeaks;
    const { workersRemoved } = this.state.tick(now);
    const leaked = this.state.ledger.counters().expiredLeaks - before;
    if (leaked > 0) this.o.metrics.leaks.inc({ pool: this.pool }, leaked);
    for (const w of workersRemoved) this.recovery?.forget(w);
    if (workersRemoved.length > 0) this.o.log.info({ pool: this.pool, workers: workersRemoved.map(String) }, 'removed silent workers');
    if (this.pendingAck) {
      this.pendingAck.ack(); // AckAll: everything up to here
      this.pendingAck = null;
    }
    const st = this.state.index.stats();
    const m = this.o.metrics;
    m.queueDepth.set({ pool: this.pool }, this.queue.depth);
    m.queueHighWater.set({ pool: this.pool }, this.queue.highWater);
    m.bookings.set({ pool: this.pool }, this.state.ledger.size);
    m.workers.set({ pool: this.pool }, this.state.knownRanks().length);
    if (this.discovery) m.discoveryWorkers.set({ pool: this.pool }, this.discovery.workers().length);
    m.suspectWorkers.set({ pool: this.pool }, st.publishers.filter((p) => p.suspect !== null).length);
    m.indexBlocks.set({ pool: this.pool }, st.totalBlocks);
    m.indexBytes.set({ pool: this.pool }, st.arrayBytes);
    const room = this.state.index.room;
    m.indexPositions.set({ pool: this.pool }, room.inTree);
    m.indexRoom.set({ pool: this.pool }, room.positions);
    // The index counts its own compactions (from 0 again after a restore): the counter takes the increase.
    if (room.compactions < this.compactionsSeen) this.compactionsSeen = 0;
    if (room.compactions > this.compactionsSeen) m.indexCompactions.inc({ pool: this.pool }, room.compactions - this.compactionsSeen);
    this.compactionsSeen = room.compactions;
  }

  /** Write a snapshot of the index (and the stream position it covers) to the object store. */
  async snapshot(): Promise<number> {
    if (!this.store) return 0;
    await this.queue.idle();
    const now = this.now();
    const regs: { workerId: string; capacity: WorkerCapacity; ttlMs: number | null }[] = [];
    for (const { workerId } of this.state.knownRanks()) {
      const r = this.state.registration(workerId);
      if (r && !r.static && !regs.some((x) => x.workerId === String(workerId))) {
        regs.push({ workerId: String(workerId), capacity: r.capacity, ttlMs: r.ttlMs });
      }
    }
    const bytes = encodeSnapshot(
      { pool: this.pool, blockSize: this.blockSize, takenAtMs: now, streamSeq: this.lastStreamSeq, registrations: regs },
      this.state.index.snapshot(),
    );
    await this.store.putBlob({ name: this.pool }, bytes);
    this.o.metrics.snapshots.inc({ pool: this.pool, outcome: 'written' });
    this.o.metrics.snapshotBytes.set({ pool: this.pool }, bytes.length);
    return bytes.length;
  }

  /** Stop intake; resolve when everything queued has been applied. */
  async stopIntake(): Promise<void> {
    if (this.recoveryTimer) clearInterval(this.recoveryTimer);
    for (const s of this.subs) {
      try {
        await s.drain();
      } catch {
        /* connection already closed */
      }
    }
    this.jsStopped = true;
    if (this.jsMessages) await this.jsMessages.close();
    this.queue.stop();
    await this.queue.idle();
    if (this.pendingAck) this.pendingAck.ack();
    if (this.discovery) await this.discovery.close();
  }
}

/** Header naming the process that made a booking (its instance id), so that process skips its own echo. */
export const BOOKING_ORIGIN_HEADER = 'Vantage-Booking-Origin';

/** Placeholder event for a JetStream message that failed to decode: advances the position only. */
const SKIP = Object.freeze({}) as KvEvent;

