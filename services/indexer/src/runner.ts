/**
 * One pool inside the indexer process: its subscriptions, its writer queue,
 * its snapshots and its observe endpoint.
 *
 * Start-up order (restart without loss): subscribe first (messages queue up in
 * the paused writer), restore the snapshot, then let the writer drain. Events
 * already in the snapshot are ignored as duplicates by their event ids; events
 * missed while the process was down show up as id gaps and mark the worker
 * suspect (core NATS), or are replayed from the stream position recorded in the
 * snapshot (JetStream mode).
 */
import { hostname } from 'node:os';
import { jetstream, jetstreamManager, AckPolicy, DeliverPolicy, type ConsumerMessages, type JsMsg } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { WorkerCapacity } from '@vantage/bookings';
import { PrefixIndex } from '@vantage/prefix-index';
import type { Logger } from '@vantage/runtime';
import type { KvEvent, WorkerId } from '@vantage/types';
import {
  activeSequencesSubject,
  decodeActiveLoad,
  decodeActiveSequenceEvents,
  decodeEventPlaneMessage,
  decodeRouterEventJson,
  jetStreamKvStreamName,
  jetStreamKvSubject,
  kvEventsSubject,
  kvMetricsSubject,
  legacyKvEventsSubject,
  sniffMessage,
  type ActiveLoad,
  type ActiveSequenceEvent,
} from '@vantage/wire';
import type { PoolConfig } from './config';
import type { IndexerMetrics } from './metrics';
import { PoolState } from '@vantage/observation';
import { WriterQueue } from './queue';
import { decodeSnapshot, encodeSnapshot, type SnapshotHeader } from './snapshot';
import {
  bookingsSubject,
  decodeBooking,
  decodeLifecycle,
  decodeRegistration,
  lifecycleSubject,
  workersSubject,
  type BookingMessage,
  type LifecycleMessage,
  type RegistrationMessage,
} from './messages';

export type Item =
  | { kind: 'kv'; event: KvEvent; streamSeq: number | null; msg: JsMsg | null }
  | { kind: 'load'; load: ActiveLoad }
  | { kind: 'seq'; event: ActiveSequenceEvent }
  | { kind: 'book'; booking: BookingMessage }
  | { kind: 'life'; event: LifecycleMessage }
  | { kind: 'reg'; reg: RegistrationMessage };

export interface RunnerOptions {
  readonly nc: NatsConnection;
  readonly log: Logger;
  readonly metrics: IndexerMetrics;
  readonly queueDepth: number;
  readonly applyBatch: number;
  readonly bookingTtlMs: number;
  readonly workerTtlMs: number;
  readonly snapshotBucket: string | null;
  readonly durableName: string;
  readonly now?: () => number;
}

export class PoolRunner {
  state!: PoolState;
  readonly queue: WriterQueue<Item>;
  /** When this process restored a snapshot (null: started empty). */
  restoredAtMs: number | null = null;
  snapshotTakenAtMs: number | null = null;
  /** Index compactions already counted in the metrics (the index counts its own). */
  private compactionsSeen = 0;
  private readonly subs: Subscription[] = [];
  private jsMessages: ConsumerMessages | null = null;
  private lastStreamSeq: number | null = null;
  private pendingAck: JsMsg | null = null;
  private paused = true;
  private readonly held: Item[] = [];
  private store: ObjectStore | null = null;
  private readonly now: () => number;
  private readonly pool: string;
  private readonly startedAtMs: number;

  constructor(
    readonly cfg: PoolConfig,
    private readonly o: RunnerOptions,
  ) {
    this.pool = cfg.name;
    this.now = o.now ?? Date.now;
    this.startedAtMs = this.now();
    this.queue = new WriterQueue<Item>(
      o.queueDepth,
      o.applyBatch,
      (it) => this.apply(it),
      (err, it) => o.log.error({ err, pool: this.pool, kind: it.kind }, 'applying a message failed; continuing'),
    );
  }

