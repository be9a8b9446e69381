/**
 * The observe reply in its compact binary encoding (`replyEncoding: "binary"` in the request; why
 * and how it is read: package README, "Observe reply encodings"). Layout (little-endian; documented
 * in schemas/protocol/README.md):
 *
 *   header, 80 bytes
 *     0  u32  magic 0x01524F56 ("VOR" 0x01)       4  u32  n, worker records
 *     8  u32  blockSize                            12 u32  flags: 1 pending, 2 dynamoChoice, 4 snapshotRestoredAtMs
 *     16 f64  queryDurationUs                      24 f64  atMs
 *     32 f64  pending.requests                     40 f64  pending.tokens
 *     48 f64  snapshotRestoredAtMs                 56 u64  dynamoChoice.workerId
 *     64 u32  dynamoChoice.dpRank                  68 u32  m, bytes of the trailing JSON
 *     72 f64  dynamoChoice.cost
 *   n worker records, 192 bytes each
 *     0  u64  workerId    8 u32 dpRank    12 u32 flags: 1 schedulable, 2 reported, 4 suspect; bits 16–31 suspect reason index
 *     16 f64 × 22, in WORKER_FIELDS order; NaN where the JSON has null
 *   m bytes of UTF-8 JSON: {"pool": string, "policy": {"name", "params"} | null, "reasons": [string]}
 */
import type { ObserveReply, SelectionPolicy } from './messages';
import { MAX_WORKERS } from './schemas';

const OBSERVE_REPLY_BINARY_MAGIC = 0x01524f56;
const OBSERVE_REPLY_HEADER_BYTES = 80;
const OBSERVE_REPLY_RECORD_BYTES = 192;

/** The f64 slots of a worker record, in order. */
const WORKER_FIELDS = [
  'deviceOverlapBlocks',
  'K',
  'hostOverlapBlocks',
  'diskOverlapBlocks',
  'anyTierOverlapBlocks',
  'R',
  'trackedPrefillTokens',
  'P',
  'maxNumBatchedTokens',
  'effectivePrefillTokens',
  'newBlocks',
  'activeBlocks',
  'totalKvBlocks',
  'treeBlocks',
  'reportedActiveDecodeBlocks',
  'reportedActivePrefillTokens',
  'reportedKvUsedBlocks',
  'suspectSinceMs',
  'indexAgeMs',
  'loadAgeMs',
  'bookingAgeMs',
  'dynamoCost',
] as const;
type WorkerField = (typeof WORKER_FIELDS)[number];
/** Slot offset of each field from a record's first f64. */
const F = Object.freeze(Object.fromEntries(WORKER_FIELDS.map((k, i) => [k, i])) as Record<WorkerField, number>);

const FLAG_SCHEDULABLE = 1;
const FLAG_REPORTED = 2;
const FLAG_SUSPECT = 4;
const HEAD_PENDING = 1;
const HEAD_CHOICE = 2;
const HEAD_RESTORED = 4;

/** A nullable number as written: null (and any non-finite value, which JSON cannot carry either) is NaN. */
const nullable = (v: number | null | undefined): number => (v === null || v === undefined || !Number.isFinite(v) ? NaN : v);

/** Room kept after the records for the trailing JSON before the scratch must grow. */
const META_ROOM = 2048;

// One scratch buffer for every reply (package README): each reply is assembled in it and copied out
// into a buffer of the caller's own before the next begins, so nothing carries over between replies.
let scratch = Buffer.alloc(0);
let f64 = new Float64Array(0);
let u32 = new Uint32Array(0);
let u64 = new BigUint64Array(0);
/** The suspect reasons of the reply being written, indexed by the records' flags. */
const reasons: string[] = [];
const reasonIndex = new Map<string, number>();

/** Grow the scratch (keeping its bytes) to at least `need` bytes. */
function reserve(need: number): void {
  if (need <= scratch.length) return;
  const buf = new ArrayBuffer(Math.max(need, 2 * scratch.length, 64 * 1024));
  const bytes = Buffer.from(buf);
  scratch.copy(bytes);
  f64 = new Float64Array(buf);
  u32 = new Uint32Array(buf);
  u64 = new BigUint64Array(buf);
  scratch = bytes;
}

/**
 * UTF-8 JSON texts of the trailing JSON's parts, by what they are of (pool and policy names, param
 * keys, reasons: a handful of distinct strings), each kept while its table holds fewer than
 * TEXT_CACHE_MAX.
 */
