/**
 * Mooncake JSONL traces (FAST'25 release) and the two ways of replaying them:
 * open loop (arrivals at the recorded timestamps, optionally sped up) and
 * closed loop (a fixed number in flight, the next request starting when one
 * completes).
 *
 * Line shape: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [u32 ...]}
 * with len(hash_ids) == ceil(input_length / 512). Extra fields (session_id,
 * delay) are tolerated and ignored.
 */
import { readFileSync } from 'node:fs';
import { MOONCAKE_CHUNK_TOKENS } from './prompt';

export interface MooncakeRecord {
  /** Line number in the file, from 1. */
  readonly line: number;
  readonly timestampMs: number;
  readonly inputLength: number;
  readonly outputLength: number;
  readonly hashIds: Uint32Array;
}

export type TraceParse =
  | { ok: true; records: MooncakeRecord[] }
  | { ok: false; code: 'bad_trace_line'; line: number; reason: string };

function isNonNegInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Validate one parsed line; a reason string when it is not a usable record. */
function checkLine(o: unknown): string | MooncakeRecord {
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return 'not a JSON object';
  const r = o as Record<string, unknown>;
  const { timestamp, input_length: isl, output_length: osl, hash_ids: ids } = r;
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp) || timestamp < 0) return 'timestamp must be a finite number >= 0';
  if (!isNonNegInt(isl) || isl === 0) return 'input_length must be a positive integer';
  if (!isNonNegInt(osl)) return 'output_length must be a non-negative integer';
  if (!Array.isArray(ids)) return 'hash_ids must be an array';
  const want = Math.ceil(isl / MOONCAKE_CHUNK_TOKENS);
  if (ids.length !== want) return `hash_ids has ${ids.length} entries, input_length ${isl} needs ${want}`;
  const hashIds = new Uint32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const v: unknown = ids[i];
    if (!isNonNegInt(v) || v > 0xffff_ffff) return `hash_ids[${i}] must be an integer in [0, 2^32)`;
    hashIds[i] = v;
  }
  return { line: 0, timestampMs: timestamp, inputLength: isl, outputLength: osl, hashIds };
}

/** Parse a whole trace; the first bad line rejects it with its line number. Blank lines are skipped. */
export function parseMooncakeTrace(text: string): TraceParse {
  const records: MooncakeRecord[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const s = lines[i]!.trim();
    if (s === '') continue;
    let o: unknown;
    try {
      o = JSON.parse(s);
    } catch (e) {
      return { ok: false, code: 'bad_trace_line', line: i + 1, reason: `invalid JSON: ${(e as Error).message}` };
    }
    const r = checkLine(o);
    if (typeof r === 'string') return { ok: false, code: 'bad_trace_line', line: i + 1, reason: r };
    records.push({ ...r, line: i + 1 });
  }
  return { ok: true, records };
}

/** Read and parse a trace file; throws an Error naming the file and line on a bad line. */
export function loadMooncakeTrace(path: string): MooncakeRecord[] {
  const parsed = parseMooncakeTrace(readFileSync(path, 'utf8'));
  if (!parsed.ok) throw new Error(`${path}:${parsed.line}: ${parsed.reason}`);
  return parsed.records;
}

export interface Arrival {
  /** Index into the records array. */
  readonly index: number;
  readonly arrivalMs: number;
}

/**
 * Open-loop arrivals: each record at timestamp / speedup, relative to the
 * first record (so a trace starting late still starts at 0), in time order
 * (stable for equal timestamps).
 */
export function openLoopArrivals(records: readonly MooncakeRecord[], opts: { speedup?: number; startMs?: number } = {}): Arrival[] {
  const speedup = opts.speedup ?? 1;
  if (!(speedup > 0) || !Number.isFinite(speedup)) throw new RangeError(`speedup must be positive, got ${speedup}`);
  const start = opts.startMs ?? 0;
  let t0 = Infinity;
  for (const r of records) t0 = Math.min(t0, r.timestampMs);
  const out = records.map((r, index) => ({ index, arrivalMs: start + (r.timestampMs - t0) / speedup }));
  return out.sort((a, b) => a.arrivalMs - b.arrivalMs || a.index - b.index);
}

/**
 * Closed loop with `concurrency` requests in flight: `start` issues the first
 * batch, and every `complete` issues the next record in trace order (if any)
 * at the completion time. Timestamps in the trace are ignored.
 */
export class ClosedLoop {
  private nextIndex = 0;
  private inFlight = 0;

  constructor(
    readonly total: number,
    readonly concurrency: number,
  ) {
    if (!Number.isInteger(concurrency) || concurrency <= 0) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    if (!Number.isInteger(total) || total < 0) throw new RangeError(`total must be a non-negative integer, got ${total}`);
  }

  /** The first min(concurrency, total) arrivals, all at `nowMs`. */
  start(nowMs: number): Arrival[] {
    const out: Arrival[] = [];
    while (this.inFlight < this.concurrency && this.nextIndex < this.total) {
      out.push({ index: this.nextIndex++, arrivalMs: nowMs });
      this.inFlight++;
    }
    return out;
  }

  /** One request completed at `nowMs`: the arrival that replaces it, if any remain. */
  complete(nowMs: number): Arrival | undefined {
    if (this.inFlight <= 0) throw new Error('complete() without a request in flight');
    this.inFlight--;
    if (this.nextIndex >= this.total) return undefined;
    this.inFlight++;
    return { index: this.nextIndex++, arrivalMs: nowMs };
  }

  get done(): boolean {
    return this.inFlight === 0 && this.nextIndex >= this.total;
  }
}
