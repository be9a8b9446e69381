/**
 * One simulated Dynamo worker (one engine, one dp rank), after Dynamo's vLLM mocker. How a driver
 * uses it: the README's "Engine"; its scheduling and cache rules: "Fidelity notes".
 */
import type { ExternalHash, KvEvent, WorkerCapacity, WorkerId } from '@vantage/types';
import { localBlockHash, nextSequenceHash } from '@vantage/hashing';
import { seed32 } from '@vantage/selection';
import { BlockPool } from './block-pool';
import type { PromptBlocks } from './prompt';
import { polynomialTiming, type TimingModel } from './timing';

export interface EngineConfig {
  readonly workerId: WorkerId;
  /** Tokens per KV block. Default 64. */
  readonly blockSize?: number;
  /** GPU KV blocks. Default 16,384. */
  readonly numGpuBlocks?: number;
  /** Token budget per pass. Default 8,192. */
  readonly maxNumBatchedTokens?: number;
  /** Running requests at most. Default 256. */
  readonly maxNumSeqs?: number;
  /** Default: Dynamo's mocker polynomials. */
  readonly timing?: TimingModel;
  /** First `event_id`. Default 0 (the mocker's start; real workers start at 1). */
  readonly firstEventId?: bigint;
}

export interface EngineRequest {
  readonly id: string;
  readonly arrivalMs: number;
  readonly prompt: PromptBlocks;
  /** Output tokens to generate (at least 1 is always generated). */
  readonly osl: number;
  /**
   * Token ids the engine "generates". When absent, ids are synthesised from
   * the request id, so output blocks still hash (and cache) like real ones.
   */
  readonly outputTokens?: Uint32Array;
}

export type AddResult = { ok: true } | { ok: false; code: 'duplicate_id' | 'too_long' | 'block_size_mismatch' | 'invalid'; reason: string };

export interface FirstToken {
  readonly requestId: string;
  readonly atMs: number;
}

export interface Finished {
  readonly requestId: string;
  readonly arrivalMs: number;
  readonly firstTokenMs: number;
  readonly atMs: number;
  readonly isl: number;
  readonly outputTokens: number;
  /** Prompt tokens found in the cache at first admission. */
  readonly reusedTokens: number;
  readonly preemptions: number;
}

export interface StepResult {
  readonly startMs: number;
  readonly endMs: number;
  /** Forward passes covered: 1, or more when quiet decode passes were fast-forwarded (see `StepOptions`). */
  readonly passes: number;
  /** Uncached prompt (and recomputed) tokens computed in the pass. */
  readonly prefillTokens: number;
  /** Tokens computed (prefill and decode); never above maxNumBatchedTokens per pass. */
  readonly scheduledTokens: number;
  /** Tokens emitted at endMs (one per decoding request). */
  readonly tokensEmitted: number;
  readonly scheduledRequests: number;
  readonly firstTokens: readonly FirstToken[];
  readonly finished: readonly Finished[];
  readonly preempted: readonly string[];
  /** KV events of this pass, in event_id order, published at startMs. */
  readonly kvEvents: readonly KvEvent[];
}

interface StepOptions {
  /**
   * Fast-forward: after the pass, also run the quiet decode passes (nothing admitted, allocated,
   * filled or finished) that start before `untilMs` and the next pending arrival, with results
   * identical to stepping them singly provided no request is added before `untilMs` (README
   * "Driving many engines"). Omitted: exactly one pass.
   */
  readonly untilMs?: number;
}

/** Dynamo's `ActiveLoad` figures (its worker and rank are the engine's), plus queue sizes. */
interface EngineLoad {
  readonly activeDecodeBlocks: number;
  readonly activePrefillTokens: number;
  readonly kvUsedBlocks: number;
  readonly waiting: number;
  readonly running: number;
}

