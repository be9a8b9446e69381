/**
 * Everything the indexer knows about one model pool, as plain synchronous state:
 * the prefix index, the booked work, the workers' own load reports and their
 * registrations. The service feeds it decoded messages from a single queue (one
 * writer), so an `observe` never sees a half-applied event; the offline tools
 * can drive the very same class without NATS.
 */
import { BookingLedger, applyActiveSequenceEvent, type WorkerCapacity, type WorkerLoad } from '@vantage/bookings';
import { sequenceHashes } from '@vantage/hashing';
import { PrefixIndex, type ApplyResult, type SuspectInfo, type WorkerMatch } from '@vantage/prefix-index';
import {
  seededRng,
  selectWorker,
  type CandidateInput,
  type KvRouterPolicy,
  type Rng,
  type SelectionResult,
} from '@vantage/selection';
import type { KvEvent, WorkerId } from '@vantage/types';
import type { ActiveLoad, ActiveSequenceEvent } from '@vantage/wire';

export interface PoolOptions {
  readonly pool: string;
  readonly blockSize: number;
  /** How Dynamo's own router would pick (reported beside our facts). */
  readonly selection: KvRouterPolicy;
  readonly bookingTtlMs: number;
  /** A worker that neither publishes nor renews its registration for this long is removed. */
  readonly workerTtlMs: number;
  /** Seed for the selection RNG (temperature sampling, random tie-breaks). */
  readonly seed?: number;
  /** A restored index (from a snapshot) instead of an empty one. */
  readonly index?: PrefixIndex;
}

/** A worker's own load report (`kv_metrics`), with when it arrived. */
export interface LoadReport {
  readonly activeDecodeBlocks: number | null;
  readonly activePrefillTokens: number | null;
  readonly kvUsedBlocks: number | null;
  readonly atMs: number;
}

export interface Registration {
  readonly capacity: WorkerCapacity;
  /** Registration lifetime; the worker must renew (or publish) within it. */
  readonly ttlMs: number | null;
  readonly atMs: number;
  /** From configuration: never expires. */
  readonly static: boolean;
}

/** One (worker, dp rank)'s facts for an observe answer. Times are the pool clock (ms since epoch). */
export interface WorkerObservation {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly registered: boolean;
  readonly schedulable: boolean | null;
  /** Advertised capacity (registration or configuration), or null when unknown. */
  readonly capacity: WorkerCapacity | null;
  readonly match: WorkerMatch | null;
  readonly load: WorkerLoad;
  readonly report: LoadReport | null;
  /** Dynamo's effective prefill tokens for this request here: max(0, N - deviceBlocks*bs). */
  readonly effectivePrefillTokens: number;
  /** This request's blocks not already active on the worker. */
  readonly newRequestBlocks: number;
  readonly suspect: SuspectInfo | null;
  readonly lastEventMs: number | null;
  readonly lastSeenMs: number | null;
}

export interface PoolObservation {
  readonly pool: string;
  readonly blockSize: number;
  readonly requestBlocks: number;
  readonly promptTokens: number;
  readonly atMs: number;
  readonly workers: WorkerObservation[];
  /** Candidates in the same order as `workers` and the selection over them. */
  readonly selection: SelectionResult;
  /** Dynamo's cost of each worker, aligned with `workers`; null where not scored (unschedulable, or a policy without costs). */
  readonly costs: (number | null)[];
  /** Index into `workers` of Dynamo's choice, or -1. */
  readonly chosenIndex: number;
  readonly pending: { readonly requests: number; readonly tokens: number };
}

export interface PoolCounters {
  kvEvents: number;
  kvEventsIgnoredRemovedWorker: number;
  loadReports: number;
  /** Load reports from workers of another pool sharing the namespace-wide subject. */
  loadReportsForeign: number;
  sequenceEvents: number;
  registrations: number;
  workersExpired: number;
  bookingsExpired: number;
}

const key = (w: bigint, dp: number): string => `${w}:${dp}`;

