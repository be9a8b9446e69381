/**
 * Responder side of the request timeline (timeline.patch; nothing is recorded unless
 * BENCH_TIMELINE_DIR is set). For every request the responder handles it keeps five CLOCK_MONOTONIC
 * ns stamps, written to `${BENCH_TIMELINE_DIR}/${name}-${pid}.txt` one number per line: the last
 * read of the connection's socket before the handler ran, the last call of the NATS client's
 * parser, handler entry, handler exit, and the first socket write after the exit (the reply going
 * out). It reaches into the NATS client's connection (`protocol.transport.socket`,
 * `protocol.parser`), which no public API exposes: a diagnostic, not for the product.
 * `timeline-report.ts` puts these beside the benchmark's own send and reply times.
 */
import { appendFileSync } from 'node:fs';
import type { Socket } from 'node:net';

const DIR = process.env.BENCH_TIMELINE_DIR;
const rows: number[] = [];
let lastRead = 0;
let lastParse = 0;
/** Index of the row's write stamp awaiting the next socket write (-1: none). */
let pendingWrite = -1;
const now = (): number => Number(process.hrtime.bigint());

export interface Probe {
  enter(): void;
  exit(): void;
}

export function probeConnection(nc: unknown, name: string): Probe {
  if (DIR === undefined) return { enter() {}, exit() {} };
  const protocol = (nc as { protocol: { transport: { socket: Socket }; parser: { parse(b: Uint8Array): void } } }).protocol;
  const socket = protocol.transport.socket;
  socket.prependListener('data', () => {
    lastRead = now();
  });
  const parse = protocol.parser.parse.bind(protocol.parser);
  protocol.parser.parse = (b: Uint8Array): void => {
    lastParse = now();
    parse(b);
  };
  const write = socket.write.bind(socket) as (...a: unknown[]) => boolean;
  (socket as unknown as { write: (...a: unknown[]) => boolean }).write = (...a: unknown[]): boolean => {
    if (pendingWrite >= 0) rows[pendingWrite] = now();
    pendingWrite = -1;
    return write(...a);
  };
  const file = `${DIR}/${name}-${process.pid}.txt`;
  const flush = (keep: number): void => {
    const out = rows.splice(0, rows.length - keep);
    if (pendingWrite >= 0) pendingWrite -= out.length;
    if (out.length > 0) appendFileSync(file, out.join('\n') + '\n');
  };
  process.on('exit', () => flush(0));
  return {
    enter(): void {
      rows.push(lastRead, lastParse, now(), 0, 0);
    },
    exit(): void {
      rows[rows.length - 2] = now();
      pendingWrite = rows.length - 1;
      // The last row's write stamp is still to come: it stays behind.
      if (rows.length >= 5000) flush(5);
    },
  };
}
