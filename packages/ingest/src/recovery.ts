/**
 * Recovery of a (worker, dp rank) from its own local index, as Dynamo's router does, instead of
 * waiting for a `cleared`: when it is asked for, how the dump is applied so that no event is lost or
 * applied twice, and what counts as a failure are in services/indexer/README.md, "Recovery from a
 * worker's own index". The queries run beside the writer, never in it: the writer only applies a
 * finished answer, as one queue item. Nothing here throws into the writer.
 */
import type { Logger } from '@vantage/runtime';
import { toVantageError } from '@vantage/runtime';
import type { ApplyResult } from '@vantage/prefix-index';
import type { KvEvent, WorkerId } from '@vantage/types';
import type { WorkerKvQueryResponse } from '@vantage/wire';
import type { PoolState } from '@vantage/observation';
import type { Registry } from 'prom-client';
import type { RecoveryConfig } from './config';
import { metricSet, type MetricSet } from './metrics';
import type { RecoveryTarget } from './worker-query';

/** What runs a query (the TCP request-plane client, or a test double in unit tests). */
export interface WorkerQuerier {
  query(target: RecoveryTarget, startEventId: bigint | null): Promise<WorkerKvQueryResponse>;
}

type RecoverySettings = Pick<RecoveryConfig, 'initialBackoffMs' | 'maxBackoffMs' | 'maxBufferedEvents' | 'maxInFlight'>;

type RecoveryOutcome =
  | 'recovered'
  | 'stale'
  | 'failed_query'
  | 'failed_answer'
  | 'failed_apply'
  | 'abandoned_buffer'
  | 'abandoned_gone';

const RECOVERY_METRICS = {
  attempts: ['counter', 'recovery_attempts_total', "Queries of a worker's local index for its blocks", ['pool']],
  outcomes: [
    'counter',
    'recovery_outcomes_total',
    'Recovery attempts by outcome: recovered, stale (dump older than the applied events; retried), failed_query, failed_answer, failed_apply, abandoned_buffer, abandoned_gone',
    ['pool', 'outcome'],
  ],
  recoveredBlocks: ['counter', 'recovered_blocks_total', 'Blocks held after recoveries applied (summed over recoveries)', ['pool']],
  replayedEvents: ['counter', 'recovery_replayed_events_total', 'Live events applied again on top of a recovered dump (newer than it)', ['pool']],
  inFlight: ['gauge', 'recoveries_in_flight', 'Recovery queries out', ['pool']],
} as const;

export type RecoveryMetrics = MetricSet<typeof RECOVERY_METRICS>;

/** `prefix`: the service's metric prefix (`vantage_indexer`, `vantage_decision`). */
export function recoveryMetrics(registry: Registry, prefix = 'vantage_indexer'): RecoveryMetrics {
  return metricSet(registry, prefix, RECOVERY_METRICS);
}

/** What the writer is handed when a query finishes. */
export interface RecoveryAnswer {
  readonly key: string;
  readonly attempt: number;
  readonly response: WorkerKvQueryResponse | null;
  readonly error: string | null;
}

interface Track {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  phase: 'waiting' | 'in_flight';
  /** Attempts of this recovery (for backoff) and the id of the one in flight. */
  failures: number;
  attempt: number;
  nextAtMs: number;
  /** The publisher's last applied event id when the query was issued. */
  baseline: bigint | null;
  /** Events of the publisher applied since the query was issued (null: none in flight). */
  buffer: KvEvent[] | null;
  overflow: boolean;
  staleInARow: number;
  why: string;
  lastLoggedFailure: number;
}

const keyOf = (w: WorkerId, dp: number): string => `${w}:${dp}`;

export class Recovery {
  private readonly tracks = new Map<string, Track>();
  private attempts = 0;
  private inFlight = 0;

