/**
 * What a command may touch. `run()` takes this instead of using process
 * globals so tests drive the CLI in-process and capture everything it prints.
 */
import { readFile } from 'node:fs/promises';

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
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const c of process.stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
      return new Uint8Array(Buffer.concat(chunks));
    },
    readFile: async (p) => new Uint8Array(await readFile(p)),
  };
}
