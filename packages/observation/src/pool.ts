/** One model pool's observable state (README.md). A single writer feeds it, so an `observe` never sees a half-applied event. */
import { BookingLedger, applyActiveSequenceEvent, type RankRef, type WorkerCapacity, type WorkerLoad, type WorkerLoadRecord } from '@vantage/bookings';
import { sequenceHashes } from '@vantage/hashing';
import { PrefixIndex, type ApplyResult, type RecoverResult, type SuspectInfo, type WorkerMatch } from '@vantage/prefix-index';
import {
  SelectionScratch,
  candidateRecord,
  seededRng,
  selectWorker,
  type CandidateInput,
  type CandidateRecord,
  type KvRouterPolicy,
  type Rng,
  type SelectionResult,
} from '@vantage/selection';
import type { ForwardPassObservation, ReportedLoad } from '@vantage/protocol';
import type { KvEvent, WorkerId } from '@vantage/types';
import type { ActiveLoad, ActiveSequenceEvent, ForwardPassMetrics } from '@vantage/wire';

interface PoolOptions {
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
  /** Bounds on what publishers can make the pool hold (`admit*`); absent: unbounded (offline tools, trusted input). */
  readonly limits?: PoolLimits;
}

/**
 * Bounds on the pool's tables against any publisher: checked by `admitRank`, `admitRegistration` and
 * `admitBooking` before a message is applied (a refused message changes nothing).
 */
export interface PoolLimits {
  /** dp ranks one worker may have (a registration's `dpSize`, and ranks seen in events). */
  readonly dpRanksPerWorker: number;
  /** Distinct workers in the pool. */
  readonly workers: number;
  /** (worker, dp rank) pairs in the pool: at most what one observe reply can carry. */
  readonly ranks: number;
  /** Open bookings on one (worker, dp rank). */
  readonly bookingsPerRank: number;
  /** Open bookings in the pool. */
  readonly bookings: number;
}

/** Which bound refused a message (a metric label). */
export type PoolLimitName = 'dp_ranks_per_worker' | 'workers_per_pool' | 'ranks_per_pool' | 'bookings_per_rank' | 'bookings_per_pool';

/** A worker's own load report (`kv_metrics`), with when it arrived. */
type LoadReport = ReportedLoad & { readonly atMs: number };

/** A worker's own last `forward-pass-metrics` report (Dynamo 1.6.1), with when it arrived. */
type ForwardPassReport = Omit<ForwardPassObservation, 'ageMs'> & { readonly atMs: number };

