import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { nextSequenceHash } from '@vantage/hashing';
import type { KvEvent, WorkerId } from '@vantage/types';
import type { Engine, EngineRequest, Finished, StepResult } from '@vantage/sim';
import type { BlockPool } from '../src/block-pool';
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
    if (opts.check ?? true) checkEngineInvariants(e);
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

// White-box views of the engine and its block pool (their fields are private) for the invariant checks.
interface PoolView {
  readonly capacity: number;
  readonly used: number;
  readonly active: number;
  readonly seqLo: Uint32Array;
  readonly seqHi: Uint32Array;
  readonly ref: Int32Array;
  readonly next: Int32Array;
  readonly table: Int32Array;
  readonly freeTop: number;
  readonly lruHead: number;
  readonly lruSize: number;
  readonly cached: number;
  readonly privateBlocks: number;
  readonly referenced: number;
  find(lo: number, hi: number): number;
}

interface ReqView {
  readonly id: string;
  readonly isl: number;
  readonly generated: number;
  readonly computed: number;
  readonly held: readonly number[];
  readonly privateHeld: number;
}

interface EngineView {
  readonly pool: BlockPool;
  readonly blockSize: number;
  readonly maxNumSeqs: number;
  readonly running: readonly ReqView[];
  readonly waiting: readonly ReqView[];
  readonly waitingHead: number;
}

/** The view's fields must exist on the object: a renamed private field fails the check loudly instead of reading undefined. */
function viewOf<V>(o: object, fields: readonly (keyof V & string)[]): V {
  for (const f of fields) if (!(f in o)) throw new Error(`invariant view: ${o.constructor.name} has no field ${f}`);
  return o as unknown as V;
}
const POOL_FIELDS = ['capacity', 'used', 'active', 'seqLo', 'seqHi', 'ref', 'next', 'table', 'freeTop', 'lruHead', 'lruSize', 'cached', 'privateBlocks', 'referenced', 'find'] as const;
const ENGINE_FIELDS = ['pool', 'blockSize', 'maxNumSeqs', 'running', 'waiting', 'waitingHead'] as const;
const poolView = (pool: BlockPool): PoolView => viewOf<PoolView>(pool, POOL_FIELDS);
const engineView = (e: Engine): EngineView => viewOf<EngineView>(e, ENGINE_FIELDS);

/** Throws when a block pool counter disagrees with the structures it summarises. */
export function checkPoolInvariants(pool: BlockPool): void {
  const p = poolView(pool);
  let n = 0;
  let refd = 0;
  let unref = 0;
  for (let i = 0; i < p.table.length; i++) {
    const e = p.table[i]!;
    if (e === 0) continue;
    const s = e - 1;
    n++;
    if (p.find(p.seqLo[s]!, p.seqHi[s]!) !== s) throw new Error(`slot ${s} not reachable from its hash`);
    if (p.ref[s]! < 0) throw new Error(`negative reference count on slot ${s}`);
    if (p.ref[s]! > 0) refd++;
    else unref++;
  }
  if (n !== p.cached) throw new Error(`cached counter ${p.cached} != ${n}`);
  if (n + p.freeTop !== p.capacity) throw new Error(`slots leaked: ${n} cached + ${p.freeTop} free != ${p.capacity}`);
  if (refd !== p.referenced) throw new Error(`referenced counter ${p.referenced} != ${refd}`);
  if (unref !== p.lruSize) throw new Error(`LRU size ${p.lruSize} != unreferenced ${unref}`);
  let walked = 0;
  for (let s = p.lruHead; s !== -1; s = p.next[s]!) {
    if (p.ref[s] !== 0) throw new Error(`LRU holds referenced slot ${s}`);
    walked++;
  }
  if (walked !== p.lruSize) throw new Error(`LRU walk ${walked} != size ${p.lruSize}`);
  if (p.used > p.capacity || p.privateBlocks < 0) throw new Error(`over-allocated: ${p.used} of ${p.capacity}`);
}

/** Throws when the engine's accounting is inconsistent (its pool's included). */
export function checkEngineInvariants(engine: Engine): void {
  const e = engineView(engine);
  checkPoolInvariants(e.pool);
  let priv = 0;
  for (const r of e.running) {
    if (r.computed > r.isl + r.generated) throw new Error(`${r.id} computed beyond its sequence`);
    if (r.held.length + r.privateHeld !== Math.ceil(r.computed / e.blockSize)) {
      throw new Error(`${r.id} holds ${r.held.length}+${r.privateHeld} blocks for ${r.computed} tokens`);
    }
    priv += r.privateHeld;
  }
  for (let i = e.waitingHead; i < e.waiting.length; i++) {
    const r = e.waiting[i]!;
    if (r.held.length !== 0 || r.privateHeld !== 0) throw new Error(`waiting ${r.id} holds blocks`);
  }
  // Private blocks are only ever held by running requests.
  const referenced = new Set(e.running.flatMap((r) => r.held)).size;
  if (priv !== poolView(e.pool).active - referenced) throw new Error('private block accounting mismatch');
  if (e.running.length > e.maxNumSeqs) throw new Error(`running ${e.running.length} > maxNumSeqs`);
}

const hashOf = (p: PoolView, s: number): bigint => (BigInt(p.seqHi[s]!) << 32n) | BigInt(p.seqLo[s]!);

/** Sequence hashes of the engine's unreferenced cached blocks in LRU eviction order, oldest (next evicted) first. */
export function evictionOrder(engine: Engine): bigint[] {
  const p = poolView(engineView(engine).pool);
  const out: bigint[] = [];
  for (let s = p.lruHead; s !== -1; s = p.next[s]!) out.push(hashOf(p, s));
  return out;
}

/** Whether a block (by sequence hash) is resident in the engine's cache, referenced or evictable. */
export function hasBlock(engine: Engine, seq: bigint): boolean {
  return poolView(engineView(engine).pool).find(Number(seq & 0xffff_ffffn), Number(seq >> 32n)) >= 0;
}