interface Req {
  readonly id: string;
  readonly arrivalMs: number;
  readonly isl: number;
  readonly osl: number;
  readonly prompt: PromptBlocks;
  readonly outputTokens: Uint32Array | undefined;
  readonly outSeed: number;
  /**
   * Sequence / local hashes of every full block known so far (prompt, then
   * generated) as little-endian (lo, hi) u32 words: block b at [2b, 2b+1].
   * Starts as a view of the prompt's arrays (no copy); grows on generation.
   */
  seqW: Uint32Array;
  localW: Uint32Array;
  /** Full blocks whose hashes are known. */
  nKnown: number;
  /** Pool slots of the cached full blocks held, blocks 0..held.length-1. */
  readonly held: number[];
  /** Allocated blocks after the held ones (not yet full). */
  privateHeld: number;
  computed: number;
  generated: number;
  /** Finished: dropped from `running` at the end of the pass. */
  done: boolean;
  firstTokenMs: number;
  reusedTokens: number;
  preemptions: number;
  /** Prefix hit measured on arrival; the load report's estimate while waiting. */
  hitAtArrival: number;
  /** Tokens and prefill tokens scheduled in the current pass (undone on preemption). */
  passTokens: number;
  passPrefill: number;
}

/** A BigUint64Array's elements as (lo, hi) u32 words (little-endian host, checked by @vantage/hashing). */
function wordsOf(a: BigUint64Array): Uint32Array {
  return new Uint32Array(a.buffer, a.byteOffset, a.length * 2);
}

function bigOf(w: Uint32Array, b: number): bigint {
  return (BigInt(w[2 * b + 1]!) << 32n) | BigInt(w[2 * b]!);
}

/** Hashes of blocks [from, from + n) of a words array as a BigUint64Array, copied word by word (no bigint boxing). */
function hashesOf(w: Uint32Array, from: number, n: number): BigUint64Array {
  const out = new BigUint64Array(n);
  wordsOf(out).set(w.subarray(2 * from, 2 * (from + n)));
  return out;
}

function grow(w: Uint32Array, blocks: number): Uint32Array {
  const out = new Uint32Array(Math.max(2 * blocks, 2 * 8, w.length * 2));
  out.set(w);
  return out;
}

/** Output token ids when none are supplied: a deterministic per-request stream. */
function synthToken(seed: number, o: number): number {
  let z = (seed ^ Math.imul(o + 1, 0x9e3779b1)) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return ((z ^ (z >>> 16)) >>> 0) % 150_000;
}

/** Where a set of engines' next pass is: the engine first due (-1 when none has work) and its time, and the earliest time of any other. */
export interface NextPass {
  best: number;
  bestT: number;
  other: number;
}

/** Find the engine whose pass comes first (ties to the lowest index); written into `out`, which is returned. */
export function nextPass(engines: readonly Engine[], out: NextPass): NextPass {
  out.best = -1;
  out.bestT = Infinity;
  out.other = Infinity;
  for (let i = 0; i < engines.length; i++) {
    const e = engines[i]!.nextEventTime();
    if (e < out.bestT) {
      out.other = out.bestT;
      out.bestT = e;
      out.best = i;
    } else if (e < out.other) out.other = e;
  }
  return out;
}

export class Engine {
  readonly workerId: WorkerId;
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  private readonly timing: TimingModel;
  private readonly pool: BlockPool;
  private nextEventId: bigint;

  private readonly requests = new Map<string, Req>();
  /** Added ahead of their arrival, sorted by arrivalMs. */
  private pending: Req[] = [];
  private waiting: Req[] = [];
  private waitingHead = 0;
  private running: Req[] = [];
  private busyUntilMs = 0;
  private stalled = false;
  private readonly events: KvEvent[] = [];

  constructor(cfg: EngineConfig) {
    this.workerId = cfg.workerId;
    this.blockSize = cfg.blockSize ?? 64;
    this.numGpuBlocks = cfg.numGpuBlocks ?? 16_384;
    this.maxNumBatchedTokens = cfg.maxNumBatchedTokens ?? 8_192;
    this.maxNumSeqs = cfg.maxNumSeqs ?? 256;
    this.timing = cfg.timing ?? polynomialTiming;
    this.nextEventId = cfg.firstEventId ?? 0n;
    for (const [k, v] of Object.entries({ blockSize: this.blockSize, maxNumBatchedTokens: this.maxNumBatchedTokens, maxNumSeqs: this.maxNumSeqs })) {
      if (!Number.isInteger(v) || v <= 0) throw new RangeError(`${k} must be a positive integer, got ${v}`);
    }
    this.pool = new BlockPool(this.numGpuBlocks);
  }

  /** What this engine advertises as a worker of its own (one dp rank, schedulable), as a registration carries it. */
  capacity(): WorkerCapacity {
    return {
      blockSize: this.blockSize,
      totalKvBlocks: this.numGpuBlocks,
      maxNumBatchedTokens: this.maxNumBatchedTokens,
      maxNumSeqs: this.maxNumSeqs,
      dpStartRank: 0,
      dpSize: 1,
      schedulable: true,
    };
  }