interface Registration {
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
  /** Its last forward-pass report; null when none arrived. */
  readonly forwardPass: ForwardPassReport | null;
  /** When its blocks were last recovered from its own local index (`applyRecovery`); null if never. */
  readonly recoveredAtMs: number | null;
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

/** One worker known to the pool: registration, liveness and its (worker, dp rank) slots. */
interface WorkerSlot {
  readonly workerId: WorkerId;
  reg: Registration | undefined;
  /** Last time anything was heard from the worker (events, load, registration); null if never. */
  lastSeen: number | null;
  readonly ranks: RankSlot[];
}

/**
 * One (worker, dp rank): what observe enumerates. Exposed read-only through `knownRanks()`.
 * Observe reads every rank of the pool on every query, usually with the CPU's caches cold (one
 * request at a time, other processes in between), so what it needs of a rank is reachable from
 * here in as few steps as possible: the worker's registration is mirrored here, the ledger's
 * state is reached through a resolved handle, and the transient answer's records hang off it.
 */
interface RankSlot {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** What observe reads of the worker's registration (`worker.reg`), mirrored (set by `register`); null when unregistered. */
  capacity: WorkerCapacity | null;
  schedulable: boolean | null;
  /** `worker.lastSeen`, mirrored (every write of it goes through `touch`). */
  lastSeen: number | null;
  /** The rank's own last load report (`kv_metrics`). */
  report: LoadReport | null;
  /** The rank's own last `forward-pass-metrics`. */
  forwardPass: ForwardPassReport | null;
  /** Its last recovery from the worker's local index. */
  recoveredAtMs: number | null;
  /** Position in the sorted rank list (valid while that list is). */
  pos: number;
  /** The rank in the booking ledger, resolved once. */
  readonly ref: RankRef;
  /** This rank's records in `observeTransient` answers, overwritten by each one (null until first used). */
  obs: RankScratch['obs'] | null;
  cand: RankScratch['cand'] | null;
  load: RankScratch['load'] | null;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

interface RankScratch {
  readonly obs: Mutable<WorkerObservation>;
  readonly cand: CandidateRecord;
  readonly load: WorkerLoadRecord;
}

/** The pool-owned arrays an `observeTransient` answer is built in. */
interface ObserveScratch {
  matches: (WorkerMatch | null)[];
  workers: WorkerObservation[];
  candidates: CandidateInput[];
  costs: (number | null)[];
  eligibleIdx: number[];
  eligible: CandidateInput[];
}

export class PoolState {
  readonly name: string;
  readonly blockSize: number;
  readonly index: PrefixIndex;
  readonly ledger: BookingLedger;
  private readonly opts: PoolOptions;
  /**
   * Every worker known from any source. Observe walks dense per-rank slots rather than looking
   * facts up by (worker, rank) keys: with 64 workers, building `${worker}:${rank}` strings and
   * hashing them cost more than the index match itself.
   */
  private readonly workers = new Map<bigint, WorkerSlot>();
  /** Rank slots over all workers (what `limits.ranks` bounds). */
  private rankTotal = 0;
  private readonly rng: Rng;
  /** All rank slots sorted by (worker, rank), rebuilt only when the set of ranks changes (observe is the hot path). */
  private sortedRanks: RankSlot[] | null = null;
  /** Bumped whenever a rank slot is added or removed. */
  private generation = 0;
  /**
   * The rank slot of each entry of the last match result, valid for `matchGeneration` if the match
   * lists the same ranks (checked against flat copies of their ids, not the slots themselves).
   */
  private matchSlots: RankSlot[] = [];
  private matchIds: bigint[] = [];
  private matchRanks = new Uint32Array(0);
  /** The match records that mapping was last confirmed for (see `slotsOf`). */
  private matchRecs: WorkerMatch[] = [];
  private matchGeneration = -1;
  /** Scratch for a prompt's sequence hashes (observe is synchronous and never hands them out). */
  private seqScratch = new BigUint64Array(0);
  /** Arrays of the last `observeTransient` answer, reused by the next one. */
  private readonly scratch: ObserveScratch = { matches: [], workers: [], candidates: [], costs: [], eligibleIdx: [], eligible: [] };
  /**
   * Score records of the last `observeTransient` selection, reused by the next one. `sorted()` lists
   * ranks in (workerId, dpRank) order, and the pick's eligible ranks keep that order: said once here.
   */
  private readonly selectionScratch = new SelectionScratch({ candidatesInOrder: true });
  constructor(opts: PoolOptions) {
    this.opts = opts;
    this.name = opts.pool;
    this.blockSize = opts.blockSize;
    this.index = opts.index ?? new PrefixIndex(opts.blockSize);
    if (this.index.blockSize !== opts.blockSize) throw new RangeError(`restored index has block size ${this.index.blockSize}, pool ${opts.pool} has ${opts.blockSize}`);
    this.ledger = new BookingLedger({ blockSize: opts.blockSize, ttlMs: opts.bookingTtlMs });
    this.rng = seededRng(opts.seed ?? 0x5eed);
  }

  private workerSlot(workerId: WorkerId): WorkerSlot {
    let w = this.workers.get(workerId);
    if (w === undefined) {
      w = { workerId, reg: undefined, lastSeen: null, ranks: [] };
      this.workers.set(workerId, w);
    }
    return w;
  }

