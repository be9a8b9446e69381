/**
 * Our own messages a pool applies (packages/protocol, schemas/protocol), decoded
 * into what the writer hands to PoolState: bookings, lifecycle events and worker
 * registrations.
 */
import type { BookInput, WorkerCapacity } from '@vantage/bookings';
import { sequenceHashes } from '@vantage/hashing';
import { bookingEventCodec, lifecycleEventCodec, workerRegistrationCodec, type LifecycleKind } from '@vantage/protocol';
import type { WorkerId } from '@vantage/types';

type Decoded<T> = { ok: true; value: T } | { ok: false; code: string; reason: string };

/** A booking as the ledger takes it (`source` and time are the pool's to add). */
export interface BookingMessage extends Pick<BookInput, 'requestId' | 'workerId' | 'dpRank' | 'promptTokens' | 'overlapBlocks' | 'sequenceHashes'> {
  /** The pool the message names (must equal its subject's). */
  readonly pool: string;
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
      pool: b.pool,
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
  readonly pool: string;
  readonly requestId: string;
  readonly kind: LifecycleKind;
}

export function decodeLifecycle(data: Uint8Array): Decoded<LifecycleMessage> {
  const r = lifecycleEventCodec.decode(data);
  if (!r.ok) return r;
  return { ok: true, value: { pool: r.value.pool, requestId: r.value.requestId, kind: r.value.kind } };
}

export interface RegistrationMessage {
  readonly pool: string;
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
  if (g.kind === 'deregister') return { ok: true, value: { pool: g.pool, remove: true, workerId: g.workerId, capacity: NO_CAPACITY, ttlMs: null } };
  return { ok: true, value: { pool: g.pool, remove: false, workerId: g.workerId, capacity: { ...g.capacity }, ttlMs: g.ttlMs } };
}
