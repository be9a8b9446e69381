/**
 * Option parsing on top of node:util parseArgs (strict: unknown options and
 * missing values are errors), turning its exceptions into UsageError.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InputError, UsageError, EXIT } from './exit-codes';
import type { CliIo } from './io';

type Options = NonNullable<ParseArgsConfig['options']>;

export interface Parsed {
  readonly values: Record<string, string | boolean | undefined>;
  readonly positionals: string[];
}

export function parseOptions(argv: readonly string[], options: Options, maxPositionals: number): Parsed {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  if (parsed.positionals.length > maxPositionals) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[maxPositionals])}`);
  }
  return { values: parsed.values as Parsed['values'], positionals: parsed.positionals };
}

/** Read a path, or standard input for `-`. Unreadable files are InputError(NO_INPUT). */
export async function readInput(io: CliIo, path: string): Promise<Uint8Array> {
  if (path === '-') return io.readStdin();
  try {
    return await io.readFile(path);
  } catch (err) {
    const reason = (err as { code?: string } | null)?.code ?? (err instanceof Error ? err.message : String(err));
    throw new InputError(`cannot read ${path}: ${reason}`, EXIT.NO_INPUT);
  }
}

/** One of a fixed set of choices, or UsageError naming them. */
export function choice<T extends string>(name: string, value: string | boolean | undefined, choices: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !(choices as readonly string[]).includes(value)) {
    throw new UsageError(`--${name} must be one of ${choices.join(', ')}`);
  }
  return value as T;
}
