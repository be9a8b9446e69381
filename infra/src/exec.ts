import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPO_ROOT } from './paths';

/** Run a command to completion, streaming nothing; throws with its output on failure. */
export function run(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new Error(`${cmd} could not be run: ${r.error.message}`);
  if (r.status !== 0) {
    const out = `${r.stdout ?? ''}\n${r.stderr ?? ''}`.trim().split('\n').slice(-30).join('\n');
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}:\n${out}`);
  }
  return r.stdout;
}

/** Like run, but with output shown live (for long installs the user should see). */
export function runVisible(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, cwd: opts.cwd, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', (e) => reject(new Error(`${cmd} could not be run: ${e.message}`)));
    child.on('exit', (code) => (code === 0 ? resolvePromise() : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`))));
  });
}

/** A child process whose output goes to a log file. */
export interface LoggedProcess {
  readonly pid: number;
  readonly logFile: string;
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** SIGKILL at once (a crash). */
  kill9(): Promise<void>;
}

/**
 * Spawn `cmd` with its output appended to `logFile` (with `pipe`, stdin and stdout stay with the
 * caller). `group`: detached into its own process group, which the signals then go to.
 */
export function spawnLogged(
  cmd: string,
  args: string[],
  o: { readonly env: NodeJS.ProcessEnv; readonly logFile: string; readonly stdio: 'log' | 'pipe'; readonly group: boolean; readonly cwd?: string },
): { child: ChildProcess; proc: LoggedProcess } {
  const fd = openSync(o.logFile, 'a');
  const child = spawn(cmd, args, { env: o.env, cwd: o.cwd ?? REPO_ROOT, detached: o.group, stdio: o.stdio === 'log' ? ['ignore', fd, fd] : ['pipe', 'pipe', fd] });
  closeSync(fd);
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start ${cmd} ${args.join(' ')}`);
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      forgetAtExit(pid);
      resolve(code);
    });
  });
  const signal = (sig: NodeJS.Signals): boolean => signalProcess(pid, sig, o.group);
  const done = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const proc: LoggedProcess = {
    pid,
    logFile: o.logFile,
    exited,
    stop: async (graceMs = 10_000) => {
      if (done()) return;
      signal('SIGTERM');
      const t = setTimeout(() => signal('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
      // What is left of the group (Dynamo's runtime threads live in the one process, but be thorough).
      if (o.group) signal('SIGKILL');
    },
    kill9: async () => {
      if (done()) return;
      signal('SIGKILL');
      await exited;
    },
  };
  return { child, proc };
}

export function which(cmd: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  const p = r.stdout.trim();
  return r.status === 0 && p ? p : undefined;
}

/** A free TCP port on 127.0.0.1 (bind to port 0, read it, release it). */
export function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') return reject(new Error('no port'));
      srv.close(() => resolvePromise(addr.port));
    });
  });
}

/** Resolves true when something accepts TCP connections on host:port. */
export function tcpOpen(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const s = createConnection({ host, port });
    const done = (ok: boolean): void => {
      s.destroy();
      resolvePromise(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** `env[name]` as an integer in [1, max], or `dflt` when it is unset or empty. */
export function envInt(env: NodeJS.ProcessEnv, name: string, dflt: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`${name} must be a positive integer${max === Number.MAX_SAFE_INTEGER ? '' : ` up to ${max}`}, got ${v}`);
  return n;
}

/** Poll `check` until it returns true or the deadline passes. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, everyMs = 100): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await check()) return Date.now() - start;
    if (Date.now() - start > timeoutMs) throw new Error(`${what} not ready after ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/**
 * Polls `check` until it holds; resolves with the ms it took. `proc` exiting first is an error
 * quoting the end of its log; with `kill`, so is the timeout, after a SIGKILL.
 */
export async function untilReady(proc: LoggedProcess, what: string, check: () => Promise<boolean>, timeoutMs: number, kill = true): Promise<number> {
  let exitCode: number | null | undefined;
  void proc.exited.then((c) => (exitCode = c));
  const exited = (): Error => {
    const tail = existsSync(proc.logFile) ? readFileSync(proc.logFile, 'utf8').trimEnd().split('\n').slice(-15).join('\n') : '';
    return new Error(`${what}: the process exited (${exitCode}) first; last lines of ${proc.logFile}:\n${tail}`);
  };
  try {
    return await waitFor(what, async () => (exitCode === undefined ? check() : Promise.reject(exited())), timeoutMs);
  } catch (e) {
    if (!kill || exitCode !== undefined) throw e;
    await proc.kill9();
    throw new Error(`${(e as Error).message}; see ${proc.logFile}`);
  }
}

/**
 * Resolves true when `url` answers a GET with a 2xx status (and, with `body`, when `body` holds of
 * its JSON); false when it does not answer.
 */
export function httpOk(url: string, body?: (json: unknown) => boolean): Promise<boolean> {
  return fetch(url)
    .then(async (r) => r.ok && (body === undefined || body(await r.json())))
    .catch(() => false);
}

/** Sends `sig` to `pid` (its process group with `group`); false when there is no such process or group. */
export function signalProcess(pid: number, sig: NodeJS.Signals | 0, group = false): boolean {
  try {
    process.kill(group ? -pid : pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** True when a process with this pid exists. */
export const alive = (pid: number): boolean => signalProcess(pid, 0);

/** True when a process with this pid exists and its command line contains `marker`. */
export function processMatches(pid: number, marker: string): boolean {
  if (!alive(pid)) return false;
  try {
    // /proc is Linux-only; where it is missing, trust the pid.
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    return cmdline.includes(marker);
  } catch {
    return true;
  }
}

/**
 * CPU time a process has used so far, µs (user and system, all its threads), from /proc/<pid>/stat
 * (Linux; in USER_HZ, 100 per second). Null when the process or /proc is not there. Benchmarks use it
 * to report CPU per operation, which unlike latency does not grow when other processes compete.
 */
export function processCpuUs(pid: number | undefined): { user: number; sys: number } | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: Number(f[11]) * 10_000, sys: Number(f[12]) * 10_000 }; // utime, stime
  } catch {
    return null;
  }
}

const ENDED_WITH_PROCESS = Symbol.for('vantage.infra.ended-with-process');

/**
 * Processes to end (SIGKILL) if this Node process exits first, by pid: true to signal the pid's
 * whole process group, false the process alone. One table per Node process (infra/README.md).
 */
const endedWithProcess = ((globalThis as { [ENDED_WITH_PROCESS]?: Map<number, boolean> })[ENDED_WITH_PROCESS] ??= (() => {
  const table = new Map<number, boolean>();
  process.on('exit', () => {
    for (const [pid, group] of table) signalProcess(pid, 'SIGKILL', group);
  });
  return table;
})());

/** End `pid` (its process group with `group`) if this Node process exits before `forgetAtExit(pid)`. */
export function endAtExit(pid: number, group = false): void {
  endedWithProcess.set(pid, group);
}

/** `pid` has ended or been stopped: nothing to do for it at exit. */
export function forgetAtExit(pid: number): void {
  endedWithProcess.delete(pid);
}
