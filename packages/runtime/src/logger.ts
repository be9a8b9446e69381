// Logger factory: JSON lines to stdout, one shape for every service, so log
// pipelines parse all of them the same way.

import { hostname } from 'node:os';
import pino from 'pino';
import type { DestinationStream, Logger } from 'pino';
import type { LogLevel } from './config';

export type { Logger } from 'pino';

export interface LoggerOptions {
  service: string;
  instanceId: string;
  level: LogLevel;
  /**
   * Where lines go. Default: an asynchronous stdout destination, flushed
   * synchronously on process exit so the last lines (the shutdown report)
   * are never lost.
   */
  destination?: DestinationStream;
}

export function defaultInstanceId(): string {
  return `${hostname()}-${process.pid}`;
}

/**
 * The process's asynchronous stdout destination, shared by the loggers it creates (their lines
 * come out in the order written): asynchronous writes keep logging off the request path. pino
 * flushes it synchronously at exit (its destinations register themselves for that).
 */
let stdout: DestinationStream | null = null;

export function createLogger(opts: LoggerOptions): Logger {
  const dest = opts.destination ?? (stdout ??= pino.destination({ dest: 1, sync: false, minLength: 0 }));
  return pino(
    {
      level: opts.level,
      base: { service: opts.service, instance: opts.instanceId },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Level as a name, not pino's number: readable without a lookup table.
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: pino.stdSerializers.err },
    },
    dest,
  );
}

/** Flushes buffered lines; resolves when written (or immediately for sync destinations). */
export function flushLogger(log: Logger): Promise<void> {
  return new Promise((resolve) => {
    try {
      log.flush(() => resolve());
    } catch {
      resolve();
    }
  });
}