  // ---------------------------------------------------------------- intake

  addRequest(r: EngineRequest): AddResult {
    if (this.requests.has(r.id)) return { ok: false, code: 'duplicate_id', reason: `request ${r.id} is already on this engine` };
    if (r.prompt.blockSize !== this.blockSize) {
      return { ok: false, code: 'block_size_mismatch', reason: `prompt hashed at block size ${r.prompt.blockSize}, engine uses ${this.blockSize}` };
    }
    if (!Number.isFinite(r.arrivalMs) || !Number.isInteger(r.osl) || r.osl < 0 || r.prompt.isl <= 0) {
      return { ok: false, code: 'invalid', reason: `request ${r.id}: arrivalMs, osl or isl out of range` };
    }
    const osl = Math.max(1, r.osl);
    // The final token is never written to the cache, so isl + osl - 1 tokens must fit.
    if (Math.ceil((r.prompt.isl + osl - 1) / this.blockSize) > this.numGpuBlocks) {
      return { ok: false, code: 'too_long', reason: `request ${r.id} needs more KV blocks than the engine has` };
    }
    const req: Req = {
      id: r.id,
      arrivalMs: r.arrivalMs,
      isl: r.prompt.isl,
      osl,
      prompt: r.prompt,
      outputTokens: r.outputTokens,
      outSeed: seed32(r.id),
      seqW: wordsOf(r.prompt.sequence),
      localW: wordsOf(r.prompt.local),
      nKnown: r.prompt.sequence.length,
      held: [],
      privateHeld: 0,
      computed: 0,
      generated: 0,
      done: false,
      firstTokenMs: NaN,
      reusedTokens: 0,
      preemptions: 0,
      hitAtArrival: 0,
      passTokens: 0,
      passPrefill: 0,
    };
    this.requests.set(r.id, req);
    // Usually appended in order; insertion keeps out-of-order adds correct.
    let i = this.pending.length;
    while (i > 0 && this.pending[i - 1]!.arrivalMs > req.arrivalMs) i--;
    this.pending.splice(i, 0, req);
    this.stalled = false;
    return { ok: true };
  }

  private admitArrivals(nowMs: number): void {
    let n = 0;
    while (n < this.pending.length && this.pending[n]!.arrivalMs <= nowMs) {
      const r = this.pending[n++]!;
      r.hitAtArrival = this.prefixHitBlocks(r) * this.blockSize;
      this.waiting.push(r);
    }
    if (n > 0) this.pending = this.pending.slice(n);
  }

  // ----------------------------------------------------------------- clock

  /** When this engine next wants `step` called; Infinity when it has nothing to do. */
  nextEventTime(): number {
    if (!this.stalled && (this.running.length > 0 || this.waiting.length > this.waitingHead)) return this.busyUntilMs;
    if (this.pending.length > 0) return Math.max(this.busyUntilMs, this.pending[0]!.arrivalMs);
    return Infinity;
  }