const TEXT_CACHE_MAX = 1024;
const quoted = (s: string): string => JSON.stringify(s);
interface Part {
  readonly table: Map<string, Uint8Array>;
  readonly text: (s: string) => string;
  /** The last string asked for and its bytes (replies mostly repeat the last one's parts). */
  last: string | null;
  lastBytes: Uint8Array;
}

const newPart = (text: (s: string) => string): Part => ({ table: new Map(), text, last: null, lastBytes: new Uint8Array(0) });
const PARTS = {
  pool: newPart((s) => '{"pool":' + quoted(s) + ',"policy":'),
  policy: newPart((s) => '{"name":' + quoted(s) + ',"params":{'),
  firstKey: newPart((s) => quoted(s) + ':'),
  key: newPart((s) => ',' + quoted(s) + ':'),
  firstReason: newPart((s) => ',"reasons":[' + quoted(s)),
  reason: newPart((s) => ',' + quoted(s)),
};
const FIXED = {
  noPolicy: Buffer.from('null'),
  endPolicy: Buffer.from('}}'),
  noReasons: Buffer.from(',"reasons":[]}'),
  endReasons: Buffer.from(']}'),
};

function part(p: Part, s: string): Uint8Array {
  if (s === p.last) return p.lastBytes;
  let b = p.table.get(s);
  if (b === undefined) {
    b = Buffer.from(p.text(s), 'utf8');
    if (p.table.size < TEXT_CACHE_MAX) p.table.set(s, b);
  }
  p.last = s;
  p.lastBytes = b;
  return b;
}

/** Longest text a number takes in JSON (e.g. -1.2345678901234567e-300), with room to spare. */
const NUMBER_ROOM = 32;

/**
 * The UTF-8 bytes of `JSON.stringify({ pool, policy, reasons })`, written straight into `out` from
 * `at` (ending before `end`) without building the string (package README, "Observe reply
 * encodings"). Returns the bytes written, or -1 when they would not fit.
 */
export function writeMetaJson(
  out: Uint8Array,
  at: number,
  end: number,
  pool: string,
  policy: SelectionPolicy | null,
  reasons: readonly string[],
): number {
  let o = put(out, at, end, part(PARTS.pool, pool));
  if (policy === null) o = put(out, o, end, FIXED.noPolicy);
  else {
    o = put(out, o, end, part(PARTS.policy, policy.name));
    const params = policy.params;
    let first = true;
    // for..in visits own keys in Object.keys order (the order JSON.stringify writes them).
    for (const k in params) {
      if (!Object.prototype.hasOwnProperty.call(params, k)) continue;
      o = put(out, o, end, part(first ? PARTS.firstKey : PARTS.key, k));
      first = false;
      if (o < 0 || o + NUMBER_ROOM > end) return -1;
      o = writeJsonNumber(out, o, params[k]!);
    }
    o = put(out, o, end, FIXED.endPolicy);
  }
  if (reasons.length === 0) o = put(out, o, end, FIXED.noReasons);
  else {
    for (let i = 0; i < reasons.length; i++) o = put(out, o, end, part(i === 0 ? PARTS.firstReason : PARTS.reason, reasons[i]!));
    o = put(out, o, end, FIXED.endReasons);
  }
  return o < 0 ? -1 : o - at;
}

/** `b` copied into `out` at `o` (before `end`); the end, or -1 (also when `o` is -1 already). */
function put(out: Uint8Array, o: number, end: number, b: Uint8Array): number {
  const n = b.length;
  if (o < 0 || o + n > end) return -1;
  for (let i = 0; i < n; i++) out[o + i] = b[i]!; // a few bytes: cheaper than TypedArray#set
  return o + n;
}

/** A number as JSON.stringify writes it (non-finite: null), at `o` in `out` (room for NUMBER_ROOM bytes); returns the end. */
function writeJsonNumber(out: Uint8Array, o: number, v: number): number {
  if (Number.isSafeInteger(v)) {
    if (v === 0) {
      out[o] = 0x30; // -0 too
      return o + 1;
    }
    if (v < 0) {
      out[o++] = 0x2d;
      v = -v;
    }
    let digits = 1;
    for (let p = 10; p <= v; p *= 10) digits++;
    writeDigits(out, o + digits, v, digits);
    return o + digits;
  }
  if (Number.isFinite(v)) {
    const end = writeDyadic(out, o, v);
    if (end >= 0) return end;
  }
  const s = Number.isFinite(v) ? String(v) : 'null';
  for (let i = 0; i < s.length; i++) out[o + i] = s.charCodeAt(i);
  return o + s.length;
}

