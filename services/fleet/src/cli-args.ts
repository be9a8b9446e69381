/**
 * Argument handling shared by the fleet's command-line tools (loadgen,
 * calibrate): strict `parseArgs`, `--help`, and one exit convention — a bad
 * argument prints the reason and the usage on stderr and exits with 2.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parsePools } from './pools';

type Pools = ReturnType<typeof parsePools>;

type Options = NonNullable<ParseArgsConfig['options']>;

interface CliTool<O extends Options> {
  /** Parsed flags (`--help` is handled here: usage on stdout, exit 0). */
  readonly args: ReturnType<typeof parseArgs<{ options: O & { help: { type: 'boolean'; default: false } }; strict: true }>>['values'];
  /** Print `<tool>: msg` and the usage on stderr, exit 2. */
  fail(msg: string): never;
  /** A finite number >= min, or `dflt` when the flag is absent. */
  num(name: keyof O & string, dflt: number, min?: number): number;
  /** An integer >= min, or undefined when the flag is absent. */
  int(name: keyof O & string, min: number): number | undefined;
  /** `--pools efficient:64[:model],capable:64[:model]`. */
  pools(name: keyof O & string): Pools;
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
  return {
    args: values! as CliTool<O>['args'],
    fail,
    num(name, dflt, min = 0) {
      const v = str(name);
      if (v === undefined) return dflt;
      const x = Number(v);
      if (!Number.isFinite(x) || x < min) fail(`--${name} must be a number >= ${min}, got ${v}`);
      return x;
    },
    int(name, min) {
      const v = str(name);
      if (v === undefined) return undefined;
      const x = Number(v);
      if (!Number.isInteger(x) || x < min) fail(`--${name} must be an integer >= ${min}, got ${v}`);
      return x;
    },
    pools(name) {
      try {
        return parsePools(str(name) ?? '');
      } catch (e) {
        return fail((e as Error).message);
      }
    },
  };
}
