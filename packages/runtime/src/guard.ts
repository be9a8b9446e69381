// Guards for untrusted input and honest health (README.md, "Logging" and "Ops endpoint"): a blip
// is not an outage; an outage is never hidden.

import type { Logger } from 'pino';
import type { HealthResult } from './ops';

interface RateLimitedLogOptions {
  /** At most one line per key per interval. Default 10 s. */
  intervalMs?: number;
  /** Keys remembered at once; past it the oldest key is forgotten (its next line is logged at once). Default 1024. */
  maxKeys?: number;
  now?: () => number;
}

interface KeyState {
  lastMs: number;
  suppressed: number;
}

/**
 * Logs the first line of a key at once and then at most one per `intervalMs`, each with `suppressed`
 * (README.md, "Logging"): a flood of hostile messages costs a few lines per (source, reason).
 */
export class RateLimitedLog {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #maxKeys: number;
  readonly #now: () => number;
  readonly #keys = new Map<string, KeyState>();

  constructor(log: Logger, opts: RateLimitedLogOptions = {}) {
    this.#log = log;
    this.#intervalMs = opts.intervalMs ?? 10_000;
    this.#maxKeys = opts.maxKeys ?? 1024;
    this.#now = opts.now ?? Date.now;
  }

  /** True when the line was written. */
  warn(key: string, fields: Record<string, unknown>, msg: string): boolean {
    const now = this.#now();
    const st = this.#keys.get(key);
    if (st !== undefined && now - st.lastMs < this.#intervalMs) {
      st.suppressed++;
      return false;
    }
    const suppressed = st?.suppressed ?? 0;
    if (st === undefined && this.#keys.size >= this.#maxKeys) {
      const oldest = this.#keys.keys().next();
      if (oldest.done !== true) this.#keys.delete(oldest.value);
    }
    // A key already held keeps its place in the eviction order (Map.set does not move it).
    this.#keys.set(key, { lastMs: now, suppressed: 0 });
    this.#log.warn({ ...fields, suppressed }, msg);
    return true;
  }
}

/** A condition that may fail: `fail(reason)` starts (or continues) an outage, `ok()` ends it; `health()` is unhealthy once it has lasted `thresholdMs`. */
export class OutageClock {
  #since: number | null = null;
  #reason = '';
  readonly #now: () => number;

  constructor(
    readonly thresholdMs: number,
    now: () => number = Date.now,
  ) {
    this.#now = now;
  }

  fail(reason: string): void {
    if (this.#since === null) this.#since = this.#now();
    this.#reason = reason;
  }

  ok(): void {
    this.#since = null;
    this.#reason = '';
  }

  get failing(): boolean {
    return this.#since !== null;
  }

  get reason(): string {
    return this.#reason;
  }

  /** Unhealthy once failing for at least `thresholdMs`; `details` are added either way. */
  health(details: Record<string, unknown> = {}): HealthResult {
    if (this.#since === null) return { ok: true, details };
    const forMs = this.#now() - this.#since;
    return { ok: forMs < this.thresholdMs, details: { ...details, reason: this.#reason, failingForMs: forMs, thresholdMs: this.thresholdMs } };
  }
}