  /** Queue a decoded item; while paused (restoring) items are held in order. */
  private enqueue(item: Item, source: string): boolean {
    if (this.paused) {
      this.held.push(item);
      return true;
    }
    if (!this.queue.push(item)) {
      this.o.metrics.dropped.inc({ pool: this.pool, source });
      return false;
    }
    return true;
  }

  private reject(source: string, reason: string, detail: string, subject: string): void {
    this.o.metrics.rejected.inc({ pool: this.pool, source, reason });
    this.o.log.warn({ pool: this.pool, source, reason, detail, subject }, 'message rejected');
  }

  private subscribe(subject: string, source: string, onMsg: (m: Msg) => void): void {
    const sub = this.o.nc.subscribe(subject, {
      callback: (err, m) => {
        if (err) {
          this.o.log.error({ err, subject }, 'subscription error');
          return;
        }
        this.o.metrics.received.inc({ pool: this.pool, source });
        try {
          onMsg(m);
        } catch (e) {
          // Decoders return rejections rather than throw; this guards against bugs.
          this.reject(source, 'internal', e instanceof Error ? e.message : String(e), m.subject);
        }
      },
    });
    this.subs.push(sub);
  }

  /** Subscribe, restore, then start applying. */
  async start(): Promise<void> {
    const { cfg } = this;
    const ns = cfg.namespace;
    const comp = cfg.component;

    // Dynamo's event plane (every topic in a msgpack envelope).
    const onEventPlane = (source: string) => (m: Msg) => {
      const r = decodeEventPlaneMessage(m.data, { topic: m.subject });
      if (!r.ok) return this.reject(source, r.code, r.reason, m.subject);
      const v = r.value;
      if (v.kind === 'kv_event') this.enqueue({ kind: 'kv', event: v.event, streamSeq: null, msg: null }, source);
      else if (v.kind === 'active_load') this.enqueue({ kind: 'load', load: v.load }, source);
      else for (const e of v.events) this.enqueue({ kind: 'seq', event: e }, source);
    };

    if (cfg.kvEvents === 'event_plane') this.subscribe(kvEventsSubject(ns, comp), 'kv_events', onEventPlane('kv_events'));
    if (cfg.kvEvents === 'legacy_json') {
      this.subscribe(legacyKvEventsSubject(ns, comp), 'kv_events', (m) => {
        const r = decodeRouterEventJson(m.data);
        if (!r.ok) return this.reject('kv_events', r.code, r.reason, m.subject);
        this.enqueue({ kind: 'kv', event: r.value, streamSeq: null, msg: null }, 'kv_events');
      });
    }
    // Load reports: the event-plane envelope in current releases; a bare ActiveLoad (msgpack or JSON) is accepted too.
    this.subscribe(kvMetricsSubject(ns), 'kv_metrics', (m) => {
      const kind = sniffMessage(m.data);
      if (kind === 'envelope') return onEventPlane('kv_metrics')(m);
      // A bare report may be msgpack or JSON ('{' first): the decoder must be told which.
      const r = decodeActiveLoad(m.data, { format: kind === 'router_event_json' ? 'json' : 'msgpack' });
      if (!r.ok) return this.reject('kv_metrics', r.code, r.reason, m.subject);
      this.enqueue({ kind: 'load', load: r.value }, 'kv_metrics');
    });
    if (cfg.dynamoRouterSync) {
      this.subscribe(activeSequencesSubject(ns, comp), 'active_sequences', (m) => {
        const kind = sniffMessage(m.data);
        if (kind === 'envelope') return onEventPlane('active_sequences')(m);
        const r = decodeActiveSequenceEvents(m.data, { format: kind === 'router_event_json' ? 'json' : 'msgpack' });
        if (!r.ok) return this.reject('active_sequences', r.code, r.reason, m.subject);
        for (const e of r.value) this.enqueue({ kind: 'seq', event: e }, 'active_sequences');
      });
    }
    // Our own subjects.
    this.subscribe(bookingsSubject(this.pool), 'bookings', (m) => {
      const r = decodeBooking(m.data);
      if (!r.ok) return this.reject('bookings', r.code, r.reason, m.subject);
      this.enqueue({ kind: 'book', booking: r.value }, 'bookings');
    });
    this.subscribe(lifecycleSubject(this.pool), 'lifecycle', (m) => {
      const r = decodeLifecycle(m.data);
      if (!r.ok) return this.reject('lifecycle', r.code, r.reason, m.subject);
      this.enqueue({ kind: 'life', event: r.value }, 'lifecycle');
    });
    this.subscribe(workersSubject(this.pool), 'workers', (m) => {
      const r = decodeRegistration(m.data);
      if (!r.ok) return this.reject('workers', r.code, r.reason, m.subject);
      this.enqueue({ kind: 'reg', reg: r.value }, 'workers');
    });
    await this.o.nc.flush();

    const header = await this.restore();
    for (const w of cfg.workers) {
      this.state.register(BigInt(w.workerId) as WorkerId, capacityOf(cfg.blockSize, w), null, this.now(), true);
    }
    if (cfg.kvEvents === 'jetstream') await this.startJetStream(header?.streamSeq ?? null);

    // Restored: release what queued up meanwhile, in arrival order, then run live.
    this.paused = false;
    for (const it of this.held.splice(0)) this.queue.push(it);
  }