  private rankSlot(w: WorkerSlot, dpRank: number): RankSlot {
    for (const r of w.ranks) if (r.dpRank === dpRank) return r;
    const r: RankSlot = {
      workerId: w.workerId,
      dpRank,
      capacity: w.reg ? w.reg.capacity : null,
      schedulable: w.reg ? w.reg.capacity.schedulable : null,
      lastSeen: w.lastSeen,
      report: null,
      forwardPass: null,
      recoveredAtMs: null,
      pos: -1,
      ref: this.ledger.rankRef(w.workerId, dpRank),
      obs: null,
      cand: null,
      load: null,
    };
    w.ranks.push(r);
    this.rankTotal++;
    this.sortedRanks = null;
    this.generation++;
    return r;
  }

  /** Distinct workers known to the pool. */
  get workerCount(): number {
    return this.workers.size;
  }

  /** (worker, dp rank) pairs known to the pool. */
  get rankCount(): number {
    return this.rankTotal;
  }

  /**
   * Whether a message naming (worker, dp rank) may be applied: null when the pair is known or fits
   * the limits, else the limit it would break. `dpRank` null: only the worker is named.
   */
  admitRank(workerId: WorkerId, dpRank: number | null): PoolLimitName | null {
    const L = this.opts.limits;
    if (L === undefined) return null;
    const w = this.workers.get(workerId);
    if (w === undefined) {
      if (this.workers.size >= L.workers) return 'workers_per_pool';
      return dpRank !== null && this.rankTotal >= L.ranks ? 'ranks_per_pool' : null;
    }
    if (dpRank === null) return null;
    for (const r of w.ranks) if (r.dpRank === dpRank) return null;
    if (w.ranks.length >= L.dpRanksPerWorker) return 'dp_ranks_per_worker';
    return this.rankTotal >= L.ranks ? 'ranks_per_pool' : null;
  }

  /** `admitRank` for a registration: its whole dp range must fit (checked before any rank is made). */
  admitRegistration(workerId: WorkerId, capacity: Pick<WorkerCapacity, 'dpStartRank' | 'dpSize'>): PoolLimitName | null {
    const L = this.opts.limits;
    if (L === undefined) return null;
    if (capacity.dpSize > L.dpRanksPerWorker) return 'dp_ranks_per_worker';
    const w = this.workers.get(workerId);
    if (w === undefined && this.workers.size >= L.workers) return 'workers_per_pool';
    let added = 0;
    for (let i = 0; i < capacity.dpSize; i++) {
      const rank = capacity.dpStartRank + i;
      if (w === undefined || !w.ranks.some((r) => r.dpRank === rank)) added++;
    }
    if (w !== undefined && w.ranks.length + added > L.dpRanksPerWorker) return 'dp_ranks_per_worker';
    return added > 0 && this.rankTotal + added > L.ranks ? 'ranks_per_pool' : null;
  }

  /** Whether a new booking on (worker, dp rank) fits the booking limits (a repeated request id always passes: it books nothing). */
  admitBooking(requestId: string, workerId: WorkerId, dpRank: number): PoolLimitName | null {
    const L = this.opts.limits;
    if (L === undefined || this.ledger.get(requestId) !== undefined) return null;
    if (this.ledger.size >= L.bookings) return 'bookings_per_pool';
    if (this.ledger.load(workerId, dpRank).requests >= L.bookingsPerRank) return 'bookings_per_rank';
    return null;
  }

  /**
   * After restoring a snapshot: know every publisher the index holds, and give each the
   * full worker TTL from now to speak again before it is removed as gone.
   */
  adoptRestored(nowMs: number): number {
    const pubs = this.index.stats().publishers;
    for (const p of pubs) this.touch(p.workerId, p.dpRank, nowMs);
    return pubs.length;
  }

  /** The worker was heard from on `dpRank`: its last-seen time, on the worker and each of its rank slots (made when new). */
  private touch(workerId: WorkerId, dpRank: number, nowMs: number): RankSlot {
    const w = this.workerSlot(workerId);
    w.lastSeen = nowMs;
    for (const r of w.ranks) r.lastSeen = nowMs;
    return this.rankSlot(w, dpRank);
  }

