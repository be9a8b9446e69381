/**
 * One candidate's probe as the decision service sees it — the observe reply
 * of its pool and the worker Dynamo's cost chose in it — mapped into the
 * shapes that need it: the rules' `CandidateReport` (what `decide` reads) and
 * records' `CandidateObservation` (the decision record). Transport-free: the
 * decision service feeds it replies from NATS, the offline study replies built
 * from its simulated pools (`observeReplyOf`), through the same code.
 *
 * The observation for the rule is the worker Dynamo's own cost would choose
 * (`dynamoChoice`): seed 000 evaluates "Dynamo's proposed worker/rank for each
 * candidate model, rather than a pool-wide average".
 */
import { observeReplyCodec, type ObserveReply, type WorkerObservation } from '@vantage/protocol';
import type { CandidateObservation as RecordObservation } from '@vantage/records';
import { observed, type CandidateReport, type IndexSuspicion, type Observed, type Role } from '@vantage/rules';

/** What the probe of one candidate produced. */
export type ProbeResult =
  | {
      readonly kind: 'ok';
      readonly reply: ObserveReply;
      /** The chosen worker's facts; null when the indexer chose nobody (empty pool) or omitted it. */
      readonly worker: WorkerObservation | null;
      /** Request round trip, µs. */
      readonly rttUs: number;
    }
  | {
      readonly kind: 'failed';
      /** Record status: `timeout` (no reply in time), `unavailable` (no responders, connection), `error` (the indexer refused, or its reply did not decode). */
      readonly status: 'timeout' | 'unavailable' | 'error';
      readonly code: string;
      readonly reason: string;
      readonly rttUs: number;
    };

/** The request's side of a candidate: what the gateway told us. */
export interface ProbeTarget {
  readonly role: Role;
  readonly model: string;
  readonly pool: string;
  readonly blockSize: number;
  /** N */
  readonly promptTokens: number;
}

/**
 * Decode an observe reply and find the chosen worker in it. The decision service asks for
 * `workers: 'choice'`, so the reply lists only that one; a reply listing more (an indexer that
 * ignores the option) is still read correctly, and `reply.workers` keeps only the chosen one.
 * Decoding goes through @vantage/protocol's codec, which owns the reply's encoding.
 */
export function decodeObserveReply(data: Uint8Array): { ok: true; reply: ObserveReply; worker: WorkerObservation | null } | { ok: false; code: string; reason: string } {
  const r = observeReplyCodec.decode(data);
  if (!r.ok) return r;
  const reply = r.value;
  const dc = reply.dynamoChoice;
  let worker: WorkerObservation | null = null;
  if (dc !== null) {
    for (const w of reply.workers) {
      if (w.workerId === dc.workerId && w.dpRank === dc.dpRank) {
        worker = w;
        break;
      }
    }
  }
  if (reply.workers.length === (worker === null ? 0 : 1)) return { ok: true, reply, worker };
  return { ok: true, reply: { ...reply, workers: worker === null ? [] : [worker] }, worker };
}

export interface MapOptions {
  /** Decision time minus the time the query was sent, ms: the collection age the gate compares with maxAgeMs. */
  readonly collectionAgeMs: number;
  /** Wall clock now (ms), to judge how recent an indexer restore is. */
  readonly nowMs: number;
  /** An indexer restored within this long has incomplete bookings (R, P). */
  readonly restoredLoadSuspectMs: number;
}

export const plus = (a: number | null, b: number): number | null => (a === null ? null : a + b);

/** Index suspicions the rules understand, from the chosen worker's suspect flag and the indexer's restore time. */
function suspicionsOf(reply: ObserveReply, worker: WorkerObservation | null, o: MapOptions): IndexSuspicion[] {
  const out: IndexSuspicion[] = [];
  // Every suspect reason the index reports (event_gap, unknown_parent, missed_start) is about lost KV
  // events, so it undermines K; R and P come from bookings, which the index does not vouch for here.
  if (worker?.suspect) out.push({ scope: 'prefix', code: worker.suspect.reason });
  // Bookings live only in memory: right after a restore, reservations made before it are missing from R and P.
  const restored = reply.snapshotRestoredAtMs;
  if (restored !== null && o.nowMs - restored < o.restoredLoadSuspectMs) out.push({ scope: 'load', code: 'restored_bookings_unknown' });
  return out;
}