  /** Run one forward pass starting at `nowMs` (>= the end of the previous pass). */
  step(nowMs: number, opts: StepOptions = {}): StepResult {
    if (nowMs < this.busyUntilMs) throw new RangeError(`step at ${nowMs} ms before the previous pass ends at ${this.busyUntilMs} ms`);
    this.admitArrivals(nowMs);
    const bs = this.blockSize;
    let budget = this.maxNumBatchedTokens;
    const preempted: string[] = [];

    // 1. running requests
    for (const r of this.running) {
      r.passTokens = 0;
      r.passPrefill = 0;
    }
    for (let i = 0; i < this.running.length && budget > 0; ) {
      const r = this.running[i]!;
      const k = Math.min(r.isl + r.generated - r.computed, budget);
      if (k <= 0) {
        i++;
        continue;
      }
      let ok = this.allocateFor(r, k);
      while (!ok) {
        const victim = this.running[this.running.length - 1]!;
        budget += victim.passTokens;
        this.preempt(victim);
        preempted.push(victim.id);
        if (victim === r) break;
        ok = this.allocateFor(r, k);
      }
      if (!ok) break; // r itself was preempted (it was the last running request)
      this.commit(r, k);
      budget -= k;
      i++;
    }

    // 2. waiting requests
    if (preempted.length === 0) {
      while (budget > 0 && this.running.length < this.maxNumSeqs && this.waitingHead < this.waiting.length) {
        const r = this.waiting[this.waitingHead]!;
        const hit = this.prefixHitBlocks(r);
        for (let b = 0; b < hit; b++) {
          const slot = this.pool.find(r.seqW[2 * b]!, r.seqW[2 * b + 1]!);
          this.pool.acquire(slot);
          r.held.push(slot);
        }
        r.computed = hit * bs;
        const k = Math.min(r.isl + r.generated - r.computed, budget);
        if (!this.allocateFor(r, k)) {
          this.releaseAll(r);
          r.computed = 0;
          break;
        }
        // First admission: a preempted request is admitted again with its reuse already counted.
        if (r.preemptions === 0) r.reusedTokens = Math.min(r.computed, r.isl);
        this.waitingHead++;
        this.running.push(r);
        this.commit(r, k);
        budget -= k;
      }
      if (this.waitingHead > 64 && this.waitingHead * 2 > this.waiting.length) {
        this.waiting = this.waiting.slice(this.waitingHead);
        this.waitingHead = 0;
      }
    }
    this.flushEvictions();

    // 3. every request with all known tokens computed emits one token; those
    // that computed a single decode token (not a prefill chunk) time the decode step
    const scheduled = this.maxNumBatchedTokens - budget;
    let ready = 0;
    let decoding = 0;
    let contextSum = 0;
    let prefillTokens = 0;
    let prefillRequests = 0;
    let prefillThrough = 0;
    let prefillPrefix = 0;
    let scheduledRequests = 0;
    for (const r of this.running) {
      if (r.passTokens > 0) scheduledRequests++;
      if (r.passPrefill > 0) {
        prefillTokens += r.passPrefill;
        prefillRequests++;
        prefillThrough += r.computed;
        prefillPrefix += r.computed - r.passTokens;
      }
      if (r.computed === r.isl + r.generated) {
        ready++;
        if (r.passTokens > 0 && r.passPrefill === 0) {
          decoding++;
          contextSum += r.computed;
        }
      }
    }
    if (scheduled === 0 && ready === 0) {
      // Nothing could run (cannot happen for requests that fit; guard against spinning).
      this.stalled = this.running.length > 0 || this.waiting.length > this.waitingHead;
      return { startMs: nowMs, endMs: nowMs, passes: 0, prefillTokens: 0, scheduledTokens: 0, tokensEmitted: 0, scheduledRequests: 0, firstTokens: [], finished: [], preempted, kvEvents: this.events.splice(0) };
    }
    const duration = this.timing.stepMs({
      prefillRequests,
      prefillThroughTokens: prefillThrough,
      prefillPrefixTokens: prefillPrefix,
      decodeRequests: decoding,
      decodeKvTokens: contextSum,
      totalKvTokens: this.numGpuBlocks * bs,
    });
    if (!(duration > 0) || !Number.isFinite(duration)) throw new RangeError(`timing model returned ${duration} ms for a non-empty pass`);
    const endMs = nowMs + duration;

    const firstTokens: FirstToken[] = [];
    const finished: Finished[] = [];
    let anyDone = false;
    for (const r of this.running) {
      if (r.computed !== r.isl + r.generated) continue;
      r.generated++;
      if (r.generated === 1) {
        r.firstTokenMs = endMs;
        firstTokens.push({ requestId: r.id, atMs: endMs });
      }
      if (r.generated >= r.osl) {
        this.releaseAll(r);
        r.done = true;
        anyDone = true;
        this.requests.delete(r.id);
        finished.push({
          requestId: r.id,
          arrivalMs: r.arrivalMs,
          firstTokenMs: r.firstTokenMs,
          atMs: endMs,
          isl: r.isl,
          outputTokens: r.generated,
          reusedTokens: r.reusedTokens,
          preemptions: r.preemptions,
        });
      }
    }
    if (anyDone) this.running = this.running.filter((r) => !r.done);
    this.busyUntilMs = endMs;
    let passes = 1;
    let scheduledTokens = scheduled;
    let emitted = ready;
    // Not after a pass that finished requests: in closed-loop and session
    // workloads a completion triggers an arrival at this pass's end, which the
    // caller could not have known when it chose `untilMs`.
    if (opts.untilMs !== undefined && preempted.length === 0 && finished.length === 0) {
      const q = this.fastForward(opts.untilMs);
      passes += q;
      scheduledTokens += q * this.running.length;
      emitted += q * this.running.length;
    }
    return { startMs: nowMs, endMs: this.busyUntilMs, passes, prefillTokens, scheduledTokens, tokensEmitted: emitted, scheduledRequests, firstTokens, finished, preempted, kvEvents: this.events.splice(0) };
  }