  applyKvEvent(ev: KvEvent, nowMs: number): ApplyResult {
    this.touch(ev.workerId, ev.dpRank, nowMs);
    return this.index.apply(ev, nowMs);
  }

  /**
   * A (worker, dp rank)'s blocks as its own local index reported them (Dynamo's recovery tree
   * dump): the publisher's state is replaced and its event-id position set to `lastEventId`
   * (`PrefixIndex.recover`). Throws RangeError, before changing anything, when an event names another
   * worker or rank or is structurally invalid.
   */
  applyRecovery(workerId: WorkerId, dpRank: number, events: readonly KvEvent[], lastEventId: bigint, nowMs: number): RecoverResult {
    const r = this.index.recover(workerId, dpRank, events, lastEventId, nowMs);
    this.touch(workerId, dpRank, nowMs).recoveredAtMs = nowMs;
    return r;
  }

  /**
   * A load report. `kv_metrics` is scoped to the namespace, not the component, so several pools
   * may share the subject: only reports from workers this pool already knows (registered, or
   * seen publishing KV events or booked) are taken; the rest are foreign: ignored, and false is returned.
   */
  applyLoad(l: ActiveLoad, nowMs: number, adoptUnknown = false): boolean {
    const known = this.workers.get(l.workerId);
    // adoptUnknown: the report came on a subject scoped to this pool's own endpoint (Dynamo 1.6.1),
    // so it cannot be another pool's; a worker's first report may precede its first KV event.
    if (!adoptUnknown && (known === undefined || (known.lastSeen === null && known.reg === undefined))) {
      return false;
    }
    const r = this.touch(l.workerId, l.dpRank, nowMs);
    r.report = {
      activeDecodeBlocks: l.activeDecodeBlocks,
      activePrefillTokens: l.activePrefillTokens,
      kvUsedBlocks: l.kvUsedBlocks,
      atMs: nowMs,
    };
    return true;
  }

  /**
   * A worker's `forward-pass-metrics` (about once a second per rank, even idle): its scheduler's
   * scheduled and queued work, and a sign of life. Arrives on the pool's endpoint-scoped subject,
   * so an unknown worker is adopted as for a scoped load report.
   */
  applyForwardPass(m: ForwardPassMetrics, nowMs: number): void {
    const r = this.touch(m.workerId, m.dpRank, nowMs);
    r.forwardPass = {
      scheduledRequests: m.scheduled.prefillRequests + m.scheduled.decodeRequests,
      scheduledPrefillTokens: m.scheduled.prefillTokens,
      scheduledDecodeKvTokens: m.scheduled.decodeKvTokens,
      queuedRequests: m.queued.prefillRequests + m.queued.decodeRequests,
      queuedPrefillTokens: m.queued.prefillTokens,
      wallTimeS: m.wallTime,
      atMs: nowMs,
    };
  }

  /** Another Dynamo router's booking traffic (router replica sync), so its load shows in R and P. */
  applySequenceEvent(ev: ActiveSequenceEvent, nowMs: number): void {
    if (ev.data.kind === 'add_request') this.touch(ev.workerId, ev.dpRank, nowMs);
    applyActiveSequenceEvent(this.ledger, ev, nowMs);
  }

  register(workerId: WorkerId, capacity: WorkerCapacity, ttlMs: number | null, nowMs: number, isStatic = false): string | undefined {
    const r = this.ledger.setWorker(workerId, capacity, nowMs);
    if (r.kind === 'invalid') return r.reason ?? 'invalid capacity';
    const w = this.workerSlot(workerId);
    w.reg = { capacity, ttlMs, atMs: nowMs, static: isStatic };
    for (const r of w.ranks) {
      r.capacity = capacity;
      r.schedulable = capacity.schedulable;
    }
    for (let i = 0; i < capacity.dpSize; i++) this.touch(workerId, capacity.dpStartRank + i, nowMs);
    // Each dp rank's cache size sizes its block-id table in the index up front (no growth while it fills).
    this.index.expectBlocks(workerId, capacity.totalKvBlocks ?? 0);
    return undefined;
  }

