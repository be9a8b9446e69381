import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { nextSequenceHash } from '@vantage/hashing';
import type { KvEvent, WorkerId } from '@vantage/types';
import type { Engine, EngineRequest, Finished, StepResult } from '@vantage/sim';
import { promptFromTokens } from '@vantage/sim';

export const W1 = 1n as WorkerId;

/**
 * The shared data folder beside the repository (traces are not part of the
 * product); `VANTAGE_SHARED` names it for a checkout that has none beside it
 * (a git worktree elsewhere).
 */
export const SHARED: string = ((): string => {
  const beside = fileURLToPath(new URL('../../../../shared', import.meta.url));
  return existsSync(beside) ? beside : (process.env['VANTAGE_SHARED'] ?? beside);
})();

export function req(id: string, tokens: ArrayLike<number>, blockSize: number, osl: number, arrivalMs = 0, outputTokens?: Uint32Array): EngineRequest {
  return { id, arrivalMs, prompt: promptFromTokens(tokens, blockSize), osl, ...(outputTokens ? { outputTokens } : {}) };
}

export function range(from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** Step an engine until idle; every pass is checked against the engine's own invariants. */
export function runToIdle(e: Engine, opts: { check?: boolean; maxSteps?: number } = {}): { steps: StepResult[]; finished: Finished[] } {
  const steps: StepResult[] = [];
  const finished: Finished[] = [];
  for (let i = 0; i < (opts.maxSteps ?? 1_000_000); i++) {
    const t = e.nextEventTime();
    if (t === Infinity) return { steps, finished };
    const s = e.step(t);
    if (opts.check ?? true) e.checkInvariants();
    steps.push(s);
    finished.push(...s.finished);
  }
  throw new Error('engine did not go idle');
}

/**
 * A tiny reference model of what a consumer of the engine's KV events can
 * know: the set of resident blocks and each one's parent. Applying events
 * checks them: ids consecutive, stored parents resident, each stored block's
 * hash chained from its parent exactly as Dynamo hashes sequences, no block
 * stored twice while resident, removed blocks resident and childless.
 */
export class EventModel {
  readonly parent = new Map<bigint, bigint | null>();
  private nextId: bigint | null = null;

  apply(ev: KvEvent): void {
    if (this.nextId !== null && ev.eventId !== this.nextId) throw new Error(`event id ${ev.eventId}, expected ${this.nextId}`);
    this.nextId = ev.eventId + 1n;
    const d = ev.data;
    if (d.kind === 'stored') {
      let parent: bigint | null = d.parentHash;
      if (parent !== null && !this.parent.has(parent)) throw new Error(`stored under unknown parent ${parent}`);
      if (d.blockHashes.length !== d.tokensHashes.length || d.blockHashes.length === 0) throw new Error('malformed stored event');
      for (let i = 0; i < d.blockHashes.length; i++) {
        const h = d.blockHashes[i]!;
        const local = d.tokensHashes[i]!;
        const expected = parent === null ? local : nextSequenceHash(parent, local);
        if (h !== expected) throw new Error(`block ${h} is not the sequence hash of its parent and tokens`);
        if (this.parent.has(h)) throw new Error(`block ${h} stored twice`);
        this.parent.set(h, parent);
        parent = h;
      }
    } else if (d.kind === 'removed') {
      for (const h of d.blockHashes) {
        if (!this.parent.has(h)) throw new Error(`removed unknown block ${h}`);
        this.parent.delete(h);
      }
      const gone = new Set(d.blockHashes);
      for (const [h, p] of this.parent) if (p !== null && gone.has(p)) throw new Error(`block ${h} outlives its removed parent ${p}`);
    } else {
      this.parent.clear();
    }
  }
}