  constructor(
    private readonly o: {
      readonly pool: string;
      readonly state: () => PoolState;
      /** Where a (worker, dp rank)'s local index answers (discovery's `recovery_target`; null: unknown). */
      readonly targetOf: (workerId: WorkerId, dpRank: number) => RecoveryTarget | null;
      readonly querier: WorkerQuerier;
      /** Hand a finished answer to the single writer (in order with everything else). */
      readonly deliver: (a: RecoveryAnswer) => void;
      readonly settings: RecoverySettings;
      readonly metrics: RecoveryMetrics;
      readonly log: Logger;
      readonly now: () => number;
      readonly random?: () => number;
    },
  ) {}

  /** Ask for a (worker, dp rank)'s recovery (now, or after its current backoff). Idempotent. */
  request(workerId: WorkerId, dpRank: number, why: string): void {
    const k = keyOf(workerId, dpRank);
    if (this.tracks.has(k)) return;
    this.tracks.set(k, {
      workerId,
      dpRank,
      phase: 'waiting',
      failures: 0,
      attempt: 0,
      nextAtMs: this.o.now(),
      baseline: null,
      buffer: null,
      overflow: false,
      staleInARow: 0,
      why,
      lastLoggedFailure: -1,
    });
  }

  /** A worker left the pool: forget it (an answer still out is dropped when it arrives). */
  forget(workerId: WorkerId): void {
    for (const [k, t] of this.tracks) if (t.workerId === workerId) this.tracks.delete(k);
  }

  /** The writer, after applying a KV event: keep it if a query is out; start recovering a suspect. */
  afterKvEvent(ev: KvEvent, r: ApplyResult): void {
    const k = keyOf(ev.workerId, ev.dpRank);
    const t = this.tracks.get(k);
    if (t?.buffer) {
      if (r.status === 'applied') {
        if (t.buffer.length >= this.o.settings.maxBufferedEvents) t.overflow = true;
        else t.buffer.push(ev);
      }
      return;
    }
    if (t === undefined && r.suspect !== null) this.request(ev.workerId, ev.dpRank, r.suspect.reason);
  }

  /**
   * Issue the queries that are due (from a timer, outside the writer's turn). A publisher with no
   * known target waits: it stays suspect until a target appears or a `cleared` repairs it.
   */
  pump(): void {
    const now = this.o.now();
    for (const [k, t] of this.tracks) {
      if (this.inFlight >= this.o.settings.maxInFlight) return;
      if (t.phase !== 'waiting' || t.nextAtMs > now) continue;
      const target = this.o.targetOf(t.workerId, t.dpRank);
      if (target === null) continue;
      t.phase = 'in_flight';
      t.attempt = ++this.attempts;
      t.baseline = this.o.state().index.lastEventIdOf(t.workerId, t.dpRank);
      t.buffer = [];
      t.overflow = false;
      this.inFlight++;
      this.o.metrics.attempts.inc({ pool: this.o.pool });
      this.o.metrics.inFlight.inc({ pool: this.o.pool });
      const attempt = t.attempt;
      this.o.querier.query(target, null).then(
        (response) => this.o.deliver({ key: k, attempt, response, error: null }),
        (e: unknown) => {
          const ve = toVantageError(e, 'UPSTREAM_UNAVAILABLE');
          this.o.deliver({ key: k, attempt, response: null, error: `${ve.code}: ${ve.message}` });
        },
      );
    }
  }