/** Fraction digits a dyadic value may have for `writeDyadic` (a multiple of 2^-10). */
const DYADIC_BITS = 10;
const DYADIC_SCALE = 2 ** DYADIC_BITS;
/** 10^10 / 2^10: a fraction f / 2^10 is f * 5^10 / 10^10. */
const FIVE_POW = 5 ** DYADIC_BITS;

/**
 * A non-integer that is a multiple of 2^-10 (what Dynamo's cost terms are: token counts over a
 * power-of-two block size, overlaps weighted by quarters), written as its exact decimal expansion,
 * which is what JSON.stringify writes whenever it has at most 15 significant digits (two decimals
 * of 15 digits or fewer are never the same double, so no shorter one reads back as this value).
 * Returns the end, or -1 (nothing written) for any other value. V8's shortest-digits formatting
 * is the slow part of the trailing JSON after idling; tested against String(v).
 */
function writeDyadic(out: Uint8Array, o: number, v: number): number {
  const neg = v < 0;
  const a = neg ? -v : v;
  if (!(a < 2 ** 40)) return -1;
  const int = Math.floor(a);
  const scaled = (a - int) * DYADIC_SCALE; // exact: a - int is, and so is a power-of-two scale
  if (!Number.isInteger(scaled) || scaled === 0) return -1;
  // The fraction's 10 decimal digits, trailing zeros dropped.
  let frac = scaled * FIVE_POW;
  let fd = DYADIC_BITS;
  for (let q = Math.floor(frac / 10); frac - q * 10 === 0; q = Math.floor(frac / 10)) {
    frac = q;
    fd--;
  }
  let id = 0;
  for (let p = 1; p <= int; p *= 10) id++;
  // Significant digits: the integer part's, then the fraction's (past its leading zeros when int is 0).
  let lead = 0;
  if (id === 0) for (let p = 10 ** (fd - 1); frac < p; p /= 10) lead++;
  if (id + fd - lead > 15) return -1;
  if (neg) out[o++] = 0x2d;
  if (id === 0) out[o++] = 0x30;
  else {
    writeDigits(out, o + id, int, id);
    o += id;
  }
  out[o++] = 0x2e;
  writeDigits(out, o + fd, frac, fd);
  return o + fd;
}

/**
 * The last `n` decimal digits of the integer x (0 <= x < 2^53) ending before `end`, leading zeros
 * included. Digits by floor division, not `%`: on a double above 2^31 that is a call into C, and
 * `Math.floor(x / 10)` is exact here (x / 10 lies at least 0.1 from the next integer, more than its
 * rounding error below 2^53).
 */
function writeDigits(out: Uint8Array, end: number, x: number, n: number): void {
  for (let i = end - 1; i >= end - n; i--) {
    const q = Math.floor(x / 10);
    out[i] = 0x30 + (x - q * 10);
    x = q;
  }
}

