/**
 * What the fleet's command-line tools (loadgen, calibrate) share: strict `parseArgs`, `--help`, one
 * exit convention (a bad argument prints the reason and the usage on stderr and exits with 2; a fatal
 * error prints it and exits with 1) and one way to run against NATS.
 */
import { createWriteStream } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats, createLogger, flushLogger, toolSettings } from '@vantage/runtime';
import { parsePools } from './pools';

type Pools = ReturnType<typeof parsePools>;

type Options = NonNullable<ParseArgsConfig['options']>;

interface CliTool<O extends Options> {
  /** Parsed flags (`--help` is handled here: usage on stdout, exit 0). */
  readonly args: ReturnType<typeof parseArgs<{ options: O & { help: { type: 'boolean'; default: false } }; strict: true }>>['values'];
  /** Print `<tool>: msg` and the usage on stderr, exit 2. */
  fail(msg: string): never;
  /** A finite number >= min, or undefined when the flag is absent. */
  num(name: keyof O & string, min?: number): number | undefined;
  /** An integer >= min, or undefined when the flag is absent. */
  int(name: keyof O & string, min: number): number | undefined;
  /** `--pools efficient:64[:model],capable:64[:model]`. */
  pools(name: keyof O & string): Pools;
  /** What `parse` returns; what it throws fails the run as a bad argument (its message after `prefix`). */
  parse<T>(parse: () => T, prefix?: string): T;
  /**
   * Run `body` against NATS (`nats`, else `VANTAGE_NATS_URL`, else 127.0.0.1:4222; users, secret files
   * and TLS as the services take them, VANTAGE_NATS_*) with `write` putting JSON lines in `out` (none
   * without it) and `signal` aborted by SIGINT. Logs go to stderr; what `body` resolves with is the last
   * line on stdout, then exit 0; an error exits 1.
   */
  run(
    where: { readonly nats: string | undefined; readonly out: string | undefined },
    body: (ctx: { readonly nc: NatsConnection; readonly write: ((row: unknown) => void) | null; readonly signal: AbortSignal }) => Promise<unknown>,
  ): Promise<never>;
}

export function cliTool<O extends Options>(tool: string, usage: string, options: O, argv: string[] = process.argv.slice(2)): CliTool<O> {
  const fail = (msg: string): never => {
    process.stderr.write(`${tool}: ${msg}\n${usage}\n`);
    process.exit(2);
  };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', default: false } }, strict: true }).values as typeof values;
  } catch (e) {
    fail((e as Error).message);
  }
  if (values!.help === true) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const str = (name: string): string | undefined => {
    const v = values[name];
    return typeof v === 'string' ? v : undefined;
  };
  const number = (name: string, integer: boolean, min: number): number | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    const x = Number(v);
    if (!(integer ? Number.isInteger(x) : Number.isFinite(x)) || x < min) fail(`--${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got ${v}`);
    return x;
  };
  const parse = <T>(fn: () => T, prefix = ''): T => {
    try {
      return fn();
    } catch (e) {
      return fail(`${prefix}${e instanceof Error ? e.message : String(e)}`);
    }
  };
  return {
    args: values! as CliTool<O>['args'],
    fail,
    num: (name, min = 0) => number(name, false, min),
    int: (name, min) => number(name, true, min),
    pools: (name) => parse(() => parsePools(str(name) ?? '')),
    parse,
    async run(where, body) {
      // Logs (NATS status) go to stderr: stdout carries only the summary.
      const log = createLogger({ service: tool, instanceId: `${tool}-${process.pid}`, level: 'warn', destination: process.stderr });
      const url = where.nats ?? process.env.VANTAGE_NATS_URL ?? 'nats://127.0.0.1:4222';
      try {
        const security = toolSettings(process.env).nats;
        const nc = await connectNats({ ...security, url, name: `${tool}-${process.pid}`, reconnectTimeWaitMs: 500, reconnectJitterMs: 100, maxReconnectAttempts: 10, connectTimeoutMs: 5000 }, log);
        const out = where.out ? createWriteStream(where.out) : null;
        const abort = new AbortController();
        process.once('SIGINT', () => abort.abort());
        const summary = await body({ nc, write: out ? (row) => out.write(`${JSON.stringify(row)}\n`) : null, signal: abort.signal });
        if (out) await new Promise<void>((r) => out.end(r));
        await nc.close();
        process.stdout.write(`${JSON.stringify(summary)}\n`);
        await flushLogger(log);
        process.exit(0);
      } catch (e) {
        process.stderr.write(`${tool}: ${e instanceof Error ? e.message : String(e)}\n`);
        process.exit(1);
      }
    },
  };
}
