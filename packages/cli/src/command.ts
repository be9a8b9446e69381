import type { CliIo } from './io';

/**
 * One subcommand: the exports of one file under `commands/`, listed once in
 * `commands/index.ts`; `run()` does the dispatch, `--help`, and the mapping
 * of UsageError / InputError to exit codes.
 */
export interface Command {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** Full `--help` text: usage line, options, examples. */
  readonly help: string;
  /** Returns the exit code. May throw UsageError or InputError. */
  run(argv: readonly string[], io: CliIo): Promise<number>;
}
