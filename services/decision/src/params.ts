/**
 * The parameter-set file (README, "Parameter set"): loaded at start, reloaded on SIGHUP and when it
 * changes; a bad file is refused with one log line naming every problem and the previous set stays.
 */
import { readFile, stat } from 'node:fs/promises';
import { DEFAULT_PARAMETER_SET, loadParameterSet, ParameterStore, type ParameterSet } from '@vantage/rules';
import { VantageError, type Logger } from '@vantage/runtime';

type ReloadOutcome = 'loaded' | 'unchanged' | 'refused' | 'unreadable';

interface ParameterFileOptions {
  readonly path: string;
  readonly log: Logger;
  readonly onActive?: (set: ParameterSet, previous: ParameterSet | null) => void;
  readonly onReload?: (outcome: ReloadOutcome) => void;
}

export class ParameterFile {
  readonly store: ParameterStore;
  #sig = '';
  #reloading: Promise<ReloadOutcome> | null = null;

  private constructor(
    private readonly o: ParameterFileOptions,
    initial: ParameterSet,
    sig: string,
  ) {
    this.store = new ParameterStore(initial);
    this.#sig = sig;
  }

  /**
   * Load the initial set. An empty path means the development default. A bad
   * initial file is a start-up error (CONFIG_INVALID): there is no previous
   * set to keep, and silently running the default would mislabel a whole run.
   */
  static async open(o: ParameterFileOptions): Promise<ParameterFile> {
    if (o.path === '') {
      o.log.warn({ version: DEFAULT_PARAMETER_SET.version }, 'no parameter-set file configured: using the development default (variant stage); never for an evaluation run');
      const pf = new ParameterFile(o, DEFAULT_PARAMETER_SET, '');
      o.onActive?.(pf.store.current(), null);
      return pf;
    }
    let text: string;
    let sig: string;
    try {
      [text, sig] = await readWithSignature(o.path);
    } catch (e) {
      throw new VantageError('CONFIG_INVALID', `cannot read parameter-set file ${o.path}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    const r = loadParameterSet(text);
    if (!r.ok) {
      throw new VantageError('CONFIG_INVALID', `parameter-set file ${o.path} is invalid: ${r.errors.join('; ')}`, { details: { problems: r.errors } });
    }
    const pf = new ParameterFile(o, r.value, sig);
    o.log.info({ path: o.path, version: r.value.version, variant: r.value.variant }, 'parameter set loaded');
    o.onActive?.(pf.store.current(), null);
    return pf;
  }

  current(): ParameterSet {
    return this.store.current();
  }

  /** Reload if the file changed (or always, when `force`). Concurrent calls share one reload. */
  reload(force = false): Promise<ReloadOutcome> {
    if (this.o.path === '') return Promise.resolve('unchanged');
    this.#reloading ??= this.#reload(force).finally(() => {
      this.#reloading = null;
    });
    return this.#reloading;
  }

  async #reload(force: boolean): Promise<ReloadOutcome> {
    const { path, log } = this.o;
    let outcome: ReloadOutcome;
    try {
      const s = await stat(path);
      const sig = signature(s);
      if (!force && sig === this.#sig) return 'unchanged';
      const [text, sig2] = await readWithSignature(path);
      this.#sig = sig2;
      const previous = this.store.current();
      const r = this.store.tryReplace(text);
      if (r.ok) {
        outcome = 'loaded';
        log.info({ path, version: r.version, previousVersion: r.previousVersion, variant: this.store.current().variant }, 'parameter set reloaded');
        this.o.onActive?.(this.store.current(), previous);
      } else {
        outcome = 'refused';
        log.error({ path, problems: r.errors, activeVersion: r.activeVersion }, r.message);
      }
    } catch (e) {
      outcome = 'unreadable';
      log.error({ path, err: e, activeVersion: this.store.current().version }, `parameter-set file unreadable; version ${this.store.current().version} stays active`);
    }
    this.o.onReload?.(outcome);
    return outcome;
  }
}

function signature(s: { mtimeMs: number; size: number; ino: number }): string {
  return `${s.mtimeMs}:${s.size}:${s.ino}`;
}

async function readWithSignature(path: string): Promise<[string, string]> {
  const before = await stat(path);
  const text = await readFile(path, 'utf8');
  return [text, signature(before)];
}
