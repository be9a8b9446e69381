/**
 * What the fleet's command-line tools (loadgen, calibrate) share: strict `parseArgs` with `--help`,
 * `--pools`, `--nats` and `--out`, one exit convention (a bad argument prints the reason and the usage
 * on stderr and exits with 2; a fatal error prints it and exits with 1) and one way to run against NATS.
 */
import { createWriteStream } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats, createLogger, flushLogger, toolSettings } from '@vantage/runtime';
import { parsePools } from './pools';

type Options = NonNullable<ParseArgsConfig['options']>;

const COMMON = {
  help: { type: 'boolean', default: false },
  pools: { type: 'string', default: 'efficient:64,capable:64' },
  nats: { type: 'string' },
  out: { type: 'string' },
} as const;

type RunContext = { readonly nc: NatsConnection; readonly write: ((row: unknown) => void) | null; readonly signal: AbortSignal };

export function cliTool<O extends Options>(tool: string, usage: string, options: O, argv: string[] = process.argv.slice(2)) {
  /** Prints `<tool>: msg` and the usage on stderr, exits 2. */
  const fail = (msg: string): never => {
    process.stderr.write(`${tool}: ${msg}\n${usage}\n`);
    process.exit(2);
  };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: argv, options: { ...options, ...COMMON }, strict: true }).values as typeof values;
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
  /** A finite number (an integer) >= min, or undefined when the flag is absent. */
  const number = (name: keyof O & string, integer: boolean, min: number): number | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    const x = Number(v);
    if (!(integer ? Number.isInteger(x) : Number.isFinite(x)) || x < min) fail(`--${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got ${v}`);
    return x;
  };
  /** What `fn` returns; what it throws fails the run as a bad argument (its message after `prefix`). */
  const parse = <T>(fn: () => T, prefix = ''): T => {
    try {
      return fn();
    } catch (e) {
      return fail(`${prefix}${e instanceof Error ? e.message : String(e)}`);
    }
  };
  return {
    args: values! as ReturnType<typeof parseArgs<{ options: O & typeof COMMON; strict: true }>>['values'],
    fail,
    num: (name: keyof O & string, min = 0) => number(name, false, min),
    int: (name: keyof O & string, min: number) => number(name, true, min),
    /** `--pools efficient:64[:model],capable:64[:model]`. */
    pools: () => parse(() => parsePools(str('pools') ?? '')),
    parse,
    /**
     * Runs `body` against NATS (`--nats`, else `VANTAGE_NATS_URL`, else 127.0.0.1:4222; users, secret
     * files and TLS as the services take them, VANTAGE_NATS_*) with `write` putting JSON lines in `--out`
     * (none without it) and `signal` aborted by SIGINT. Logs go to stderr; what `body` resolves with is
     * the last line on stdout, then exit 0; an error exits 1.
     */
    async run(body: (ctx: RunContext) => Promise<unknown>): Promise<never> {
      const log = createLogger({ service: tool, instanceId: `${tool}-${process.pid}`, level: 'warn', destination: process.stderr });
      const url = str('nats') ?? process.env.VANTAGE_NATS_URL ?? 'nats://127.0.0.1:4222';
      const outFile = str('out');
      try {
        const security = toolSettings(process.env).nats;
        const nc = await connectNats({ ...security, url, name: `${tool}-${process.pid}`, reconnectTimeWaitMs: 500, reconnectJitterMs: 100, maxReconnectAttempts: 10, connectTimeoutMs: 5000 }, log);
        const out = outFile ? createWriteStream(outFile) : null;
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