/** The binary encoding of an observe reply (what `observeReplyCodec.decode` reads back to the same value). */
export function encodeObserveReplyBinary(r: ObserveReply): Uint8Array {
  const n = r.workers.length;
  const body = OBSERVE_REPLY_HEADER_BYTES + n * OBSERVE_REPLY_RECORD_BYTES;
  reserve(body + META_ROOM);
  if (reasons.length > 0) {
    reasons.length = 0;
    reasonIndex.clear();
  }
  const f = f64;
  const q = u64;
  const d = u32;
  for (let i = 0; i < n; i++) {
    const o = r.workers[i]!;
    const w = (OBSERVE_REPLY_HEADER_BYTES + i * OBSERVE_REPLY_RECORD_BYTES) / 8;
    let flags = (o.schedulable ? FLAG_SCHEDULABLE : 0) | (o.reported !== null ? FLAG_REPORTED : 0);
    if (o.suspect) {
      let k = reasonIndex.get(o.suspect.reason);
      if (k === undefined) {
        k = reasons.length;
        reasons.push(o.suspect.reason);
        reasonIndex.set(o.suspect.reason, k);
      }
      flags |= FLAG_SUSPECT | (k << 16);
    }
    q[w] = o.workerId;
    d[2 * w + 2] = o.dpRank;
    d[2 * w + 3] = flags >>> 0;
    const b = w + 2; // every value slot is written, NaN for null
    f[b + F.deviceOverlapBlocks] = o.deviceOverlapBlocks;
    f[b + F.K] = o.K;
    f[b + F.hostOverlapBlocks] = nullable(o.hostOverlapBlocks);
    f[b + F.diskOverlapBlocks] = nullable(o.diskOverlapBlocks);
    f[b + F.anyTierOverlapBlocks] = nullable(o.anyTierOverlapBlocks);
    f[b + F.R] = o.R;
    f[b + F.trackedPrefillTokens] = o.trackedPrefillTokens;
    f[b + F.P] = nullable(o.P);
    f[b + F.maxNumBatchedTokens] = nullable(o.maxNumBatchedTokens);
    f[b + F.effectivePrefillTokens] = o.effectivePrefillTokens;
    f[b + F.newBlocks] = o.newBlocks;
    f[b + F.activeBlocks] = o.activeBlocks;
    f[b + F.totalKvBlocks] = nullable(o.totalKvBlocks);
    f[b + F.treeBlocks] = o.treeBlocks;
    f[b + F.reportedActiveDecodeBlocks] = nullable(o.reported?.activeDecodeBlocks);
    f[b + F.reportedActivePrefillTokens] = nullable(o.reported?.activePrefillTokens);
    f[b + F.reportedKvUsedBlocks] = nullable(o.reported?.kvUsedBlocks);
    f[b + F.suspectSinceMs] = o.suspect ? o.suspect.sinceMs : NaN;
    f[b + F.indexAgeMs] = nullable(o.ages.indexMs);
    f[b + F.loadAgeMs] = nullable(o.ages.loadMs);
    f[b + F.bookingAgeMs] = nullable(o.ages.bookingMs);
    f[b + F.dynamoCost] = nullable(o.dynamoCost);
  }
  const c = r.dynamoChoice;
  // Written in place; it nearly always fits in the META_ROOM bytes reserved for it, else the scratch grows.
  let metaLen: number;
  while ((metaLen = writeMetaJson(scratch, body, scratch.length, r.pool, c ? c.policy : null, reasons)) < 0) reserve(2 * scratch.length);
  u32[0] = OBSERVE_REPLY_BINARY_MAGIC;
  u32[1] = n;
  u32[2] = r.blockSize;
  u32[3] = (r.pending ? HEAD_PENDING : 0) | (c ? HEAD_CHOICE : 0) | (r.snapshotRestoredAtMs !== null ? HEAD_RESTORED : 0);
  f64[2] = r.queryDurationUs;
  f64[3] = r.atMs;
  f64[4] = r.pending ? r.pending.requests : NaN;
  f64[5] = r.pending ? r.pending.tokens : NaN;
  f64[6] = nullable(r.snapshotRestoredAtMs);
  u64[7] = c ? c.workerId : 0n;
  u32[16] = c ? c.dpRank : 0;
  u32[17] = metaLen;
  f64[9] = c ? c.cost : NaN;
  // The caller's own copy. allocUnsafe: every byte is overwritten here.
  const len = body + metaLen;
  const out = Buffer.allocUnsafe(len);
  scratch.copy(out, 0, 0, len);
  return out;
}

/** True when the bytes start with the binary observe reply's magic (JSON never starts with 'V'). */
export function isObserveReplyBinary(data: Uint8Array): boolean {
  return data.byteLength >= 4 && data[0] === 0x56 && data[1] === 0x4f && data[2] === 0x52 && data[3] === 0x01;
}

type BinaryToWire = { ok: true; wire: Record<string, unknown> } | { ok: false; reason: string };

/** The protocol's one strict UTF-8 decoder (it throws on malformed bytes). */
export const utf8 = new TextDecoder('utf-8', { fatal: true });
const orNull = (v: number): number | null => (Number.isFinite(v) ? v : null);

/**
 * The JSON reply's wire object from binary bytes, for the schema validation and conversion every
 * JSON reply gets. Only framing is checked here (lengths, magic, the trailing JSON, reason indices).
 */
