/**
 * When a booking entered a pool's ledger, for a subscriber in the same process: README.md, "Diagnostics"
 * (`atNs` is `process.hrtime.bigint()`; with nobody subscribed no timestamp is taken).
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