  /** The writer: apply a finished query's answer (or schedule the retry). */
  applyAnswer(a: RecoveryAnswer): void {
    this.inFlight--;
    this.o.metrics.inFlight.dec({ pool: this.o.pool });
    const t = this.tracks.get(a.key);
    if (t === undefined || t.phase !== 'in_flight' || t.attempt !== a.attempt) {
      // The worker left (or was forgotten) meanwhile.
      if (t === undefined) this.o.metrics.outcomes.inc({ pool: this.o.pool, outcome: 'abandoned_gone' });
      return;
    }
    const buffer = t.buffer ?? [];
    t.buffer = null;
    const r = a.response;
    if (r === null) return this.retry(t, 'failed_query', a.error ?? 'no answer');
    if (r.kind !== 'tree_dump') {
      const why = r.kind === 'error' || r.kind === 'tree_dump_failed' ? `${r.kind}: ${r.message}` : r.kind;
      return this.retry(t, 'failed_answer', `worker answered ${why}`);
    }
    if (t.overflow) return this.retry(t, 'abandoned_buffer', `more than ${this.o.settings.maxBufferedEvents} events arrived during the query`);
    if (t.baseline !== null && r.lastEventId < t.baseline && t.staleInARow < 2) {
      t.staleInARow++;
      return this.retry(t, 'stale', `dump reflects event ${r.lastEventId}, older than the ${t.baseline} already applied`, true);
    }
    const now = this.o.now();
    const state = this.o.state();
    let result;
    try {
      result = state.applyRecovery(t.workerId, t.dpRank, r.events, r.lastEventId, now);
    } catch (e) {
      return this.retry(t, 'failed_apply', e instanceof Error ? e.message : String(e));
    }
    // Events newer than the dump, applied meanwhile and now dropped with the old state: again, in order.
    let replayed = 0;
    let suspect = result.suspect;
    for (const ev of buffer) {
      if (ev.eventId <= r.lastEventId) continue;
      const ar = state.applyKvEvent(ev, now);
      if (ar.status === 'applied') replayed++;
      suspect = ar.suspect;
    }
    this.tracks.delete(a.key);
    const m = this.o.metrics;
    m.outcomes.inc({ pool: this.o.pool, outcome: 'recovered' });
    m.recoveredBlocks.inc({ pool: this.o.pool }, result.blocks);
    if (replayed > 0) m.replayedEvents.inc({ pool: this.o.pool }, replayed);
    this.o.log.info(
      {
        pool: this.o.pool,
        workerId: String(t.workerId),
        dpRank: t.dpRank,
        why: t.why,
        blocks: result.blocks,
        dropped: result.blocksDropped,
        lastEventId: String(r.lastEventId),
        replayed,
        attempts: t.failures + 1,
      },
      "recovered a worker's blocks from its local index",
    );
    // A gap just after the dump (or an unknown parent in it) makes it suspect again: start over.
    if (suspect !== null) this.request(t.workerId, t.dpRank, suspect.reason);
  }

  private retry(t: Track, outcome: RecoveryOutcome, reason: string, soon = false): void {
    this.o.metrics.outcomes.inc({ pool: this.o.pool, outcome });
    if (!soon) t.failures++;
    const s = this.o.settings;
    const base = soon ? s.initialBackoffMs : Math.min(s.maxBackoffMs, s.initialBackoffMs * 2 ** Math.min(20, t.failures - 1));
    const jitter = 0.75 + 0.5 * (this.o.random ?? Math.random)();
    t.nextAtMs = this.o.now() + Math.round(base * jitter);
    t.phase = 'waiting';
    // Logged once per backoff step: a worker that stays unreachable does not flood the log.
    if (t.failures !== t.lastLoggedFailure) {
      t.lastLoggedFailure = t.failures;
      this.o.log.warn(
        { pool: this.o.pool, workerId: String(t.workerId), dpRank: t.dpRank, outcome, reason: reason.slice(0, 500), failures: t.failures, retryInMs: t.nextAtMs - this.o.now() },
        'recovery from the worker failed; retrying',
      );
    }
  }

  /** (worker, dp rank)s waiting for or in recovery. */
  pending(): readonly { workerId: WorkerId; dpRank: number; phase: 'waiting' | 'in_flight'; failures: number }[] {
    return [...this.tracks.values()].map((t) => ({ workerId: t.workerId, dpRank: t.dpRank, phase: t.phase, failures: t.failures }));
  }
}