  /**
   * Run the quiet decode passes that follow, in O(running + passes): every
   * running request decodes one token per pass, nothing is allocated, filled,
   * admitted or finished, so only counters advance and every pass holds the
   * same blocks (the decode model's context grows one token per request per pass). Pass durations are still computed one by one (and summed
   * in the same order as single steps) so times match single stepping exactly.
   */
  private fastForward(untilMs: number): number {
    const n = this.running.length;
    if (n === 0 || n > this.maxNumBatchedTokens || this.waitingHead < this.waiting.length) return 0;
    const bs = this.blockSize;
    let k = Infinity;
    let contextSum = 0;
    for (const r of this.running) {
      // Pure decode: one sampled token not yet computed.
      if (r.generated === 0 || r.computed !== r.isl + r.generated - 1) return 0;
      const x = r.computed % bs;
      // The pass computing position c allocates when c % bs == 0 and fills a block when c % bs == bs - 1.
      const toBoundary = x === 0 || x === bs - 1 ? 0 : bs - 1 - x;
      k = Math.min(k, toBoundary, r.osl - r.generated - 1);
      if (k <= 0) return 0;
      contextSum += r.computed;
    }
    const horizon = Math.min(untilMs, this.pending.length > 0 ? this.pending[0]!.arrivalMs : Infinity);
    const totalKvTokens = this.numGpuBlocks * bs;
    let t = this.busyUntilMs;
    let j = 0;
    while (j < k && t < horizon) {
      j++;
      const d = this.timing.stepMs({ prefillRequests: 0, prefillThroughTokens: 0, prefillPrefixTokens: 0, decodeRequests: n, decodeKvTokens: contextSum + n * j, totalKvTokens });
      if (!(d > 0) || !Number.isFinite(d)) throw new RangeError(`timing model returned ${d} ms for a decode pass`);
      t += d;
    }
    if (j === 0) return 0;
    for (const r of this.running) {
      r.computed += j;
      r.generated += j;
    }
    this.busyUntilMs = t;
    return j;
  }

  // ------------------------------------------------------------ KV cache

  /** Leading full blocks of r found in the cache, leaving at least one token to compute. */
  private prefixHitBlocks(r: Req): number {
    const max = Math.min(r.nKnown, Math.floor((r.isl + r.generated - 1) / this.blockSize));
    const w = r.seqW;
    let m = 0;
    while (m < max && this.pool.find(w[2 * m]!, w[2 * m + 1]!) >= 0) m++;
    return m;
  }

  /** Make room for k more computed tokens; false (nothing changed) when blocks are short. */
  private allocateFor(r: Req, k: number): boolean {
    const need = Math.ceil((r.computed + k) / this.blockSize) - r.held.length - r.privateHeld;
    if (need <= 0) return true;
    if (!this.pool.allocPrivate(need)) return false;
    r.privateHeld += need;
    return true;
  }

  /**
   * Put k tokens of r in this pass: mark them computed and set the pass's share of r (a preempted
   * request leaves `running`, and with it the pass's sums); hash and publish blocks that became full.
   */
  private commit(r: Req, k: number): void {
    const bs = this.blockSize;
    const before = r.computed;
    r.computed += k;
    r.passTokens = k;
    // Tokens of a request still working through its known sequence (not a
    // single decode token after a sampled one) count as prefill work.
    r.passPrefill = r.generated > 0 && before === r.isl + r.generated - 1 ? 0 : k;
    const full = Math.floor(r.computed / bs);
    // New blocks are announced in runs of consecutive blocks (one `stored` event per run).
    let runStart = -1;
    for (let b = r.held.length; b < full; b++) {
      if (b >= r.nKnown) this.hashGeneratedBlock(r, b);
      r.privateHeld--;
      r.held.push(this.pool.promote(r.seqW[2 * b]!, r.seqW[2 * b + 1]!));
      if (this.pool.lastPromoteWasNew) {
        if (runStart < 0) runStart = b;
      } else if (runStart >= 0) {
        this.emitStored(r, runStart, b - runStart);
        runStart = -1;
      }
    }
    if (runStart >= 0) this.emitStored(r, runStart, full - runStart);
  }