  private async restore(): Promise<SnapshotHeader | null> {
    const mk = (index?: PrefixIndex): PoolState =>
      new PoolState({
        pool: this.pool,
        blockSize: this.cfg.blockSize,
        selection: { kind: 'kv_router', ...this.cfg.selection },
        bookingTtlMs: this.o.bookingTtlMs,
        workerTtlMs: this.o.workerTtlMs,
        ...(index ? { index } : {}),
      });
    this.state = mk();
    if (this.o.snapshotBucket === null) return null;
    try {
      const objm = new Objm(this.o.nc);
      this.store = await objm.create(this.o.snapshotBucket);
      const bytes = await this.store.getBlob(this.pool);
      if (bytes === null) {
        this.o.log.info({ pool: this.pool }, 'no snapshot; starting with an empty index');
        return null;
      }
      const snap = decodeSnapshot(bytes);
      if (snap.header.pool !== this.pool || snap.header.blockSize !== this.cfg.blockSize) {
        throw new Error(`snapshot is for pool ${snap.header.pool} (block size ${snap.header.blockSize})`);
      }
      this.state = mk(PrefixIndex.restore(snap.index));
      const pubs = this.state.adoptRestored(this.now());
      this.restoredAtMs = this.now();
      this.snapshotTakenAtMs = snap.header.takenAtMs;
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
   */
  private async startJetStream(snapshotSeq: number | null): Promise<void> {
    const { nc, log } = this.o;
    const stream = jetStreamKvStreamName(this.cfg.namespace, this.cfg.component);
    const subject = jetStreamKvSubject(this.cfg.namespace, this.cfg.component);
    const jsm = await jetstreamManager(nc);
    try {
      await jsm.streams.info(stream);
    } catch {
      // Dynamo's workers create it; creating it here (same settings) lets the indexer start first.
      await jsm.streams.add({ name: stream, subjects: [subject], max_age: 3600 * 1e9 });
    }
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
      ...(snapshotSeq !== null ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: snapshotSeq + 1 } : { deliver_policy: DeliverPolicy.All }),
    });
    const consumer = await jetstream(nc).consumers.get(stream, durable);
    this.jsMessages = await consumer.consume({ max_messages: 1000 });
    log.info({ pool: this.pool, stream, durable, fromSeq: snapshotSeq === null ? 1 : snapshotSeq + 1 }, 'consuming KV events from JetStream');
    void (async () => {
      for await (const m of this.jsMessages!) {
        this.o.metrics.received.inc({ pool: this.pool, source: 'kv_events_js' });
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
        const item: Item = ev
          ? { kind: 'kv', event: ev, streamSeq: m.seq, msg: m }
          : { kind: 'kv', event: SKIP, streamSeq: m.seq, msg: m }; // keeps the position moving past bad messages
        // A durable stream is never dropped from: wait for room instead.
        while (!this.paused && this.queue.depth >= this.o.queueDepth - 1) await this.queue.idle();
        this.enqueue(item, 'kv_events_js');
      }
    })().catch((e: unknown) => log.error({ err: e, pool: this.pool }, 'JetStream consumption ended'));
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
        const r = s.applyKvEvent(it.event, now);
        if (r.status === 'duplicate') m.duplicates.inc({ pool: this.pool });
        else {
          m.applied.inc({ pool: this.pool, kind: it.event.data.kind });
          if (r.missedEvents > 0n) {
            m.gaps.inc({ pool: this.pool });
            m.missedEvents.inc({ pool: this.pool }, Number(r.missedEvents));
          }
          if (r.unknownParent) m.unknownParents.inc({ pool: this.pool });
        }
        return;
      }
      case 'load':
        m.applied.inc({ pool: this.pool, kind: s.applyLoad(it.load, now) ? 'load' : 'load_foreign_ignored' });
        return;
      case 'seq':
        s.applySequenceEvent(it.event, now);
        m.applied.inc({ pool: this.pool, kind: 'dynamo_sequence' });
        return;
      case 'book': {
        const b = it.booking;
        const out = s.ledger.book({
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
        if (r.remove) s.removeWorker(r.workerId, now);
        else {
          const err = s.register(r.workerId, r.capacity, r.ttlMs, now);
          if (err) this.o.log.warn({ pool: this.pool, workerId: String(r.workerId), err }, 'registration refused');
        }
        m.applied.inc({ pool: this.pool, kind: r.remove ? 'deregister' : 'register' });
        return;
      }
    }
  }

  /** Periodic: expire leaks and silent workers; ack JetStream progress; refresh gauges. */
  housekeeping(): void {
    const now = this.now();
    const before = this.state.ledger.counters().expiredLeaks;
    const { workersRemoved } = this.state.tick(now);
    const leaked = this.state.ledger.counters().expiredLeaks - before;
    if (leaked > 0) this.o.metrics.leaks.inc({ pool: this.pool }, leaked);
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
      { pool: this.pool, blockSize: this.cfg.blockSize, takenAtMs: now, streamSeq: this.lastStreamSeq, registrations: regs },
      this.state.index.snapshot(),
    );
    await this.store.putBlob({ name: this.pool }, bytes);
    this.snapshotTakenAtMs = now;
    this.o.metrics.snapshots.inc({ pool: this.pool, outcome: 'written' });
    this.o.metrics.snapshotBytes.set({ pool: this.pool }, bytes.length);
    return bytes.length;
  }

  /** Stop intake; resolve when everything queued has been applied. */
  async stopIntake(): Promise<void> {
    for (const s of this.subs) {
      try {
        await s.drain();
      } catch {
        /* connection already closed */
      }
    }
    if (this.jsMessages) await this.jsMessages.close();
    this.queue.stop();
    await this.queue.idle();
    if (this.pendingAck) this.pendingAck.ack();
  }

  get uptimeMs(): number {
    return this.now() - this.startedAtMs;
  }
}

/** Placeholder event for a JetStream message that failed to decode: advances the position only. */
const SKIP = Object.freeze({}) as KvEvent;

export function capacityOf(
  blockSize: number,
  w: { totalKvBlocks: number; maxNumBatchedTokens: number; maxNumSeqs: number; dpStartRank: number; dpSize: number; schedulable: boolean },
): WorkerCapacity {
  return {
    blockSize,
    totalKvBlocks: w.totalKvBlocks,
    maxNumBatchedTokens: w.maxNumBatchedTokens,
    maxNumSeqs: w.maxNumSeqs,
    dpStartRank: w.dpStartRank,
    dpSize: w.dpSize,
    schedulable: w.schedulable,
  };
}
