/**
 * The progress log (README, rule 3): every committed transaction appends, in
 * the same transaction, one record to the single-partition progress topic.
 * Its value (UTF-8 JSON):
 *
 *   {"v":1, "writer":"<transactionalId>", "nonce":"<unique per transaction>",
 *    "atMs":<commit attempt time>,
 *    "done":      {"<stream>": [[lo,hi],...]},   messages fully written (acked after commit)
 *    "decisions": {"<stream>": [[lo,hi],...]}}   decision messages copied to the decisions topic
 *                                                 while their join is still open
 *
 * A record with empty sets is a *sentinel* (rule 4). `CommittedSet` keeps the
 * recent part of the log in memory as range lists per transaction, so memory
 * is proportional to transactions, not messages.
 */
import { inRanges, mergeRanges, toRanges, type Range } from './ranges';

export interface ProgressRecord {
  v: 1;
  writer: string;
  nonce: string;
  atMs: number;
  done: Record<string, Range[]>;
  decisions: Record<string, Range[]>;
}

export function progressRecord(
  writer: string,
  nonce: string,
  atMs: number,
  done: ReadonlyMap<string, number[]>,
  decisions: ReadonlyMap<string, number[]>,
): ProgressRecord {
  const enc = (m: ReadonlyMap<string, number[]>): Record<string, Range[]> => {
    const o: Record<string, Range[]> = {};
    for (const [k, v] of m) if (v.length > 0) o[k] = toRanges(v);
    return o;
  };
  return { v: 1, writer, nonce, atMs, done: enc(done), decisions: enc(decisions) };
}

function rangesOk(v: unknown): v is Record<string, Range[]> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  return Object.values(v).every(
    (rs) => Array.isArray(rs) && rs.every((r) => Array.isArray(r) && r.length === 2 && Number.isSafeInteger(r[0]) && Number.isSafeInteger(r[1]) && (r[0] as number) <= (r[1] as number)),
  );
}

/**
 * A progress value as the follower takes it: only records written under this service's own
 * transactional id count (rule 3 in the README); anything else on the topic (another writer, a
 * malformed value) is refused with a reason, never applied: a forged record could otherwise make a
 * redelivered message look already written, and it would be lost.
 */
export function acceptProgress(bytes: Buffer | null, writer: string): { ok: true; rec: ProgressRecord } | { ok: false; code: 'malformed' | 'foreign_writer'; reason: string } {
  const rec = parseProgress(bytes);
  if (rec === null) return { ok: false, code: 'malformed', reason: 'not a v1 progress record' };
  if (rec.writer !== writer) return { ok: false, code: 'foreign_writer', reason: `written by ${JSON.stringify(rec.writer.slice(0, 128))}, not ${JSON.stringify(writer)}` };
  return { ok: true, rec };
}

/** Parses a progress value; null for anything else (foreign writers are ignored, not fatal). */
export function parseProgress(bytes: Buffer | null): ProgressRecord | null {
  if (bytes === null) return null;
  try {
    const o = JSON.parse(bytes.toString('utf8')) as Partial<ProgressRecord>;
    if (o.v !== 1 || typeof o.writer !== 'string' || typeof o.nonce !== 'string' || typeof o.atMs !== 'number') return null;
    if (!rangesOk(o.done) || !rangesOk(o.decisions)) return null;
    return o as ProgressRecord;
  } catch {
    return null;
  }
}

interface Entry {
  /** Local time the entry was learnt (own commit, or read from the log). */
  seenAtMs: number;
  rec: ProgressRecord;
}

type SeenAs = 'done' | 'decision' | undefined;

/**
 * Recent committed transactions. Pruning rule: an entry is dropped once the
 * service has been connected to NATS for `retainMs` after learning it. The
 * acks for its messages were sent right after the commit; a message whose
 * ack was lost is redelivered within ack_wait of the server having it back,
 * so `retainMs` = 2 x ack_wait covers lost acks, including acks lost in a
 * NATS outage (the clock restarts at each reconnect).
 */
export class CommittedSet {
  private readonly entries: Entry[] = [];
  private head = 0;
  private readonly nonces = new Set<string>();
  private lastReconnectMs = 0;

  constructor(private readonly retainMs: number) {}

  get size(): number {
    return this.entries.length - this.head;
  }

  /** Adds a committed transaction (idempotent by nonce: our own records come back through the follower). */
  add(rec: ProgressRecord, nowMs: number): void {
    if (this.nonces.has(rec.nonce)) return;
    if (Object.keys(rec.done).length === 0 && Object.keys(rec.decisions).length === 0) return;
    this.nonces.add(rec.nonce);
    this.entries.push({ seenAtMs: nowMs, rec });
    this.cached = null;
  }

  noteReconnect(nowMs: number): void {
    this.lastReconnectMs = nowMs;
  }

  has(nonce: string): boolean {
    return this.nonces.has(nonce);
  }

  /**
   * Whether a source message is already in Kafka: `done` (fully written) beats
   * `decision` (copied to the decisions topic, join still open). Lookups go
   * through merged per-stream ranges, rebuilt lazily after a change, because
   * after a restart every message of a batch may need a lookup.
   */
  lookup(stream: string, seq: number): SeenAs {
    const idx = this.index().get(stream);
    if (idx === undefined) return undefined;
    if (inRanges(idx.done, seq)) return 'done';
    if (inRanges(idx.decisions, seq)) return 'decision';
    return undefined;
  }

  private cached: Map<string, { done: Range[]; decisions: Range[] }> | null = null;

  private index(): Map<string, { done: Range[]; decisions: Range[] }> {
    if (this.cached !== null) return this.cached;
    const raw = new Map<string, { done: Range[]; decisions: Range[] }>();
    for (let i = this.head; i < this.entries.length; i++) {
      const rec = (this.entries[i] as Entry).rec;
      for (const [kind, m] of [['done', rec.done], ['decisions', rec.decisions]] as const) {
        for (const [stream, rs] of Object.entries(m)) {
          let slot = raw.get(stream);
          if (slot === undefined) raw.set(stream, (slot = { done: [], decisions: [] }));
          for (const r of rs) slot[kind].push(r);
        }
      }
    }
    for (const slot of raw.values()) {
      slot.done = mergeRanges(slot.done);
      slot.decisions = mergeRanges(slot.decisions);
    }
    this.cached = raw;
    return raw;
  }

  prune(nowMs: number): void {
    while (this.head < this.entries.length) {
      const e = this.entries[this.head] as Entry;
      if (nowMs - Math.max(e.seenAtMs, this.lastReconnectMs) <= this.retainMs) break;
      this.nonces.delete(e.rec.nonce);
      this.head++;
      this.cached = null;
    }
    // Compact occasionally so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries.splice(0, this.head);
      this.head = 0;
    }
  }
}
