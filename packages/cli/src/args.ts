/**
 * Option parsing on top of node:util parseArgs (strict: unknown options and
 * missing values are errors), turning its exceptions into UsageError.
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InputError, UsageError, EXIT } from './exit-codes';
import type { CliIo } from './io';

interface Parsed {
  readonly values: Record<string, string | boolean | undefined>;
  readonly positionals: string[];
}

/** A command's options: each of `strings` takes a value, each of `flags` is a boolean. */
export function parseOptions(argv: readonly string[], strings: readonly string[], flags: readonly string[] = [], maxPositionals = 0): Parsed {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  for (const name of strings) options[name] = { type: 'string' };
  for (const name of flags) options[name] = { type: 'boolean' };
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

/** A numeric option, `fallback` when absent; a usage error names the range when it is not a number in it. */
export function numOpt(name: string, v: string | boolean | undefined, fallback: number, opts: { integer?: boolean; min?: number; max?: number } = {}): number {
  if (v === undefined) return fallback;
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  const min = opts.min ?? -Infinity;
  const max = opts.max ?? Infinity;
  if (!Number.isFinite(n) || n < min || n > max || (opts.integer === true && !Number.isInteger(n))) {
    const range = max < Infinity ? ` in [${min}, ${max}]` : min > -Infinity ? ` >= ${min}` : '';
    throw new UsageError(`--${name} must be ${opts.integer === true ? 'an integer' : 'a number'}${range}`);
  }
  return n;
}

/** A comma-separated list of numbers in [min, max], `fallback` when absent. */
export function listOpt(name: string, v: string | boolean | undefined, fallback: readonly number[], min: number, max: number): number[] {
  if (v === undefined) return [...fallback];
  const parts = typeof v === 'string' ? v.split(',').map((x) => Number(x.trim())) : [];
  if (parts.length === 0 || parts.some((x) => !Number.isFinite(x) || x < min || x > max)) throw new UsageError(`--${name} must be a comma-separated list of numbers in [${min}, ${max}]`);
  return parts;
}

/** A file system error as its code (`ENOENT`), else its message. */
const reasonOf = (err: unknown): string => (err as { code?: string } | null)?.code ?? (err instanceof Error ? err.message : String(err));

/** Read a path, or standard input for `-`. Unreadable files are InputError(NO_INPUT). */
export async function readInput(io: CliIo, path: string): Promise<Uint8Array> {
  if (path === '-') return io.readStdin();
  try {
    return await io.readFile(path);
  } catch (err) {
    throw new InputError(`cannot read ${path}: ${reasonOf(err)}`, EXIT.NO_INPUT);
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

/** The value of a required string option; a usage error names it when absent or empty. */
export function required(name: string, v: string | boolean | undefined): string {
  if (typeof v !== 'string' || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

/** Write an output file; a failure becomes an InputError naming the path and the cause. */
export async function writeOutput(path: string, text: string): Promise<void> {
  try {
    await writeFile(path, text);
  } catch (err) {
    throw new InputError(`cannot write ${path}: ${reasonOf(err)}`, EXIT.INTERNAL);
  }
}

const SHOWN_PROBLEMS = 20;
type RowsRead = { lines: number; rows: readonly unknown[]; problems: readonly { line: number; message: string }[]; skipped: Readonly<Record<string, number>> };

/**
 * The rows of a JSON Lines input (`--input`), the same way for every tool that reads them: what was
 * read on stderr; bad rows listed (the first few, with their line numbers) and refused (exit 65)
 * unless `lenient`, which leaves them out and says so; no `what` at all is refused (exit 65).
 */
export async function readRows<P extends RowsRead>(io: CliIo, tool: string, input: string, what: string, lenient: boolean, parse: (text: string) => P): Promise<P> {
  const parsed = parse(new TextDecoder('utf-8').decode(await readInput(io, input)));
  const { problems } = parsed;
  const skipped = Object.entries(parsed.skipped).map(([k, n]) => `${k} ${n}`).join(', ');
  io.stderr(`${tool}: read ${parsed.lines} rows from ${input}: ${parsed.rows.length} ${what}, ${problems.length} bad${skipped === '' ? '' : `, skipped ${skipped}`}\n`);
  if (problems.length > 0) {
    const shown = problems.slice(0, SHOWN_PROBLEMS).map((p) => `  line ${p.line}: ${p.message}\n`).join('');
    const more = problems.length > SHOWN_PROBLEMS ? `  ... and ${problems.length - SHOWN_PROBLEMS} more\n` : '';
    if (!lenient) throw new InputError(`${problems.length} bad row(s) in ${input} (--lenient leaves them out):\n${shown}${more}`.trimEnd(), EXIT.DATA);
    io.stderr(`${tool}: leaving out ${problems.length} bad row(s):\n${shown}${more}`);
  }
  if (parsed.rows.length === 0) throw new InputError(`no ${what} in ${input}`, EXIT.DATA);
  return parsed;
}
