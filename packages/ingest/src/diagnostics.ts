/**
 * When a booking entered a pool's ledger, published on a `node:diagnostics_channel` channel for a
 * subscriber in the same process (the cross-process visibility test loads one with `--import`).
 * With nobody subscribed the ledger path checks `hasSubscribers` once per booking and takes no
 * timestamp.
 *
 * One message per booking the ledger took:
 *   pool       the pool
 *   requestId  the booked request
 *   source     `local`: this process routed it (`bookLocal`); `subject`: it came from the bookings subject
 *   kind       the ledger's outcome (`booked`, or what it did with a repeat)
 *   atNs       `process.hrtime.bigint()` when it entered the ledger: the system's monotonic clock, so
 *              stamps from processes on one machine compare
 */
import { channel } from 'node:diagnostics_channel';

export const BOOKINGS_CHANNEL = 'vantage:ingest:bookings';

export interface BookingEntered {
  readonly pool: string;
  readonly requestId: string;
  readonly source: 'local' | 'subject';
  readonly kind: string;
  readonly atNs: bigint;
}

export const bookingsChannel = channel(BOOKINGS_CHANNEL);

export function publishBooking(pool: string, requestId: string, source: BookingEntered['source'], kind: string): void {
  const msg: BookingEntered = { pool, requestId, source, kind, atNs: process.hrtime.bigint() };
  bookingsChannel.publish(msg);
}