export class PoolState {
  readonly name: string;
  readonly blockSize: number;
  readonly index: PrefixIndex;
  readonly ledger: BookingLedger;
  readonly counters: PoolCounters = {
    kvEvents: 0,
    kvEventsIgnoredRemovedWorker: 0,
    loadReports: 0,
    loadReportsForeign: 0,
    sequenceEvents: 0,
    registrations: 0,
    workersExpired: 0,
    bookingsExpired: 0,
  };
  private readonly opts: PoolOptions;
  private readonly reports = new Map<string, LoadReport>();
  private readonly registrations = new Map<bigint, Registration>();
  /** Last time anything was heard from a worker (events, load, registration). */
  private readonly lastSeen = new Map<bigint, number>();
  /** (worker, dp) pairs known from any source, for enumerating candidates. */
  private readonly ranks = new Map<string, { workerId: WorkerId; dpRank: number }>();
  private readonly rng: Rng;
  private lastChangeMs: number | null = null;
  /** knownRanks() sorted, rebuilt only when the set of ranks changes (observe is the hot path). */
  private sortedRanks: { workerId: WorkerId; dpRank: number }[] | null = null;

  constructor(opts: PoolOptions) {
    this.opts = opts;
    this.name = opts.pool;
    this.blockSize = opts.blockSize;
    this.index = opts.index ?? new PrefixIndex(opts.blockSize);
    if (this.index.blockSize !== opts.blockSize) throw new RangeError(`restored index has block size ${this.index.blockSize}, pool ${opts.pool} has ${opts.blockSize}`);
    this.ledger = new BookingLedger({ blockSize: opts.blockSize, ttlMs: opts.bookingTtlMs });
    this.rng = seededRng(opts.seed ?? 0x5eed);
  }

  /**
   * After restoring a snapshot: know every publisher the index holds, and give each the
   * full worker TTL from now to speak again before it is removed as gone.
   */
  adoptRestored(nowMs: number): number {
    const pubs = this.index.stats().publishers;
    for (const p of pubs) {
      const k = key(p.workerId, p.dpRank);
      if (!this.ranks.has(k)) this.ranks.set(k, { workerId: p.workerId, dpRank: p.dpRank });
      this.lastSeen.set(p.workerId, nowMs);
      this.sortedRanks = null;
    }
    return pubs.length;
  }

  private touch(workerId: WorkerId, dpRank: number | null, nowMs: number): void {
    this.lastSeen.set(workerId, nowMs);
    if (dpRank !== null) {
      const k = key(workerId, dpRank);
      if (!this.ranks.has(k)) {
        this.ranks.set(k, { workerId, dpRank });
        this.sortedRanks = null;
      }
    }
    this.lastChangeMs = nowMs;
  }

  applyKvEvent(ev: KvEvent, nowMs: number): ApplyResult {
    this.counters.kvEvents++;
    this.touch(ev.workerId, ev.dpRank, nowMs);
    return this.index.apply(ev, nowMs);
  }

  /**
   * A load report. `kv_metrics` is scoped to the namespace, not the component, so several pools
   * may share the subject: only reports from workers this pool already knows (registered, or
   * seen publishing KV events or booked) are taken; the rest are counted as foreign and ignored.
   */
  applyLoad(l: ActiveLoad, nowMs: number): boolean {
    if (!this.lastSeen.has(l.workerId) && !this.registrations.has(l.workerId)) {
      this.counters.loadReportsForeign++;
      return false;
    }
    this.counters.loadReports++;
    this.touch(l.workerId, l.dpRank, nowMs);
    this.reports.set(key(l.workerId, l.dpRank), {
      activeDecodeBlocks: l.activeDecodeBlocks,
      activePrefillTokens: l.activePrefillTokens,
      kvUsedBlocks: l.kvUsedBlocks,
      atMs: nowMs,
    });
    return true;
  }

