/**
 * Dynamo's file discovery backend (`DYN_DISCOVERY_BACKEND=file`, `DYN_FILE_KV=<dir>`) as a
 * DiscoveryStore. Dynamo writes one file per key at `<dir>/<bucket>/<percent-encoded rest of the key>`
 * (for example `<dir>/v1/mdc/dynamo%2Fbackend%2Fgenerate%2F5c7b584ed5244c8` for the logical key
 * `v1/mdc/dynamo/backend/generate/5c7b584ed5244c8`) and removes it when the worker shuts down.
 * Polling, partial writes, vanished files and a missing directory: README.md, "Failure behaviour".
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeJsonExact } from '@vantage/wire';
import type { DiscoveryChange, DiscoveryStore } from './store';

interface FileStoreOptions {
  /** Poll interval; default 200 ms. */
  readonly pollMs?: number;
  /** How long unparsable bytes are held back as a write in progress; default 1000 ms. */
  readonly settleMs?: number;
}

interface Known {
  /** size:mtimeMs:ino of the file when last read. */
  sig: string;
  /** Bytes last reported (undefined: not reported yet). */
  reported: Uint8Array | undefined;
  /** Unparsable bytes being held back, and since when. */
  held: { bytes: Uint8Array; sinceMs: number } | undefined;
}

/** Logical key of a file at `relDir/name`, or undefined when the name is not percent-encoded text. */
export function fileNameToKey(relDir: string, name: string): string | undefined {
  try {
    const rest = decodeURIComponent(name);
    return relDir === '' ? rest : `${relDir}/${rest}`;
  } catch {
    return undefined;
  }
}

const sameBytes = (a: Uint8Array | undefined, b: Uint8Array): boolean => a !== undefined && a.length === b.length && Buffer.compare(a, b) === 0;

class FileWatch {
  private readonly known = new Map<string, Known>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private running: Promise<void> | null = null;
  private reportedMissing = false;
  private readonly errorOnce = new Set<string>();

  constructor(
    private readonly dir: string,
    private readonly prefix: string,
    private readonly onChanges: (changes: readonly DiscoveryChange[], initial: boolean) => void,
    private readonly onError: ((err: Error) => void) | undefined,
    private readonly pollMs: number,
    private readonly settleMs: number,
  ) {}

  async start(): Promise<void> {
    await this.poll(true);
    this.schedule();
  }

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.running = this.poll(false).finally(() => {
        this.running = null;
        this.schedule();
      });
    }, this.pollMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.running) await this.running;
  }

  private error(tag: string, err: Error): void {
    // One report per distinct problem: a stuck file must not flood the caller every poll.
    if (this.errorOnce.has(tag)) return;
    this.errorOnce.add(tag);
    this.onError?.(err);
  }

  /** Every file under dir as [logical key, path]. */
  private async list(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const walk = async (abs: string, rel: string, depth: number): Promise<void> => {
      if (depth > 8) return;
      let entries;
      try {
        entries = await readdir(abs, { withFileTypes: true });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' && depth === 0) {
          if (!this.reportedMissing) {
            this.reportedMissing = true;
            this.onError?.(new Error(`discovery directory ${abs} does not exist (yet); treating it as empty`));
          }
          return;
        }
        if (code === 'ENOENT' || code === 'ENOTDIR') return; // removed while listing
        throw e;
      }
      if (depth === 0) this.reportedMissing = false;
      for (const d of entries) {
        if (d.name.startsWith('.')) continue; // editors' and writers' temporary files
        const p = join(abs, d.name);
        if (d.isDirectory()) await walk(p, rel === '' ? d.name : `${rel}/${d.name}`, depth + 1);
        else if (d.isFile()) {
          const key = fileNameToKey(rel, d.name);
          if (key === undefined) {
            this.error(`name:${p}`, new Error(`discovery file ${p}: name is not percent-encoded UTF-8; ignored`));
            continue;
          }
          if (key.startsWith(this.prefix)) out.set(key, p);
        }
      }
    };
    await walk(this.dir, '', 0);
    return out;
  }

  private async poll(initial: boolean): Promise<void> {
    if (this.closed) return;
    const changes: DiscoveryChange[] = [];
    let files: Map<string, string>;
    try {
      files = await this.list();
    } catch (e) {
      this.error(`list:${(e as NodeJS.ErrnoException).code ?? 'x'}`, e instanceof Error ? e : new Error(String(e)));
      if (initial) this.onChanges([], true);
      return;
    }
    const now = Date.now();
    for (const [key, path] of files) {
      let sig: string;
      try {
        const st = await stat(path);
        sig = `${st.size}:${st.mtimeMs}:${st.ino}`;
      } catch {
        continue; // vanished since the listing: the next poll sees it gone
      }
      const k = this.known.get(key);
      if (k !== undefined && k.sig === sig && k.held === undefined) continue;
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await readFile(path));
      } catch {
        continue;
      }
      const entry: Known = k ?? { sig, reported: undefined, held: undefined };
      entry.sig = sig;
      this.known.set(key, entry);
      if (sameBytes(entry.reported, bytes)) {
        entry.held = undefined;
        continue;
      }
      if (!decodeJsonExact(bytes).ok) {
        // A write in progress, most likely: hold it until it completes or stays this way past settleMs.
        if (entry.held === undefined || !sameBytes(entry.held.bytes, bytes)) {
          entry.held = { bytes, sinceMs: now };
          continue;
        }
        if (now - entry.held.sinceMs < this.settleMs) continue;
      }
      entry.held = undefined;
      entry.reported = bytes;
      changes.push({ kind: 'put', key, value: bytes });
    }
    for (const [key, k] of this.known) {
      if (files.has(key)) continue;
      this.known.delete(key);
      if (k.reported !== undefined) changes.push({ kind: 'delete', key });
    }
    if (this.closed) return;
    if (initial || changes.length > 0) this.onChanges(changes, initial);
  }
}

/** Dynamo's file backend at `dir` (the `DYN_FILE_KV` the workers were started with). */
export function fileDiscoveryStore(dir: string, opts: FileStoreOptions = {}): DiscoveryStore {
  if (typeof dir !== 'string' || dir.length === 0) throw new RangeError('fileDiscoveryStore: dir must be a non-empty path');
  if (opts.pollMs !== undefined && (!Number.isInteger(opts.pollMs) || opts.pollMs < 10)) throw new RangeError('fileDiscoveryStore: pollMs must be an integer >= 10');
  const watches: FileWatch[] = [];
  return {
    backend: 'file',
    async watch(prefix, onChanges, onError): Promise<void> {
      const w = new FileWatch(dir, prefix, onChanges, onError, opts.pollMs ?? 200, opts.settleMs ?? 1000);
      watches.push(w);
      await w.start();
    },
    async close(): Promise<void> {
      await Promise.all(watches.splice(0).map((w) => w.close()));
    },
  };
}
