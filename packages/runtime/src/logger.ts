// Logger factory: JSON lines to stdout, one shape for every service, so log
// pipelines parse all of them the same way.

import { hostname } from 'node:os';
import pino from 'pino';
import type { DestinationStream, Logger } from 'pino';
import type { LogLevel } from './config';
import { REDACTED, redactUrl, secretLogPaths } from './secrets';

export type { Logger } from 'pino';

interface LoggerOptions {
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
      serializers: { err: errSerializer },
      // Last line of defence: our configuration and errors carry no secrets, but an object a
      // library hands us might. Every secret-bearing key, up to three levels deep, is censored.
      redact: { paths: secretLogPaths(), censor: REDACTED },
    },
    dest,
  );
}

/** pino's error serializer, with URL user-info stripped from the message and stack of the error and its causes. */
function errSerializer(e: unknown): unknown {
  const out = pino.stdSerializers.err(e as Error) as unknown;
  const clean = (v: unknown, depth: number): void => {
    if (typeof v !== 'object' || v === null || depth > 5) return;
    const o = v as Record<string, unknown>;
    for (const k of ['message', 'stack']) if (typeof o[k] === 'string') o[k] = redactUrl(o[k]);
    clean(o['cause'], depth + 1);
  };
  clean(out, 0);
  return out;
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
