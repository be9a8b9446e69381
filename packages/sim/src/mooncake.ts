/**
 * Mooncake JSONL traces (FAST'25 release, and the multi-turn form NVIDIA Dynamo's replay reads)
 * and their open- and closed-loop arrivals.
 *
 * Line shape: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [u32 ...]}
 * with len(hash_ids) == ceil(input_length / 512), plus, in the multi-turn
 * form, "session_id": string and "delay": ms. Other fields are ignored. The
 * multi-turn rules (Dynamo 1.6.1's `lib/mocker/src/loadgen/trace.rs`) are the
 * README's "Multi-turn Mooncake traces".
 */
import { readFileSync } from 'node:fs';
import { MOONCAKE_CHUNK_TOKENS } from './prompt';

export interface MooncakeRecord {
  /** Line number in the file, from 1. */
  readonly line: number;
  /** The line's `timestamp`; null only on a later turn of a session that gives none. */
  readonly timestampMs: number | null;
  readonly inputLength: number;
  readonly outputLength: number;
  readonly hashIds: Uint32Array;
  /** `session_id` of the multi-turn form; absent: a single-turn request. */
  readonly sessionId?: string;
  /** 0-based turn within its session (0 for a single-turn request). */
  readonly turn?: number;
  /** Wait after the previous turn of the session completes, ms (resolved as above; 0 on a first turn). */
  readonly delayMs?: number;
}

type TraceParse =
  | { ok: true; records: MooncakeRecord[] }
  | { ok: false; code: 'bad_trace_line'; line: number; reason: string };

const isNonNegInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isFiniteNonNeg = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;

interface SessionCursor {
  turns: number;
  /** The last timestamp seen in the session (the first turn always has one). */
  lastTimestampMs: number;
}

/** One parsed line as a record placed in its session (Dynamo's rules, see the README); a reason string when it is not usable. */
function recordOf(o: unknown, line: number, open: Map<string, SessionCursor>): string | MooncakeRecord {
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return 'not a JSON object';
  const { timestamp, input_length: isl, output_length: osl, hash_ids: ids, session_id: sid, delay } = o as Record<string, unknown>;
  if (sid !== undefined && sid !== null && typeof sid !== 'string') return 'session_id must be a string';
  if (timestamp !== undefined && timestamp !== null && !isFiniteNonNeg(timestamp)) return 'timestamp must be a finite number >= 0';
  if (delay !== undefined && delay !== null && !isFiniteNonNeg(delay)) return 'delay must be a finite number >= 0 (ms after the previous turn of the session completes)';
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
  const timestampMs = isFiniteNonNeg(timestamp) ? timestamp : null;
  const lineDelayMs = isFiniteNonNeg(delay) ? delay : null;
  const base = { line, timestampMs, inputLength: isl, outputLength: osl, hashIds };
  if (typeof sid !== 'string') {
    if (timestampMs === null) return 'timestamp must be a finite number >= 0';
    if (lineDelayMs !== null && lineDelayMs !== 0) return 'delay is set on a line without session_id (a first turn)';
    return base;
  }
  const cur = open.get(sid);
  if (cur === undefined) {
    if (timestampMs === null) return `timestamp is required on the first turn of session ${JSON.stringify(sid)}`;
    if (lineDelayMs !== null && lineDelayMs !== 0) return `delay is set on the first turn of session ${JSON.stringify(sid)}`;
    open.set(sid, { turns: 1, lastTimestampMs: timestampMs });
    return { ...base, sessionId: sid, turn: 0, delayMs: 0 };
  }
  let delayMs: number;
  if (lineDelayMs !== null) delayMs = lineDelayMs;
  else if (timestampMs !== null) {
    delayMs = timestampMs - cur.lastTimestampMs;
    if (delayMs < 0) return `timestamp ${timestampMs} is earlier than the previous turn of session ${JSON.stringify(sid)} (${cur.lastTimestampMs}), so no delay can be inferred`;
  } else delayMs = 0;
  if (timestampMs !== null) cur.lastTimestampMs = timestampMs;
  return { ...base, sessionId: sid, turn: cur.turns++, delayMs };
}