  /** Remove a worker everywhere (index, bookings, reports). */
  removeWorker(workerId: WorkerId, nowMs: number): void {
    this.index.removeWorker(workerId);
    this.ledger.removeWorker(workerId, nowMs);
    const gone = this.workers.get(workerId);
    if (gone !== undefined) this.rankTotal -= gone.ranks.length;
    if (this.workers.delete(workerId)) {
      this.sortedRanks = null;
      this.generation++;
    }
  }

  /**
   * Periodic housekeeping: expire leaked bookings; remove workers that stopped
   * publishing and did not renew a registration within their TTL.
   */
  tick(nowMs: number): { bookingsExpired: number; workersRemoved: WorkerId[] } {
    const bookingsExpired = this.ledger.expire(nowMs);
    const removed: WorkerId[] = [];
    for (const w of this.workers.values()) {
      if (w.lastSeen === null || w.reg?.static) continue;
      const ttl = w.reg?.ttlMs ?? this.opts.workerTtlMs;
      if (nowMs - w.lastSeen > ttl) removed.push(w.workerId);
    }
    for (const w of removed) this.removeWorker(w, nowMs);
    return { bookingsExpired, workersRemoved: removed };
  }

  registration(workerId: WorkerId): Registration | undefined {
    return this.workers.get(workerId)?.reg;
  }

  /** All (worker, dp rank) pairs known to the pool, in a stable order. */
  knownRanks(): readonly { readonly workerId: WorkerId; readonly dpRank: number }[] {
    return this.sorted();
  }

  private sorted(): RankSlot[] {
    if (this.sortedRanks === null) {
      const all: RankSlot[] = [];
      for (const w of this.workers.values()) for (const r of w.ranks) all.push(r);
      all.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : a.dpRank - b.dpRank));
      for (let i = 0; i < all.length; i++) all[i]!.pos = i;
      this.sortedRanks = all;
    }
    return this.sortedRanks;
  }

  /**
   * The rank slot of each worker of a match result. The index lists its publishers in the same
   * order from one match to the next, so the previous mapping is reused after checking that it
   * still lists the same (worker, rank) pairs; otherwise (and for ranks first seen here) it is rebuilt.
   */
  private slotsOf(ws: readonly WorkerMatch[]): RankSlot[] {
    const prev = this.matchSlots;
    if (this.matchGeneration === this.generation && prev.length === ws.length) {
      const ids = this.matchIds;
      const dps = this.matchRanks;
      const recs = this.matchRecs;
      let same = true;
      for (let i = 0; i < ws.length; i++) {
        const w = ws[i]!;
        // A transient match reuses one record per publisher, whose identity never changes: the same
        // record object is the same (worker, rank), and its bigint id need not be read.
        if (w === recs[i]) continue;
        if (w.workerId !== ids[i] || w.dpRank !== dps[i]) {
          same = false;
          break;
        }
        recs[i] = w;
      }
      if (same) return prev;
    }
    const out = new Array<RankSlot>(ws.length);
    for (let i = 0; i < ws.length; i++) out[i] = this.rankSlot(this.workerSlot(ws[i]!.workerId), ws[i]!.dpRank);
    this.matchSlots = out;
    this.matchIds = ws.map((w) => w.workerId);
    this.matchRanks = Uint32Array.from(ws, (w) => w.dpRank);
    this.matchRecs = ws.slice();
    this.matchGeneration = this.generation;
    return out;
  }

