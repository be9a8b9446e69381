/**
 * Bookings (`vantage.v1.bookings.{pool}`, packages/protocol) decoded into what the writer hands to
 * the ledger; lifecycle events and registrations are applied as the protocol's codecs decode them.
 */
import type { BookInput } from '@vantage/bookings';
import { sequenceHashes } from '@vantage/hashing';
import { bookingEventCodec } from '@vantage/protocol';

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