  /** Hash block b of r, which contains generated tokens (prompt tail tokens, then outputs). */
  private hashGeneratedBlock(r: Req, b: number): void {
    const bs = this.blockSize;
    const toks = new Uint32Array(bs);
    const tailStart = r.isl - r.prompt.tail.length;
    for (let j = 0; j < bs; j++) {
      const p = b * bs + j;
      if (p < r.isl) toks[j] = r.prompt.tail[p - tailStart]!;
      else {
        const o = p - r.isl;
        toks[j] = r.outputTokens && o < r.outputTokens.length ? r.outputTokens[o]! : synthToken(r.outSeed, o);
      }
    }
    const local = localBlockHash(toks);
    const seq = b === 0 ? local : nextSequenceHash(bigOf(r.seqW, b - 1), local);
    if (2 * (b + 1) > r.seqW.length) {
      r.seqW = grow(r.seqW, b + 1);
      r.localW = grow(r.localW, b + 1);
    }
    r.seqW[2 * b] = Number(seq & 0xffff_ffffn);
    r.seqW[2 * b + 1] = Number(seq >> 32n);
    r.localW[2 * b] = Number(local & 0xffff_ffffn);
    r.localW[2 * b + 1] = Number(local >> 32n);
    r.nKnown = b + 1;
  }

  /** Release every block r holds, tail first, so its tail is evicted before its prefix. */
  private releaseAll(r: Req): void {
    if (r.privateHeld > 0) this.pool.freePrivate(r.privateHeld);
    r.privateHeld = 0;
    for (let b = r.held.length - 1; b >= 0; b--) this.pool.release(r.held[b]!);
    r.held.length = 0;
  }

  private preempt(r: Req): void {
    const i = this.running.lastIndexOf(r);
    if (i >= 0) this.running.splice(i, 1);
    this.releaseAll(r);
    r.computed = 0;
    r.passTokens = 0;
    r.passPrefill = 0;
    r.preemptions++;
    if (this.waitingHead > 0) this.waiting[--this.waitingHead] = r;
    else this.waiting.unshift(r);
  }

  /** Announce blocks [start, start + n) of r as stored, under block start - 1. */
  private emitStored(r: Req, start: number, n: number): void {
    this.flushEvictions();
    this.push({
      kind: 'stored',
      parentHash: start > 0 ? (bigOf(r.seqW, start - 1) as ExternalHash) : null,
      startPosition: start,
      blockHashes: hashesOf(r.seqW, start, n),
      tokensHashes: hashesOf(r.localW, start, n),
    });
  }

  private flushEvictions(): void {
    if (this.pool.evicted.length === 0) return;
    const ev = this.pool.evicted;
    const hashes = new BigUint64Array(ev.length / 2);
    wordsOf(hashes).set(ev);
    ev.length = 0;
    this.push({ kind: 'removed', blockHashes: hashes });
  }

  private push(data: KvEvent['data']): void {
    this.events.push({ workerId: this.workerId, dpRank: 0, storageTier: 'device', eventId: this.nextEventId, data });
    this.nextEventId++;
  }

  // ---------------------------------------------------------------- reports

  load(): EngineLoad {
    let prefill = 0;
    for (const r of this.running) if (r.computed < r.isl) prefill += r.isl - r.computed;
    for (let i = this.waitingHead; i < this.waiting.length; i++) {
      const r = this.waiting[i]!;
      prefill += r.isl - Math.min(r.isl, r.preemptions > 0 ? 0 : r.hitAtArrival);
    }
    return {
      activeDecodeBlocks: this.pool.active,
      activePrefillTokens: prefill,
      kvUsedBlocks: this.pool.used,
      waiting: this.waiting.length - this.waitingHead,
      running: this.running.length,
    };
  }

  get cachedBlocks(): number {
    return this.pool.cachedBlocks;
  }

  /**
   * Output tokens the requests on the engine have still to generate: the remaining generation work
   * that booked request counts and prefill pressure do not show (a pass in flight counts as done).
   */
  get remainingOutputTokens(): number {
    let n = 0;
    for (const r of this.requests.values()) n += r.osl - r.generated;
    return n;
  }
}
