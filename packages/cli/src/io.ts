/**
 * What a command may touch. `run()` takes this instead of using process
 * globals so tests drive the CLI in-process and capture everything it prints.
 */
import { readFile } from 'node:fs/promises';
import { buffer } from 'node:stream/consumers';

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  /** All of standard input as bytes. */
  readStdin(): Promise<Uint8Array>;
  readFile(path: string): Promise<Uint8Array>;
}

/** Process-backed IO for `main.ts`. */
export function processIo(): CliIo {
  return {
    stdout: (t) => void process.stdout.write(t),
    stderr: (t) => void process.stderr.write(t),
    readStdin: async () => new Uint8Array(await buffer(process.stdin)),
    readFile: async (p) => new Uint8Array(await readFile(p)),
  };
}