  /**
   * Facts for a prompt given as local block hashes: per (worker, dp rank) reuse,
   * booked work, load report, ages, suspect flags, and the worker Dynamo's cost
   * would pick. Pure read: nothing is booked. `sequence`, when the caller already has the
   * prompt's sequence hashes (the offline replay does), saves hashing them again; it must be
   * `sequenceHashes(localHashes)`.
   */
  observe(localHashes: BigUint64Array, promptTokens: number, nowMs: number, sequence?: BigUint64Array): PoolObservation {
    return this.run(localHashes, promptTokens, nowMs, sequence, false);
  }

  /**
   * `observe` for a caller that consumes the answer at once (the service encodes its reply
   * synchronously): the answer's arrays and its per-rank observation, load, candidate and match
   * records belong to the pool (the match records to its index) and are overwritten by the next
   * `observeTransient`, so a query allocates about four objects per rank fewer.
   * Same content as `observe` (tested); copy anything kept.
   */
  observeTransient(localHashes: BigUint64Array, promptTokens: number, nowMs: number): PoolObservation {
    return this.run(localHashes, promptTokens, nowMs, undefined, true);
  }

  /** A rank's reused answer records (made on its first transient answer). */
  private rankScratch(r: RankSlot): RankScratch {
    if (r.obs !== null && r.cand !== null && r.load !== null) return r as RankScratch;
    const rs = newRankScratch(r);
    r.obs = rs.obs;
    r.cand = rs.cand;
    r.load = rs.load;
    return rs;
  }

