// Shutdown as a state machine with a deadline (README.md, "Shutdown"): steps registered under the
// phases intake, drain, flush, close run phase by phase, the steps of one phase concurrently (an
// ordering need between two steps puts them in different phases). A step that throws or the
// deadline passing makes the exit code 1; the remaining phases still run after a throw.

import type { Logger } from 'pino';
import { errorMessage } from './errors';

export type ShutdownPhase = 'intake' | 'drain' | 'flush' | 'close';
export type ShutdownState = 'running' | 'draining' | 'flushing' | 'closed';
export type ShutdownStep = () => unknown;

const SHUTDOWN_PHASES: readonly ShutdownPhase[] = ['intake', 'drain', 'flush', 'close'];

interface ShutdownOptions {
  deadlineMs: number;
  log: Logger;
  /** Called once with the final exit code. Default: flush the logger, then `process.exit(code)`. */
  exit?: (code: number) => void;
  /** Signals that trigger shutdown; `[]` installs no handlers (tests, embedded use). Default SIGINT, SIGTERM. */
  signals?: readonly NodeJS.Signals[];
}

export interface ShutdownReport {
  exitCode: number;
  reason: string;
  durationMs: number;
  /** Steps that threw, with their error message. */
  failed: { name: string; phase: ShutdownPhase; error: string }[];
  /** Steps still running when the deadline passed, or never started because of it. */
  unfinished: { name: string; phase: ShutdownPhase; status: 'running' | 'not started' }[];
}

export interface Shutdown {
  readonly state: ShutdownState;
  /** Registers a step. A step whose phase has already run is run at once. */
  register(name: string, phase: ShutdownPhase, fn: ShutdownStep): void;
  /** Starts shutdown (idempotent). `exitCode` 1 marks a failure-triggered shutdown (fatal error at start-up or runtime). */
  trigger(reason: string, exitCode?: number): Promise<ShutdownReport>;
  /** Removes signal handlers without shutting down (tests). */
  dispose(): void;
}

interface Step {
  name: string;
  phase: ShutdownPhase;
  fn: ShutdownStep;
  status: 'pending' | 'running' | 'done' | 'failed';
}

const PHASE_STATE: Record<ShutdownPhase, ShutdownState> = {
  intake: 'draining',
  drain: 'draining',
  flush: 'flushing',
  close: 'flushing',
};

export function createShutdown(opts: ShutdownOptions): Shutdown {
  const { log, deadlineMs } = opts;
  const steps: Step[] = [];
  let state: ShutdownState = 'running';
  /** Index in SHUTDOWN_PHASES of the phase running or last run; -1 before shutdown. */
  let phaseIndex = -1;
  let running: Promise<ShutdownReport> | null = null;

  const exit =
    opts.exit ??
    ((code: number) => {
      // Exit explicitly: kafkajs and other clients keep timers alive for tens
      // of seconds after disconnect, and a shutdown that has finished must not wait for them.
      log.flush(() => process.exit(code));
    });

  const signals = opts.signals ?? (['SIGINT', 'SIGTERM'] as const);
  const onSignal = (sig: NodeJS.Signals): void => {
    if (running !== null) {
      log.warn({ signal: sig }, 'second signal during shutdown: exiting now');
      exit(1);
      return;
    }
    void trigger(`signal ${sig}`);
  };
  for (const sig of signals) process.on(sig, onSignal);
  const dispose = (): void => {
    for (const sig of signals) process.off(sig, onSignal);
  };

  async function run(reason: string, requestedCode: number): Promise<ShutdownReport> {
    const started = performance.now();
    log.info({ reason, deadlineMs }, 'shutdown started');
    const failed: ShutdownReport['failed'] = [];

    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'deadline'>((resolve) => {
      // Deliberately not unref'd: a hung step with no live handle must still
      // end in the deadline report, not in a silent natural exit with code 0.
      timer = setTimeout(() => resolve('deadline'), deadlineMs);
    });

    let timedOut = false;
    for (const [i, phase] of SHUTDOWN_PHASES.entries()) {
      phaseIndex = i;
      state = PHASE_STATE[phase];
      const inPhase = steps.filter((s) => s.phase === phase);
      if (inPhase.length === 0) continue;
      log.debug({ phase, steps: inPhase.map((s) => s.name) }, 'shutdown phase');
      const all = Promise.all(
        inPhase.map(async (s) => {
          s.status = 'running';
          try {
            await s.fn();
            s.status = 'done';
          } catch (e) {
            s.status = 'failed';
            failed.push({ name: s.name, phase, error: errorMessage(e) });
            log.error({ err: e, step: s.name, phase }, 'shutdown step failed');
          }
        }),
      );
      if ((await Promise.race([all, deadline])) === 'deadline') {
        timedOut = true;
        break;
      }
    }
    clearTimeout(timer);
    phaseIndex = SHUTDOWN_PHASES.length;

    const unfinished: ShutdownReport['unfinished'] = [];
    if (timedOut) {
      for (const s of steps) {
        if (s.status === 'running') unfinished.push({ name: s.name, phase: s.phase, status: 'running' });
        else if (s.status === 'pending') unfinished.push({ name: s.name, phase: s.phase, status: 'not started' });
      }
    }
    state = 'closed';
    const exitCode = timedOut || failed.length > 0 || requestedCode !== 0 ? Math.max(1, requestedCode) : 0;
    const report: ShutdownReport = { exitCode, reason, durationMs: Math.round(performance.now() - started), failed, unfinished };
    if (timedOut) log.error({ ...report }, 'shutdown deadline exceeded');
    else if (exitCode !== 0) log.warn({ ...report }, 'shutdown finished with errors');
    else log.info({ durationMs: report.durationMs, reason }, 'shutdown complete');
    dispose();
    exit(exitCode);
    return report;
  }

  function trigger(reason: string, exitCode = 0): Promise<ShutdownReport> {
    running ??= run(reason, exitCode);
    return running;
  }

  return {
    get state() {
      return state;
    },
    register(name, phase, fn) {
      if (running !== null && SHUTDOWN_PHASES.indexOf(phase) <= phaseIndex) {
        // Its phase has already run (e.g. a connection finished opening after a
        // signal arrived mid start-up): run it now so the resource is not leaked.
        log.debug({ step: name, phase }, 'late shutdown step: running immediately');
        void Promise.resolve()
          .then(fn)
          .catch((e: unknown) => log.error({ err: e, step: name, phase }, 'late shutdown step failed'));
        return;
      }
      steps.push({ name, phase, fn, status: 'pending' });
    },
    trigger,
    dispose,
  };
}