/** Parse a whole trace; the first bad line rejects it with its line number. Blank lines are skipped. */
export function parseMooncakeTrace(text: string): TraceParse {
  const records: MooncakeRecord[] = [];
  const sessions = new Map<string, SessionCursor>();
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
    const r = recordOf(o, i + 1, sessions);
    if (typeof r === 'string') return { ok: false, code: 'bad_trace_line', line: i + 1, reason: r };
    records.push(r);
  }
  return { ok: true, records };
}

/** Read and parse a trace file; throws an Error naming the file and line on a bad line. */
export function loadMooncakeTrace(path: string): MooncakeRecord[] {
  const parsed = parseMooncakeTrace(readFileSync(path, 'utf8'));
  if (!parsed.ok) throw new Error(`${path}:${parsed.line}: ${parsed.reason}`);
  return parsed.records;
}

interface Arrival {
  /** Index into the records array. */
  readonly index: number;
  readonly arrivalMs: number;
}

/**
 * Open-loop arrivals of single-turn records (README "Workloads"), stable for equal timestamps. A
 * later turn of a session has no arrival of its own (its previous turn's completion releases it).
 */
export function openLoopArrivals(records: readonly MooncakeRecord[], opts: { speedup?: number } = {}): Arrival[] {
  const speedup = opts.speedup ?? 1;
  if (!(speedup > 0) || !Number.isFinite(speedup)) throw new RangeError(`speedup must be positive, got ${speedup}`);
  let t0 = Infinity;
  const ts: number[] = [];
  for (const r of records) {
    if ((r.turn ?? 0) > 0 || r.timestampMs === null) {
      throw new RangeError(`line ${r.line} is turn ${r.turn ?? '?'} of session ${JSON.stringify(r.sessionId)}: a multi-turn trace has no open-loop arrival per line (replay it with runReplay)`);
    }
    ts.push(r.timestampMs);
    t0 = Math.min(t0, r.timestampMs);
  }
  const out = ts.map((t, index) => ({ index, arrivalMs: (t - t0) / speedup }));
  return out.sort((a, b) => a.arrivalMs - b.arrivalMs || a.index - b.index);
}

/** One session of a trace: its records (indices into the records array) in turn order. */
interface TraceSession {
  /** `session_id`, or null for a single-turn request. */
  readonly id: string | null;
  /** The first turn's timestamp. */
  readonly startMs: number;
  /** Record indices, turn 0 first. */
  readonly turns: readonly number[];
}

/**
 * Group records into sessions in order of first appearance (Dynamo's order):
 * records sharing a `sessionId` in array order, every other record alone.
 * Throws a RangeError naming the line when a session's first record has no
 * timestamp (for example a slice that cut a session's first turns off).
 */
export function traceSessions(records: readonly MooncakeRecord[]): TraceSession[] {
  const out: { id: string | null; startMs: number; turns: number[] }[] = [];
  const byId = new Map<string, number>();
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    const k = r.sessionId === undefined ? undefined : byId.get(r.sessionId);
    if (k !== undefined) {
      out[k]!.turns.push(i);
      continue;
    }
    if (r.timestampMs === null) throw new RangeError(`line ${r.line} starts session ${JSON.stringify(r.sessionId)} but has no timestamp`);
    if (r.sessionId !== undefined) byId.set(r.sessionId, out.length);
    out.push({ id: r.sessionId ?? null, startMs: r.timestampMs, turns: [i] });
  }
  return out;
}

/**
 * Closed loop with `concurrency` items in flight: `start` issues the first
 * batch, every `complete` the next item in order (if any) at the completion
 * time. The replay's items are sessions (Dynamo's concurrency mode).
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
}