  private run(localHashes: BigUint64Array, promptTokens: number, nowMs: number, sequence: BigUint64Array | undefined, reuse: boolean): PoolObservation {
    // A transient answer reads the index's transient match records (overwritten by the next one, as its own are).
    const m = reuse ? this.index.matchTransient(localHashes) : this.index.match(localHashes);
    const matched = this.slotsOf(m.workers);
    const ranks = this.sorted();
    const n = ranks.length;
    const matches = nulls(reuse ? this.scratch.matches : undefined, n);
    for (let i = 0; i < matched.length; i++) matches[matched[i]!.pos] = m.workers[i]!;
    // Sequence hashes are only needed to count blocks already active on a worker;
    // skip hashing when nothing is booked anywhere (then every block is new).
    let seq: BigUint64Array | null = null;
    if (this.ledger.size > 0) {
      if (sequence) seq = sequence;
      else {
        if (this.seqScratch.length < localHashes.length) this.seqScratch = new BigUint64Array(Math.max(localHashes.length, 2 * this.seqScratch.length));
        seq = sequenceHashes(localHashes, this.seqScratch.subarray(0, localHashes.length));
      }
      // Every rank's active prefix of the chain in one pass, read back rank by rank below.
      this.ledger.prepareChain(seq);
    }
    // Blocks of the prompt, and how many of them lie beyond the hashed chain.
    const requestBlocks = Math.ceil(promptTokens / this.blockSize);
    const beyondChain = seq ? Math.max(0, requestBlocks - seq.length) : 0;
    // observeTransient writes into the pool's arrays and records; observe into fresh ones. One path fills both.
    const sc = reuse ? this.scratch : null;
    const workers = sized(sc?.workers, n);
    const candidates = sized(sc?.candidates, n);
    let pendingRequests = 0;
    let pendingTokens = 0;
    for (let i = 0; i < n; i++) {
      const r = ranks[i]!;
      const match = matches[i]!;
      const rs = reuse ? this.rankScratch(r) : newRankScratch(r);
      const load = this.ledger.loadOfRef(r.ref, rs.load);
      const device = match?.deviceBlocks ?? 0;
      const newRequestBlocks = seq ? this.ledger.newBlocksOfRef(r.ref, seq) + beyondChain : requestBlocks;
      const o = rs.obs;
      o.registered = r.capacity !== null;
      o.schedulable = r.schedulable;
      o.capacity = r.capacity;
      o.match = match;
      o.load = load;
      o.report = r.report;
      o.forwardPass = r.forwardPass;
      o.recoveredAtMs = r.recoveredAtMs;
      o.effectivePrefillTokens = Math.max(0, promptTokens - device * this.blockSize);
      o.newRequestBlocks = newRequestBlocks;
      // A matched rank carries its publisher's suspect state; only unmatched ranks are looked up.
      o.suspect = match ? match.suspect : this.index.suspectOf(r.workerId, r.dpRank);
      o.lastEventMs = match?.lastEventMs ?? null;
      o.lastSeenMs = r.lastSeen;
      workers[i] = o;
      // The rank's candidate for Dynamo's pick: the index's host and disk counts are cumulative (0 without a match).
      const c = rs.cand;
      const host = match?.hostBlocks ?? 0;
      c.overlapBlocks = device;
      c.hostOverlapBlocks = Math.max(0, host - device);
      c.diskOverlapBlocks = Math.max(0, (match?.diskBlocks ?? 0) - host);
      c.activePrefillTokens = load.trackedPrefillTokens;
      c.activeDecodeBlocks = load.activeBlocks;
      c.activeRequests = load.requests;
      c.newRequestBlocks = newRequestBlocks;
      c.treeSize = match?.treeSize ?? 0;
      candidates[i] = c;
      pendingRequests += load.prefillRequests;
      pendingTokens += load.trackedPrefillTokens;
    }
    // Dynamo's pick among the schedulable ranks (unregistered ones, capacity unknown, stay eligible so
    // a pool without registrations still gets an answer); `eligibleIdx` maps its scores to `ranks`.
    // Written by index and cut to length after (emptying a reused array first would drop its storage).
    const eligibleIdx = sized(sc?.eligibleIdx, n);
    const eligible = sized(sc?.eligible, n);
    let ne = 0;
    for (let i = 0; i < n; i++) {
      if (ranks[i]!.schedulable !== false) {
        eligibleIdx[ne] = i;
        eligible[ne++] = candidates[i]!;
      }
    }
    eligibleIdx.length = ne;
    eligible.length = ne;
    const selection =
      promptTokens > 0
        ? selectWorker(this.opts.selection, { isl: promptTokens, blockSize: this.blockSize }, eligible, this.rng, reuse ? this.selectionScratch : undefined)
        : ({ chosen: null, sense: 'lower-is-better', scores: [], reason: 'no_candidates' } as SelectionResult);
    const chosenIndex = selection.chosen ? eligibleIdx[selection.chosen.index]! : -1;
    const costs = nulls(sc?.costs, n);
    for (let j = 0; j < selection.scores.length; j++) {
      const score = selection.scores[j]!.score;
      costs[eligibleIdx[j]!] = Number.isNaN(score) ? null : score;
    }
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

/** `buf` (a pool-owned array) cut or extended to `n` entries, or a new array of `n` when there is none. */
function sized<T>(buf: T[] | undefined, n: number): T[] {
  if (buf === undefined) return new Array<T>(n);
  buf.length = n;
  return buf;
}

/** `sized`, every entry null. */
function nulls<T>(buf: (T | null)[] | undefined, n: number): (T | null)[] {
  return sized(buf, n).fill(null);
}

function newRankScratch(r: RankSlot): RankScratch {
  const { workerId, dpRank } = r;
  return {
    obs: {
      workerId,
      dpRank,
      registered: false,
      schedulable: null,
      capacity: null,
      match: null,
      load: null as unknown as WorkerLoad,
      report: null,
      forwardPass: null,
      recoveredAtMs: null,
      effectivePrefillTokens: 0,
      newRequestBlocks: 0,
      suspect: null,
      lastEventMs: null,
      lastSeenMs: null,
    },
    cand: candidateRecord(workerId, dpRank),
    load: {
      workerId,
      dpRank,
      registered: false,
      schedulable: null,
      requests: 0,
      prefillRequests: 0,
      trackedPrefillTokens: 0,
      prefillPressure: null,
      activeBlocks: 0,
      totalKvBlocks: null,
      expectedOutputTokens: 0,
      lastChangeMs: null,
    },
  };
}
