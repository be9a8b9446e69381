/**
 * Dispatcher: `vantage <command> [options]`. Handles the command list,
 * `--help` at both levels, and maps errors to documented exit codes so every
 * command only has to throw UsageError / InputError or return a code.
 */
import type { Command } from './command';
import { COMMANDS } from './commands/index';
import { EXIT, InputError, UsageError } from './exit-codes';
import type { CliIo } from './io';

function overview(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return (
    'Usage: vantage <command> [options]\n\nCommands:\n' +
    commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}\n`).join('') +
    '\nRun `vantage <command> --help` for a command\'s options.\n'
  );
}

const HELP_FLAGS = new Set(['-h', '--help']);

export async function run(argv: readonly string[], io: CliIo, commands: readonly Command[] = COMMANDS): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.stderr(overview(commands));
    return EXIT.USAGE;
  }
  // `--help` and `help` alone ask for the overview, `help <command>` for that command's help.
  const asksHelp = HELP_FLAGS.has(name) || name === 'help';
  const target = asksHelp ? (name === 'help' ? rest[0] : undefined) : name;
  if (target === undefined) {
    io.stdout(overview(commands));
    return EXIT.OK;
  }
  const cmd = commands.find((c) => c.name === target);
  if (!cmd) {
    io.stderr(`vantage: unknown command ${JSON.stringify(target)}\n\n${overview(commands)}`);
    return EXIT.USAGE;
  }
  if (asksHelp || rest.some((a) => HELP_FLAGS.has(a))) {
    io.stdout(cmd.help);
    return EXIT.OK;
  }
  try {
    return await cmd.run(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`vantage ${cmd.name}: ${err.message}\n\n${cmd.help}`);
      return EXIT.USAGE;
    }
    if (err instanceof InputError) {
      io.stderr(`vantage ${cmd.name}: ${err.message}\n`);
      return err.exitCode;
    }
    io.stderr(`vantage ${cmd.name}: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.INTERNAL;
  }
}