  /** Another Dynamo router's booking traffic (router replica sync), so its load shows in R and P. */
  applySequenceEvent(ev: ActiveSequenceEvent, nowMs: number): void {
    this.counters.sequenceEvents++;
    if (ev.data.kind === 'add_request') this.touch(ev.workerId, ev.dpRank, nowMs);
    applyActiveSequenceEvent(
      this.ledger,
      {
        requestId: ev.requestId,
        workerId: ev.workerId,
        dpRank: ev.dpRank,
        routerId: ev.routerId,
        loraName: ev.loraName,
        data:
          ev.data.kind === 'add_request'
            ? {
                kind: 'add_request',
                tokenSequence: ev.data.tokenSequence,
                trackPrefillTokens: ev.data.trackPrefillTokens,
                expectedOutputTokens: ev.data.expectedOutputTokens,
                prefillLoadHint: ev.data.prefillLoadHint
                  ? {
                      initialEffectivePrefillTokens: ev.data.prefillLoadHint.initialEffectivePrefillTokens,
                      expectedPrefillDurationMs: null,
                    }
                  : null,
              }
            : ev.data,
      },
      nowMs,
    );
  }

  register(workerId: WorkerId, capacity: WorkerCapacity, ttlMs: number | null, nowMs: number, isStatic = false): string | undefined {
    const r = this.ledger.setWorker(workerId, capacity, nowMs);
    if (r.kind === 'invalid') return r.reason ?? 'invalid capacity';
    this.counters.registrations++;
    this.registrations.set(workerId, { capacity, ttlMs, atMs: nowMs, static: isStatic });
    for (let i = 0; i < capacity.dpSize; i++) this.touch(workerId, capacity.dpStartRank + i, nowMs);
    return undefined;
  }

  /** Remove a worker everywhere (index, bookings, reports). */
  removeWorker(workerId: WorkerId, nowMs: number): void {
    this.index.removeWorker(workerId);
    this.ledger.removeWorker(workerId, nowMs);
    this.registrations.delete(workerId);
    this.lastSeen.delete(workerId);
    for (const [k, v] of this.ranks) {
      if (v.workerId === workerId) {
        this.ranks.delete(k);
        this.reports.delete(k);
      }
    }
    this.sortedRanks = null;
    this.lastChangeMs = nowMs;
  }

  /**
   * Periodic housekeeping: expire leaked bookings; remove workers that stopped
   * publishing and did not renew a registration within their TTL.
   */
  tick(nowMs: number): { bookingsExpired: number; workersRemoved: WorkerId[] } {
    const bookingsExpired = this.ledger.expire(nowMs);
    this.counters.bookingsExpired += bookingsExpired;
    const removed: WorkerId[] = [];
    for (const [w, seen] of this.lastSeen) {
      const reg = this.registrations.get(w);
      if (reg?.static) continue;
      const ttl = reg?.ttlMs ?? this.opts.workerTtlMs;
      if (nowMs - seen > ttl) removed.push(w as WorkerId);
    }
    for (const w of removed) this.removeWorker(w, nowMs);
    this.counters.workersExpired += removed.length;
    return { bookingsExpired, workersRemoved: removed };
  }

  registration(workerId: WorkerId): Registration | undefined {
    return this.registrations.get(workerId);
  }

  get lastChange(): number | null {
    return this.lastChangeMs;
  }