/** The rules' view of one probe. */
export function toCandidateReport(t: ProbeTarget, p: ProbeResult, o: MapOptions): CandidateReport {
  if (p.kind === 'failed') return { kind: 'unavailable', cause: `${p.code}: ${p.reason}` };
  const age = o.collectionAgeMs;
  const { reply, worker } = p;
  const dc = reply.dynamoChoice;
  const n: Observed<number> = observed.ok(t.promptTokens, age);
  if (dc === null || worker === null) {
    const why = dc === null ? `pool ${t.pool} offered no worker` : 'chosen worker missing from the reply';
    return {
      kind: 'observed',
      observation: {
        model: t.model,
        // Dynamo chose a worker the reply does not describe: that is a missing observation, not an empty pool.
        placement: dc === null ? null : { workerId: dc.workerId, dpRank: dc.dpRank },
        schedulable: observed.missing(why),
        promptTokens: n,
        reusablePrefixTokens: observed.missing(why),
        bookedRequests: observed.missing(why),
        prefillPressure: observed.missing(why),
        suspicions: suspicionsOf(reply, null, o),
      },
    };
  }
  // K counted in another block size is not this prompt's K: refuse it rather than compare unlike things.
  const k: Observed<number> =
    reply.blockSize === t.blockSize
      ? observed.ok(worker.K, age)
      : observed.invalid(`indexer block size ${reply.blockSize}, configured ${t.blockSize}`, age);
  return {
    kind: 'observed',
    observation: {
      model: t.model,
      placement: { workerId: dc.workerId, dpRank: dc.dpRank },
      schedulable: observed.ok(worker.schedulable, age),
      promptTokens: n,
      reusablePrefixTokens: k,
      bookedRequests: observed.ok(worker.R, age),
      prefillPressure: worker.P === null ? observed.missing('worker capacity (max_num_batched_tokens) not advertised') : observed.ok(worker.P, age),
      suspicions: suspicionsOf(reply, worker, o),
    },
  };
}

// Objects here are written member by member, without object spreads (`{ ...x, more }`): this runs on every route.
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export const round3 = (x: number): number => Math.round(x * 1000) / 1000;
export const r3 = (x: number | null): number | null => (x === null ? null : round3(x));
const int = (x: number | null): number | null => (x === null ? null : Math.round(x));

/** The decision record's view of one probe (Avro `CandidateObservation`; ages are whole ms). */
export function toRecordObservation(t: ProbeTarget, p: ProbeResult, o: MapOptions): RecordObservation {
  const rttMs = Math.round(o.collectionAgeMs);
  const r: Mutable<RecordObservation> = {
    role: t.role,
    model: t.model,
    routingGroup: t.pool,
    status: 'ok',
    error: null,
    workerId: null,
    dpRank: null,
    promptTokens: t.promptTokens,
    overlapTokens: null,
    bookedRequests: null,
    prefillPressure: null,
    bookedPrefillTokens: null,
    prefillCapacityTokens: null,
    hostOverlapTokens: null,
    diskOverlapTokens: null,
    effectivePrefillTokens: null,
    decodeBlocks: null,
    kvCapacityBlocks: null,
    pendingRequests: null,
    pendingTokens: null,
    ages: { selectionMs: null, overlapMs: null, bookingsMs: null, metricsMs: null, pendingMs: null },
    suspectReason: null,
    collectionDurationUs: Math.round(p.rttUs),
  };
  if (p.kind === 'failed') {
    r.status = p.status;
    r.error = `${p.code}: ${p.reason}`;
    return r;
  }
  const { reply, worker } = p;
  const pending = reply.pending;
  r.pendingRequests = pending?.requests ?? null;
  r.pendingTokens = pending?.tokens ?? null;
  if (reply.dynamoChoice === null || worker === null) {
    r.ages = { selectionMs: null, overlapMs: null, bookingsMs: null, metricsMs: null, pendingMs: rttMs };
    r.status = 'no_worker';
    r.error = `pool ${t.pool} offered no worker`;
    return r;
  }
  const bs = reply.blockSize;
  const a = worker.ages;
  let newest: number | null = null;
  for (const x of [a.indexMs, a.loadMs, a.bookingMs]) if (x !== null && (newest === null || x > newest)) newest = x;
  const suspicions = suspicionsOf(reply, worker, o);
  r.workerId = worker.workerId;
  r.dpRank = worker.dpRank;
  r.overlapTokens = worker.K;
  r.bookedRequests = worker.R;
  r.prefillPressure = worker.P;
  r.bookedPrefillTokens = worker.trackedPrefillTokens;
  r.prefillCapacityTokens = worker.maxNumBatchedTokens;
  r.hostOverlapTokens = worker.hostOverlapBlocks === null ? null : worker.hostOverlapBlocks * bs;
  r.diskOverlapTokens = worker.diskOverlapBlocks === null ? null : worker.diskOverlapBlocks * bs;
  r.effectivePrefillTokens = worker.effectivePrefillTokens;
  r.decodeBlocks = worker.activeBlocks;
  r.kvCapacityBlocks = worker.totalKvBlocks;
  r.ages = {
    selectionMs: newest === null ? rttMs : Math.round(newest + o.collectionAgeMs),
    overlapMs: int(plus(a.indexMs, o.collectionAgeMs)),
    bookingsMs: int(plus(a.bookingMs, o.collectionAgeMs)),
    metricsMs: int(plus(a.loadMs, o.collectionAgeMs)),
    pendingMs: rttMs,
  };
  r.suspectReason = suspicions.length === 0 ? null : suspicions.map((x) => `${x.scope}:${x.code}`).join(',');
  return r;
}
