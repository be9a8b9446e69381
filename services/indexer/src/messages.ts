/**
 * Our own messages (packages/protocol, schemas/protocol) mapped to what the
 * pool applies, and the observe reply built from a PoolObservation.
 */
import type { WorkerCapacity } from '@vantage/bookings';
import { sequenceHashes } from '@vantage/hashing';
import {
  bookingEventCodec,
  lifecycleEventCodec,
  observeReplyCodec,
  observeRequestCodec,
  workerRegistrationCodec,
  type LifecycleKind,
  type WorkerObservation as WireWorker,
} from '@vantage/protocol';
import type { WorkerId } from '@vantage/types';
import type { PoolObservation } from './pool';

export { observeSubject, bookingsSubject, lifecycleSubject, workersSubject } from '@vantage/protocol';

export type Decoded<T> = { ok: true; value: T } | { ok: false; code: string; reason: string };

export interface ObserveQuery {
  readonly requestId: string | null;
  readonly localHashes: BigUint64Array | null;
  readonly tokenIds: Uint32Array | null;
  readonly loraName: string | null;
  readonly promptTokens: number;
}

export function decodeObserve(data: Uint8Array): Decoded<ObserveQuery> {
  const r = observeRequestCodec.decode(data);
  if (!r.ok) return r;
  const p = r.value.prompt;
  return {
    ok: true,
    value: {
      requestId: r.value.requestId,
      localHashes: p.kind === 'local_hashes' ? p.localHashes : null,
      tokenIds: p.kind === 'token_ids' ? p.tokenIds : null,
      loraName: p.loraName,
      promptTokens: r.value.promptTokens,
    },
  };
}

export interface ReplyMeta {
  readonly requestId: string | null;
  readonly nowMs: number;
  readonly queryDurationUs: number;
  readonly restoredAtMs: number | null;
  readonly snapshotTakenAtMs: number | null;
  readonly queueDepth: number;
}

const age = (now: number, t: number | null | undefined): number | null => (t === null || t === undefined ? null : Math.max(0, now - t));

export function encodeObserveReply(o: PoolObservation, meta: ReplyMeta): Uint8Array {
  const now = meta.nowMs;
  const scores = o.selection.scores;
  const costOf = new Map<string, number>();
  for (const s of scores) costOf.set(`${s.workerId}:${s.dpRank}`, s.score);
  const workers: WireWorker[] = o.workers.map((w) => {
    const m = w.match;
    const c = costOf.get(`${w.workerId}:${w.dpRank}`);
    return {
      workerId: w.workerId,
      dpRank: w.dpRank,
      // An unregistered worker has no advertised capacity; Dynamo would not route to it either.
      schedulable: w.schedulable === true,
      deviceOverlapBlocks: m?.deviceBlocks ?? 0,
      K: m?.deviceTokens ?? 0,
      hostOverlapBlocks: m ? m.hostBlocks : null,
      diskOverlapBlocks: m ? m.diskBlocks : null,
      anyTierOverlapBlocks: m ? m.anyBlocks : null,
      R: w.load.requests,
      trackedPrefillTokens: w.load.trackedPrefillTokens,
      P: w.load.prefillPressure,
      maxNumBatchedTokens: w.load.prefillPressure === null ? null : capacityTokens(w.load.trackedPrefillTokens, w.load.prefillPressure),
      effectivePrefillTokens: w.effectivePrefillTokens,
      newBlocks: w.newRequestBlocks,
      activeBlocks: w.load.activeBlocks,
      totalKvBlocks: w.load.totalKvBlocks,
      treeBlocks: m?.treeSize ?? 0,
      reported: w.report ? { activeDecodeBlocks: w.report.activeDecodeBlocks, activePrefillTokens: w.report.activePrefillTokens, kvUsedBlocks: w.report.kvUsedBlocks } : null,
      suspect: w.suspect ? { reason: w.suspect.reason, sinceMs: w.suspect.sinceMs } : null,
      ages: { indexMs: age(now, w.lastEventMs), loadMs: age(now, w.report?.atMs), bookingMs: age(now, w.load.lastChangeMs) },
      dynamoCost: c === undefined || Number.isNaN(c) ? null : c,
    };
  });
  const chosen = o.selection.chosen;
  const chosenScore = chosen ? scores[chosen.index] : undefined;
  return observeReplyCodec.encode({
    pool: o.pool,
    blockSize: o.blockSize,
    queryDurationUs: Math.round(meta.queryDurationUs),
    atMs: now,
    workers,
    pending: o.pending,
    dynamoChoice:
      chosen && chosenScore
        ? { workerId: chosen.workerId, dpRank: chosen.dpRank, cost: chosenScore.score, policy: { name: `kv_router:${o.selection.reason}`, params: numericTerms(o) } }
        : null,
    snapshotRestoredAtMs: meta.restoredAtMs,
  });
}

/** maxNumBatchedTokens from P and the tracked tokens is not exact when tracked is 0; the ledger's capacity is. */
function capacityTokens(tracked: number, p: number): number | null {
  return p > 0 ? Math.round(tracked / p) : null;
}

function numericTerms(o: PoolObservation): Record<string, number> {
  const chosen = o.selection.chosen;
  if (!chosen) return {};
  const s = o.selection.scores[chosen.index];
  return s ? { ...s.terms } : {};
}

export interface BookingMessage {
  readonly requestId: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly promptTokens: number;
  readonly overlapBlocks: number;
  readonly sequenceHashes: BigUint64Array;
  readonly expectedOutputTokens: number | null;
}

const EMPTY = new BigUint64Array(0);

export function decodeBooking(data: Uint8Array): Decoded<BookingMessage> {
  const r = bookingEventCodec.decode(data);
  if (!r.ok) return r;
  const b = r.value;
  return {
    ok: true,
    value: {
      requestId: b.requestId,
      workerId: b.workerId,
      dpRank: b.dpRank,
      promptTokens: b.promptTokens,
      overlapBlocks: b.overlapBlocks,
      sequenceHashes: b.sequenceHashes ?? (b.localHashes ? sequenceHashes(b.localHashes) : EMPTY),
      expectedOutputTokens: b.expectedOutputTokens,
    },
  };
}

export interface LifecycleMessage {
  readonly requestId: string;
  readonly kind: LifecycleKind;
}

export function decodeLifecycle(data: Uint8Array): Decoded<LifecycleMessage> {
  const r = lifecycleEventCodec.decode(data);
  if (!r.ok) return r;
  return { ok: true, value: { requestId: r.value.requestId, kind: r.value.kind } };
}

export interface RegistrationMessage {
  readonly remove: boolean;
  readonly workerId: WorkerId;
  readonly capacity: WorkerCapacity;
  readonly ttlMs: number | null;
}

const NO_CAPACITY: WorkerCapacity = { blockSize: 1, totalKvBlocks: null, maxNumBatchedTokens: null, maxNumSeqs: null, dpStartRank: 0, dpSize: 1, schedulable: false };

export function decodeRegistration(data: Uint8Array): Decoded<RegistrationMessage> {
  const r = workerRegistrationCodec.decode(data);
  if (!r.ok) return r;
  const g = r.value;
  if (g.kind === 'deregister') return { ok: true, value: { remove: true, workerId: g.workerId, capacity: NO_CAPACITY, ttlMs: null } };
  return { ok: true, value: { remove: false, workerId: g.workerId, capacity: { ...g.capacity }, ttlMs: g.ttlMs } };
}
