/**
 * Loaded into a child decision service with `--import`: notes each booking that entered one of its
 * pools' ledgers (`@vantage/ingest`'s diagnostics channel) and, when the process exits, writes them
 * to the file named by BOOKING_TIMES_FILE, a line each: `atNs source kind pool requestId`, atNs on
 * the machine's monotonic clock. Nothing is written while the service runs, so noting a booking
 * costs the service no system call.
 */
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { BOOKINGS_CHANNEL, type BookingEntered } from '@vantage/ingest';

const file = process.env.BOOKING_TIMES_FILE;
if (file === undefined) throw new Error('booking-times: BOOKING_TIMES_FILE is not set');
const lines: string[] = [];
subscribe(BOOKINGS_CHANNEL, (m) => {
  const b = m as BookingEntered;
  lines.push(`${b.atNs} ${b.source} ${b.kind} ${b.pool} ${b.requestId}\n`);
});
process.once('exit', () => writeFileSync(file, lines.join('')));