export function observeReplyBinaryToWire(data: Uint8Array): BinaryToWire {
  const H = OBSERVE_REPLY_HEADER_BYTES;
  const R = OBSERVE_REPLY_RECORD_BYTES;
  if (data.byteLength < H || !isObserveReplyBinary(data)) return { ok: false, reason: `not a binary observe reply (${data.byteLength} bytes)` };
  // Typed-array views need 8-byte alignment; message buffers often are not. (A copy, not
  // `data.slice()`: on a Node Buffer that is a view of the same bytes.)
  const bytes = data.byteOffset % 8 === 0 ? data : new Uint8Array(data);
  const u32 = new Uint32Array(bytes.buffer, bytes.byteOffset, H / 4);
  const n = u32[1]!;
  const metaLen = u32[17]!;
  if (n > MAX_WORKERS) return { ok: false, reason: `${n} worker records exceed ${MAX_WORKERS}` };
  const body = H + n * R;
  if (bytes.byteLength !== body + metaLen) return { ok: false, reason: `length ${bytes.byteLength} bytes, layout says ${body + metaLen}` };
  let meta: { pool?: unknown; policy?: unknown; reasons?: unknown };
  try {
    meta = JSON.parse(utf8.decode(bytes.subarray(body))) as typeof meta;
  } catch (e) {
    return { ok: false, reason: `trailing JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (typeof meta !== 'object' || meta === null || !Array.isArray(meta.reasons)) return { ok: false, reason: 'trailing JSON: not {pool, policy, reasons}' };
  const reasons = meta.reasons as unknown[];
  const f64 = new Float64Array(bytes.buffer, bytes.byteOffset, body / 8);
  const u64 = new BigUint64Array(bytes.buffer, bytes.byteOffset, body / 8);
  const rec = new Uint32Array(bytes.buffer, bytes.byteOffset, body / 4);
  const flags = u32[3]!;
  const workers: Record<string, unknown>[] = new Array<Record<string, unknown>>(n);
  for (let i = 0; i < n; i++) {
    const w = (H + i * R) / 8;
    const fl = rec[2 * w + 3]!;
    const b = w + 2;
    let suspect: { reason: unknown; sinceMs: number | null } | null = null;
    if (fl & FLAG_SUSPECT) {
      const k = fl >>> 16;
      if (k >= reasons.length) return { ok: false, reason: `/workers/${i}: suspect reason ${k} of ${reasons.length}` };
      suspect = { reason: reasons[k], sinceMs: orNull(f64[b + F.suspectSinceMs]!) };
    }
    workers[i] = {
      workerId: u64[w]!.toString(),
      dpRank: rec[2 * w + 2]!,
      schedulable: (fl & FLAG_SCHEDULABLE) !== 0,
      deviceOverlapBlocks: orNull(f64[b + F.deviceOverlapBlocks]!),
      K: orNull(f64[b + F.K]!),
      hostOverlapBlocks: orNull(f64[b + F.hostOverlapBlocks]!),
      diskOverlapBlocks: orNull(f64[b + F.diskOverlapBlocks]!),
      anyTierOverlapBlocks: orNull(f64[b + F.anyTierOverlapBlocks]!),
      R: orNull(f64[b + F.R]!),
      trackedPrefillTokens: orNull(f64[b + F.trackedPrefillTokens]!),
      P: orNull(f64[b + F.P]!),
      maxNumBatchedTokens: orNull(f64[b + F.maxNumBatchedTokens]!),
      effectivePrefillTokens: orNull(f64[b + F.effectivePrefillTokens]!),
      newBlocks: orNull(f64[b + F.newBlocks]!),
      activeBlocks: orNull(f64[b + F.activeBlocks]!),
      totalKvBlocks: orNull(f64[b + F.totalKvBlocks]!),
      treeBlocks: orNull(f64[b + F.treeBlocks]!),
      reported:
        fl & FLAG_REPORTED
          ? { activeDecodeBlocks: orNull(f64[b + F.reportedActiveDecodeBlocks]!), activePrefillTokens: orNull(f64[b + F.reportedActivePrefillTokens]!), kvUsedBlocks: orNull(f64[b + F.reportedKvUsedBlocks]!) }
          : null,
      suspect,
      ages: { indexMs: orNull(f64[b + F.indexAgeMs]!), loadMs: orNull(f64[b + F.loadAgeMs]!), bookingMs: orNull(f64[b + F.bookingAgeMs]!) },
      dynamoCost: orNull(f64[b + F.dynamoCost]!),
    };
  }
  const wire: Record<string, unknown> = {
    v: 1,
    pool: meta.pool,
    blockSize: u32[2],
    queryDurationUs: orNull(f64[2]!),
    atMs: orNull(f64[3]!),
    workers,
    pending: flags & HEAD_PENDING ? { requests: orNull(f64[4]!), tokens: orNull(f64[5]!) } : null,
    dynamoChoice: flags & HEAD_CHOICE ? { workerId: u64[7]!.toString(), dpRank: u32[16], cost: orNull(f64[9]!), policy: meta.policy } : null,
  };
  if (flags & HEAD_RESTORED) wire.snapshotRestoredAtMs = orNull(f64[6]!);
  return { ok: true, wire };
}