  /** All (worker, dp rank) pairs known to the pool, in a stable order. */
  knownRanks(): readonly { workerId: WorkerId; dpRank: number }[] {
    this.sortedRanks ??= [...this.ranks.values()].sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : a.dpRank - b.dpRank));
    return this.sortedRanks;
  }

  /**
   * Facts for a prompt given as local block hashes: per (worker, dp rank) reuse,
   * booked work, load report, ages, suspect flags, and the worker Dynamo's cost
   * would pick. Pure read: nothing is booked. `sequence`, when the caller already has the
   * prompt's sequence hashes (the offline replay does), saves hashing them again; it must be
   * `sequenceHashes(localHashes)`.
   */
  observe(localHashes: BigUint64Array, promptTokens: number, nowMs: number, sequence?: BigUint64Array): PoolObservation {
    const m = this.index.match(localHashes);
    const byKey = new Map<string, WorkerMatch>();
    for (const w of m.workers) {
      const k = key(w.workerId, w.dpRank);
      byKey.set(k, w);
      if (!this.ranks.has(k)) {
        this.ranks.set(k, { workerId: w.workerId, dpRank: w.dpRank });
        this.sortedRanks = null;
      }
    }
    // Sequence hashes are only needed to count blocks already active on a worker;
    // skip hashing when nothing is booked anywhere (then every block is new).
    const seq = this.ledger.size > 0 ? (sequence ?? sequenceHashes(localHashes)) : null;
    const requestBlocks = Math.ceil(promptTokens / this.blockSize);
    const workers: WorkerObservation[] = [];
    const candidates: CandidateInput[] = [];
    let pendingRequests = 0;
    let pendingTokens = 0;
    for (const { workerId, dpRank } of this.knownRanks()) {
      const k = key(workerId, dpRank);
      const match = byKey.get(k) ?? null;
      const reg = this.registrations.get(workerId);
      const load = this.ledger.load(workerId, dpRank);
      const device = match?.deviceBlocks ?? 0;
      const newRequestBlocks = seq ? this.ledger.newBlocksOfChain(workerId, dpRank, seq) + Math.max(0, requestBlocks - seq.length) : requestBlocks;
      const obs: WorkerObservation = {
        workerId,
        dpRank,
        registered: reg !== undefined,
        schedulable: reg ? reg.capacity.schedulable : null,
        capacity: reg ? reg.capacity : null,
        match,
        load,
        report: this.reports.get(k) ?? null,
        effectivePrefillTokens: Math.max(0, promptTokens - device * this.blockSize),
        newRequestBlocks,
        suspect: match?.suspect ?? this.index.suspectOf(workerId, dpRank),
        lastEventMs: match?.lastEventMs ?? null,
        lastSeenMs: this.lastSeen.get(workerId) ?? null,
      };
      workers.push(obs);
      pendingRequests += load.prefillRequests;
      pendingTokens += load.trackedPrefillTokens;
      candidates.push({
        workerId,
        dpRank,
        overlapBlocks: device,
        hostOverlapBlocks: Math.max(0, (match?.hostBlocks ?? 0) - device),
        diskOverlapBlocks: Math.max(0, (match?.diskBlocks ?? 0) - (match?.hostBlocks ?? 0)),
        activePrefillTokens: load.trackedPrefillTokens,
        activeDecodeBlocks: load.activeBlocks,
        activeRequests: load.requests,
        newRequestBlocks,
        treeSize: match?.treeSize ?? 0,
      });
    }
    // Dynamo only routes to schedulable workers; unregistered ones (capacity unknown) stay eligible
    // so a pool without registrations still gets an answer.
    const eligibleIdx: number[] = [];
    for (let i = 0; i < workers.length; i++) if (workers[i]!.schedulable !== false) eligibleIdx.push(i);
    const eligible = eligibleIdx.map((i) => candidates[i]!);
    const selection =
      promptTokens > 0
        ? selectWorker(this.opts.selection, { isl: promptTokens, blockSize: this.blockSize }, eligible, this.rng)
        : ({ chosen: null, sense: 'lower-is-better', scores: [], reason: 'no_candidates' } as SelectionResult);
    const costs: (number | null)[] = new Array<number | null>(workers.length).fill(null);
    for (let j = 0; j < selection.scores.length; j++) {
      const sc = selection.scores[j]!.score;
      costs[eligibleIdx[j]!] = Number.isNaN(sc) ? null : sc;
    }
    const chosenIndex = selection.chosen ? eligibleIdx[selection.chosen.index]! : -1;
    return {
      pool: this.name,
      blockSize: this.blockSize,
      requestBlocks: m.requestBlocks,
      promptTokens,
      atMs: nowMs,
      workers,
      selection,
      costs,
      chosenIndex,
      pending: { requests: pendingRequests, tokens: pendingTokens },
    };
  }
}
