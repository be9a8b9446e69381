import { isAscii } from 'node:buffer';
import Ajv, { type ValidateFunction } from 'ajv';
import { capacityOf, U64_MAX, type CodedResult, type WorkerId } from '@vantage/types';
import { MAX_LE64_CHARS, MAX_TOKENS, PROTOCOL_SCHEMAS, type ProtocolSchemaFile } from './schemas';
import { PROTOCOL_VERSION } from './subjects';
import { isObserveReplyBinary, observeReplyBinaryToWire, utf8 } from './observe-binary';
import { isObserveRequestBinary, observeRequestBinaryToWire } from './observe-request-binary';
import type {
  BookingEvent,
  CandidateObservation,
  ChosenWorkerFacts,
  LifecycleEvent,
  ObserveReply,
  ObserveRequest,
  PendingWork,
  PromptSpec,
  RouteCandidate,
  RouteReply,
  RouteRequest,
  WorkerObservation,
  WorkerRegistration,
} from './messages';

/**
 * Stable rejection codes (metric labels and NATS service error headers), each described in the
 * package README ("Codecs"). None is retryable: the same bytes will be rejected again.
 */
export type ProtocolErrorCode = 'payload_too_large' | 'malformed_json' | 'unsupported_version' | 'schema_violation' | 'u64_out_of_range' | 'malformed_binary';

export type DecodeResult<T> = CodedResult<T, ProtocolErrorCode>;

/** 8 MiB: above NATS's default 1 MiB max_payload, so the broker's limit binds first in practice. */
const DEFAULT_MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;

export interface MessageCodec<T> {
  /** The schema file (under schemas/protocol/) documenting this message. */
  readonly schemaFile: ProtocolSchemaFile;
  /** The JSON value of the message (u64s as decimal strings). */
  toWire(value: T): Record<string, unknown>;
  encode(value: T): Uint8Array;
  /** Validate and convert an already-parsed JSON value. Never throws. */
  fromWire(json: unknown): DecodeResult<T>;
  /** Parse, validate and convert bytes (or a string). Never throws. */
  decode(data: Uint8Array | string, maxBytes?: number): DecodeResult<T>;
}

// Compiled once at module load: validation on the hot path is a plain function call.
// allowUnionTypes: nullable fields are written `type: [T, "null"]`, the draft-07 idiom.
// strictRequired off: `oneOf: [{required: [a]}, {required: [b]}]` and if/then name properties declared one level up.
const ajv = new Ajv({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: false });

const utf8enc = new TextEncoder();

/** Thrown only inside conversion and caught by the codec: a pattern-valid decimal above 2^64-1. */
class U64RangeError extends Error {}

function u64(s: string, path: string): bigint {
  // The schema pattern already guarantees 1–20 decimal digits without sign or leading zeros.
  const v = BigInt(s);
  if (v > U64_MAX) throw new U64RangeError(`${path}: ${s} exceeds 2^64-1`);
  return v;
}

const str = (v: bigint): string => v.toString(10);

/**
 * Wire values reach the converters only after the compiled schema accepted
 * them, so their shape is known; `W` marks those schema-checked values.
 */
type W = any;

function makeCodec<T>(
  schemaFile: ProtocolSchemaFile,
  toWire: (value: T) => Record<string, unknown>,
  convert: (wire: W) => T,
): MessageCodec<T> {
  const validate: ValidateFunction = ajv.compile(PROTOCOL_SCHEMAS[schemaFile]);
  const fromWire = (json: unknown): DecodeResult<T> => {
    if (typeof json !== 'object' || json === null || Array.isArray(json)) {
      return { ok: false, code: 'schema_violation', reason: '/: must be an object' };
    }
    const v = (json as { v?: unknown }).v;
    if (v !== PROTOCOL_VERSION && v !== undefined) {
      return { ok: false, code: 'unsupported_version', reason: `v=${JSON.stringify(v)}; this decoder speaks v${PROTOCOL_VERSION}` };
    }
    if (!validate(json)) {
      const e = validate.errors?.[0];
      const where = e === undefined || e.instancePath === '' ? '/' : e.instancePath;
      const params = e?.params !== undefined && Object.keys(e.params).length > 0 ? ` ${JSON.stringify(e.params)}` : '';
      return { ok: false, code: 'schema_violation', reason: `${where}: ${e?.message ?? 'invalid'}${params}` };
    }
    try {
      return { ok: true, value: convert(json) };
    } catch (err) {
      if (err instanceof U64RangeError) return { ok: false, code: 'u64_out_of_range', reason: err.message };
      throw err;
    }
  };
  return {
    schemaFile,
    toWire,
    encode: (value) => utf8enc.encode(JSON.stringify(toWire(value))),
    fromWire,
    decode(data, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES) {
      const size = typeof data === 'string' ? data.length : data.byteLength;
      if (size > maxBytes) return { ok: false, code: 'payload_too_large', reason: `${size} bytes exceeds ${maxBytes}` };
      let json: unknown;
      try {
        json = JSON.parse(typeof data === 'string' ? data : utf8.decode(data));
      } catch (err) {
        return { ok: false, code: 'malformed_json', reason: err instanceof Error ? err.message : String(err) };
      }
      return fromWire(json);
    },
  };
}

// --- shared pieces ----------------------------------------------------------------

/** base64 of the hashes as 8-byte little-endian integers (BigUint64Array's own bytes on every host we run). */
function le64Base64(list: BigUint64Array): string {
  return Buffer.from(list.buffer, list.byteOffset, list.byteLength).toString('base64');
}

/** A u64 list given in either form (the schema guarantees at most one), or null when absent. */
function u64ListEither(decimal: readonly string[] | undefined, le64: string | undefined, path: string): BigUint64Array | null {
  if (le64 !== undefined) {
    const bytes = Buffer.from(le64, 'base64');
    if (bytes.length % 8 !== 0) throw new U64RangeError(`${path}Le64: ${bytes.length} bytes is not a whole number of u64s`);
    // Copied into a fresh, aligned buffer: Buffer pools are not 8-byte aligned.
    const out = new BigUint64Array(bytes.length / 8);
    new Uint8Array(out.buffer).set(bytes);
    return out;
  }
  if (decimal === undefined) return null;
  const out = new BigUint64Array(decimal.length);
  for (let i = 0; i < decimal.length; i++) out[i] = u64(decimal[i]!, `${path}/${i}`);
  return out;
}

/**
 * The u64s of a `*Le64` string when it is canonical base64 (what every encoder writes: decoding and
 * re-encoding natively gives it back) of a whole number of u64s, else null. Canonical base64 always
 * matches the schema's pattern, so such a string needs no regular expression or code-point count.
 */
function canonicalLe64(s: string): BigUint64Array | null {
  if (s.length > MAX_LE64_CHARS || s.length % 4 !== 0) return null;
  const pad = s.length === 0 ? 0 : s.charCodeAt(s.length - 1) !== 0x3d ? 0 : s.charCodeAt(s.length - 2) === 0x3d ? 2 : 1;
  const nbytes = (s.length / 4) * 3 - pad;
  if (nbytes % 8 !== 0) return null;
  // Decoded straight into the result's (aligned) bytes. Re-encoding them gives `s` back exactly when
  // `s` is the canonical base64 of those bytes (then they are all of what `s` decodes to).
  const out = new BigUint64Array(nbytes / 8);
  const bytes = Buffer.from(out.buffer);
  if (bytes.write(s, 0, nbytes, 'base64') !== nbytes || bytes.toString('base64', 0, nbytes) !== s) return null;
  return out;
}

// --- the bulk fast path ----------------------------------------------------------------

const Q = 0x22; // "
const COLON = 0x3a;
const LBRACK = 0x5b;
const RBRACK = 0x5d;
const COMMA = 0x2c;
const isWs = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

let u32Scratch = new Uint32Array(1 << 16);

/**
 * Parse `[int, int, ...]` starting at `b[at] === '['`: plain non-negative JSON integers (no sign,
 * fraction, exponent or leading zero) within u32, at most MAX_TOKENS of them, whitespace allowed
 * between tokens. Returns the values and the index after `]`, or null when the array is anything
 * else (the codec then decides). Past the end of `b`, reads give undefined, which no test accepts.
 */
function parseU32Array(b: Uint8Array, at: number): { values: Uint32Array; end: number } | null {
  let out = u32Scratch;
  let count = 0;
  let i = at + 1;
  while (isWs(b[i]!)) i++;
  if (b[i] === RBRACK) return { values: new Uint32Array(0), end: i + 1 };
  for (;;) {
    while (isWs(b[i]!)) i++;
    let d = b[i]! - 0x30;
    if (!(d >= 0 && d <= 9)) return null;
    let v = d;
    i++;
    d = b[i]! - 0x30;
    if (v === 0) {
      if (d >= 0 && d <= 9) return null; // a leading zero
    } else {
      let digits = 1;
      while (d >= 0 && d <= 9) {
        v = v * 10 + d;
        if (++digits > 10) return null;
        d = b[++i]! - 0x30;
      }
      if (v > 0xffff_ffff) return null;
    }
    if (count === out.length) {
      if (count >= MAX_TOKENS) return null;
      const bigger = new Uint32Array(out.length * 2);
      bigger.set(out);
      out = u32Scratch = bigger;
    }
    out[count++] = v;
    let c = b[i];
    while (c !== undefined && isWs(c)) c = b[++i];
    if (c === COMMA) {
      i++;
      continue;
    }
    if (c === RBRACK) return { values: out.slice(0, count), end: i + 1 };
    return null;
  }
}

interface Bulk {
  /** The message with every bulk member's value replaced: a `*Le64` string by `"@k"`, a u32 array by `[k]`. */
  readonly text: string;
  /** Each `*Le64` string's bytes (views of the message). */
  readonly strings: readonly Buffer[];
  /** Each u32 array, parsed; the same bytes twice (both candidates' prompts, usually) give the same array. */
  readonly arrays: readonly Uint32Array[];
}

/**
 * Every `"key": "…"` member of a `*Le64` key and every `"key": [ … ]` member of a u32-array key
 * (whitespace allowed around the colon), taken out of a message without backslashes whose rest is ASCII. Then
 * every quote opens or closes a string, no key is written with escapes, no string holds an escaped
 * quote, and a key outside a string followed by `:` is that member's key. null when the message is
 * not one this is sure about (a key's name inside a string, an array that is not plain u32s, ...).
 */
function extractBulk(buf: Buffer, keys: readonly { readonly bytes: Buffer; readonly u32: boolean }[]): Bulk | null {
  if (buf.indexOf(0x5c) >= 0) return null;
  const arrays: Uint32Array[] = [];
  const arrayRanges: { start: number; end: number }[] = [];
  const strings: Buffer[] = [];
  const cuts: { start: number; end: number; placeholder: string }[] = [];
  const next = keys.map((k) => buf.indexOf(k.bytes));
  let inString = false;
  let pos = 0; // the string state is known at pos
  for (;;) {
    let j = -1;
    for (let x = 0; x < next.length; x++) if (next[x]! >= 0 && (j < 0 || next[x]! < next[j]!)) j = x;
    if (j < 0) break;
    const at = next[j]!;
    const key = keys[j]!;
    for (let q = buf.indexOf(Q, pos); q >= 0 && q < at; q = buf.indexOf(Q, q + 1)) inString = !inString;
    pos = at + key.bytes.length;
    // Inside a string: its closing quote is `at`, and the key's letters would follow it. Not an encoder's text.
    if (inString) return null;
    let i = pos;
    while (i < buf.length && isWs(buf[i]!)) i++;
    if (buf[i] === COLON) {
      i++;
      while (i < buf.length && isWs(buf[i]!)) i++;
      if (key.u32 && buf[i] === LBRACK) {
        let parsed: { values: Uint32Array; end: number } | null = null;
        for (let a = 0; a < arrayRanges.length && parsed === null; a++) {
          const r = arrayRanges[a]!;
          const len = r.end - r.start;
          if (i + len <= buf.length && buf.compare(buf, r.start, r.end, i, i + len) === 0) parsed = { values: arrays[a]!, end: i + len };
        }
        parsed ??= parseU32Array(buf, i);
        if (parsed === null) return null;
        cuts.push({ start: i, end: parsed.end, placeholder: `[${arrays.length}]` });
        arrays.push(parsed.values);
        arrayRanges.push({ start: i, end: parsed.end });
        pos = parsed.end;
      } else if (!key.u32 && buf[i] === Q) {
        const end = buf.indexOf(Q, i + 1);
        if (end < 0) return null;
        cuts.push({ start: i, end: end + 1, placeholder: `"@${strings.length}"` });
        strings.push(buf.subarray(i + 1, end));
        pos = end + 1;
      }
      // Anything else (a value of another type): left to JSON.parse and the codec.
    }
    for (let x = 0; x < next.length; x++) if (next[x]! >= 0 && next[x]! < pos) next[x] = buf.indexOf(keys[x]!.bytes, pos);
  }
  // Only the rest need be checked for ASCII: what was cut out is digits and whitespace, or checked as base64.
  let text = '';
  let from = 0;
  for (const c of cuts) {
    if (!isAscii(buf.subarray(from, c.start))) return null;
    text += buf.toString('latin1', from, c.start) + c.placeholder;
    from = c.end;
  }
  if (!isAscii(buf.subarray(from))) return null;
  return { text: text + buf.toString('latin1', from, buf.length), strings, arrays };
}

/** Where a bulk list sits in a parsed message: its holder object, its key, and the name `patch` knows it by. */
type BulkHolder = readonly [holder: Record<string, unknown>, key: string, name: string];

/**
 * The bulk fast path (package README, "Codecs"): the lists are cut out of the bytes (`extractBulk`),
 * the rest is checked by the schema with an empty list in each list's place, and the decoded lists
 * are put back (`patch`, by the holder's name). Every list cut out must sit at one of `holders` (else
 * a placeholder would stand where a value was). A string input always takes the codec alone.
 */
function withBulkFastPath<T>(
  codec: MessageCodec<T>,
  keys: { readonly le64: readonly string[]; readonly u32?: readonly string[] },
  holders: (json: W) => BulkHolder[],
  patch: (value: T, lists: ReadonlyMap<string, BigUint64Array | Uint32Array>) => T,
): MessageCodec<T> {
  const pattern = (key: string, u32: boolean) => ({ u32, bytes: Buffer.from(`"${key}"`, 'latin1') });
  const patterns = [...keys.le64.map((k) => pattern(k, false)), ...(keys.u32 ?? []).map((k) => pattern(k, true))];
  const fast = (data: Uint8Array | string, maxBytes: number): DecodeResult<T> | null => {
    if (typeof data === 'string' || data.byteLength > maxBytes) return null;
    const bulk = extractBulk(Buffer.from(data.buffer, data.byteOffset, data.byteLength), patterns);
    if (bulk === null || bulk.strings.length + bulk.arrays.length === 0) return null;
    let json: W;
    try {
      json = JSON.parse(bulk.text);
    } catch {
      return null;
    }
    if (!isObj(json)) return null;
    const lists = new Map<string, BigUint64Array | Uint32Array>();
    /** Each string's decoded list, once it is read at a holder (the same bytes twice decode once). */
    const decoded: (BigUint64Array | undefined)[] = [];
    const arrayUsed: boolean[] = [];
    let used = 0;
    for (const [holder, key, name] of holders(json)) {
      const v = holder[key];
      if (typeof v === 'string') {
        const k = v.length > 1 && v.charCodeAt(0) === 0x40 ? Number(v.slice(1)) : NaN;
        const b = bulk.strings[k];
        if (b === undefined || v !== `@${k}` || decoded[k] !== undefined) return null;
        const same = decoded.findIndex((d, x) => d !== undefined && bulk.strings[x]!.equals(b));
        const list = same >= 0 ? decoded[same]! : canonicalLe64(b.toString('latin1'));
        if (list === null) return null;
        decoded[k] = list;
        holder[key] = '';
        lists.set(name, list);
        used++;
      } else if (Array.isArray(v) && keys.u32?.includes(key)) {
        const k = v.length === 1 && typeof v[0] === 'number' ? v[0] : NaN;
        const a = bulk.arrays[k];
        if (a === undefined || arrayUsed[k] === true) return null;
        arrayUsed[k] = true;
        holder[key] = [];
        lists.set(name, a);
        used++;
      }
    }
    if (used !== bulk.strings.length + bulk.arrays.length) return null;
    const r = codec.fromWire(json);
    if (!r.ok) return null;
    return { ok: true, value: patch(r.value, lists) };
  };
  return {
    ...codec,
    decode: (data, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES) => fast(data, maxBytes) ?? codec.decode(data, maxBytes),
  };
}

/**
 * A codec that also decodes a binary encoding (observe-binary.ts, observe-request-binary.ts), told
 * apart by its first bytes: `toWire` checks only its framing and gives the JSON's wire object, which
 * the same schema validates; `fill` puts back what the wire object carries aside. `encode` writes JSON.
 */
function withBinary<T, B extends { ok: true; wire: Record<string, unknown> }>(
  codec: MessageCodec<T>,
  isBinary: (data: Uint8Array) => boolean,
  toWire: (data: Uint8Array) => B | { ok: false; reason: string },
  fill?: (r: DecodeResult<T>, b: B) => DecodeResult<T>,
): MessageCodec<T> {
  return {
    ...codec,
    decode(data, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES) {
      // Too large: the JSON decoder's own size check refuses it.
      if (typeof data === 'string' || !isBinary(data) || data.byteLength > maxBytes) return codec.decode(data, maxBytes);
      const b = toWire(data);
      if (!b.ok) return { ok: false, code: 'malformed_binary', reason: b.reason };
      const r = codec.fromWire(b.wire);
      return fill === undefined ? r : fill(r, b);
    },
  };
}

/** A prompt with its bulk list (a holder's decoded list) put back, or the prompt itself. */
function patchPrompt(p: PromptSpec, list: BigUint64Array | Uint32Array | undefined): PromptSpec {
  if (list instanceof BigUint64Array && p.kind === 'local_hashes') return { kind: 'local_hashes', localHashes: list, loraName: p.loraName };
  if (list instanceof Uint32Array && p.kind === 'token_ids') return { kind: 'token_ids', tokenIds: list, loraName: p.loraName };
  return p;
}

/** The holders of a prompt's bulk lists, named `name`. */
const promptHolders = (prompt: unknown, name: string): BulkHolder[] =>
  isObj(prompt)
    ? [
        [prompt, 'localHashesLe64', name],
        [prompt, 'tokenIds', name],
      ]
    : [];

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function promptToWire(p: PromptSpec): Record<string, unknown> {
  const lora = p.loraName === null ? {} : { loraName: p.loraName };
  return p.kind === 'local_hashes' ? { localHashesLe64: le64Base64(p.localHashes), ...lora } : { tokenIds: Array.from(p.tokenIds), ...lora };
}

function promptFromWire(w: W, path: string): PromptSpec {
  const loraName: string | null = w.loraName ?? null;
  const local = u64ListEither(w.localHashes, w.localHashesLe64, `${path}/localHashes`);
  if (local !== null) return { kind: 'local_hashes', localHashes: local, loraName };
  return { kind: 'token_ids', tokenIds: Uint32Array.from(w.tokenIds as number[]), loraName };
}

const agesFromWire = (w: W) => ({ indexMs: w.indexMs, loadMs: w.loadMs, bookingMs: w.bookingMs });

// --- observe ----------------------------------------------------------------------

/**
 * `vantage.v1.observe.{pool}` request, as JSON or in the binary encoding (`encodeObserveRequestBinary`),
 * whose local hashes are copied out of the message into the value, not carried as base64 in its wire object.
 */
export const observeRequestCodec: MessageCodec<ObserveRequest> = withBinary(
  withBulkFastPath(
    makeCodec<ObserveRequest>(
      'observe-request.v1.json',
      (m) => ({
        v: PROTOCOL_VERSION,
        ...(m.requestId === null ? {} : { requestId: m.requestId }),
        prompt: promptToWire(m.prompt),
        promptTokens: m.promptTokens,
        ...(m.workers === undefined || m.workers === 'all' ? {} : { workers: m.workers }),
        ...(m.replyEncoding === 'binary' ? { replyEncoding: m.replyEncoding } : {}),
      }),
      (w) => ({
        requestId: w.requestId ?? null,
        prompt: promptFromWire(w.prompt, '/prompt'),
        promptTokens: w.promptTokens,
        workers: w.workers ?? 'all',
        // Present only when asked for, so that existing callers' decoded values are unchanged.
        ...(w.replyEncoding === 'binary' ? { replyEncoding: 'binary' as const } : {}),
      }),
    ),
    { le64: ['localHashesLe64'], u32: ['tokenIds'] },
    (json) => promptHolders(json.prompt, 'prompt'),
    (value, lists) => {
      const prompt = patchPrompt(value.prompt, lists.get('prompt'));
      return prompt === value.prompt ? value : { ...value, prompt };
    },
  ),
  isObserveRequestBinary,
  observeRequestBinaryToWire,
  (r, w) => (!r.ok || w.localHashes === null || r.value.prompt.kind !== 'local_hashes' ? r : { ok: true, value: { ...r.value, prompt: { ...r.value.prompt, localHashes: w.localHashes } } }),
);

function workerToWire(o: WorkerObservation): Record<string, unknown> {
  const out: Record<string, unknown> = { ...o, workerId: str(o.workerId), reported: o.reported === null ? null : { ...o.reported }, ages: { ...o.ages } };
  if (o.forwardPass === undefined || o.forwardPass === null) delete out.forwardPass;
  else out.forwardPass = { ...o.forwardPass };
  if (o.recoveredAtMs === undefined || o.recoveredAtMs === null) delete out.recoveredAtMs;
  return out;
}

function workerFromWire(w: W, path: string): WorkerObservation {
  return {
    workerId: u64(w.workerId, `${path}/workerId`) as WorkerId,
    dpRank: w.dpRank,
    schedulable: w.schedulable,
    deviceOverlapBlocks: w.deviceOverlapBlocks,
    K: w.K,
    hostOverlapBlocks: w.hostOverlapBlocks,
    diskOverlapBlocks: w.diskOverlapBlocks,
    anyTierOverlapBlocks: w.anyTierOverlapBlocks,
    R: w.R,
    trackedPrefillTokens: w.trackedPrefillTokens,
    P: w.P,
    maxNumBatchedTokens: w.maxNumBatchedTokens,
    effectivePrefillTokens: w.effectivePrefillTokens,
    newBlocks: w.newBlocks,
    activeBlocks: w.activeBlocks,
    totalKvBlocks: w.totalKvBlocks,
    treeBlocks: w.treeBlocks,
    reported:
      w.reported === null
        ? null
        : { activeDecodeBlocks: w.reported.activeDecodeBlocks, activePrefillTokens: w.reported.activePrefillTokens, kvUsedBlocks: w.reported.kvUsedBlocks },
    suspect: w.suspect === null ? null : { reason: w.suspect.reason, sinceMs: w.suspect.sinceMs },
    ages: agesFromWire(w.ages),
    dynamoCost: w.dynamoCost,
    ...(w.forwardPass === undefined || w.forwardPass === null ? {} : { forwardPass: { ...w.forwardPass } }),
    ...(w.recoveredAtMs === undefined || w.recoveredAtMs === null ? {} : { recoveredAtMs: w.recoveredAtMs }),
  };
}

/** `vantage.v1.observe.{pool}` reply, JSON or binary (`encodeObserveReplyBinary`, what a request's `replyEncoding: "binary"` asks for). */
export const observeReplyCodec: MessageCodec<ObserveReply> = withBinary(
  makeCodec(
    'observe-reply.v1.json',
    (m) => ({
      v: PROTOCOL_VERSION,
      pool: m.pool,
      blockSize: m.blockSize,
      queryDurationUs: m.queryDurationUs,
      atMs: m.atMs,
      workers: m.workers.map(workerToWire),
      pending: m.pending === null ? null : { requests: m.pending.requests, tokens: m.pending.tokens },
      dynamoChoice:
        m.dynamoChoice === null
          ? null
          : {
              workerId: str(m.dynamoChoice.workerId),
              dpRank: m.dynamoChoice.dpRank,
              cost: m.dynamoChoice.cost,
              policy: { name: m.dynamoChoice.policy.name, params: { ...m.dynamoChoice.policy.params } },
            },
      ...(m.snapshotRestoredAtMs === null ? {} : { snapshotRestoredAtMs: m.snapshotRestoredAtMs }),
    }),
    (w) => ({
      pool: w.pool,
      blockSize: w.blockSize,
      queryDurationUs: w.queryDurationUs,
      atMs: w.atMs,
      workers: (w.workers as W[]).map((x, i) => workerFromWire(x, `/workers/${i}`)),
      pending: w.pending === null ? null : { requests: w.pending.requests, tokens: w.pending.tokens },
      dynamoChoice:
        w.dynamoChoice === null
          ? null
          : {
              workerId: u64(w.dynamoChoice.workerId, '/dynamoChoice/workerId') as WorkerId,
              dpRank: w.dynamoChoice.dpRank,
              cost: w.dynamoChoice.cost,
              policy: { name: w.dynamoChoice.policy.name, params: { ...w.dynamoChoice.policy.params } },
            },
      snapshotRestoredAtMs: w.snapshotRestoredAtMs ?? null,
    }),
  ),
  isObserveReplyBinary,
  observeReplyBinaryToWire,
);

// --- route ------------------------------------------------------------------------

function candidateToWire(c: RouteCandidate): Record<string, unknown> {
  return { model: c.model, ...(c.pool === null ? {} : { pool: c.pool }), prompt: promptToWire(c.prompt), promptTokens: c.promptTokens };
}

function candidateFromWire(w: W, path: string): RouteCandidate {
  return { model: w.model, pool: w.pool ?? null, prompt: promptFromWire(w.prompt, `${path}/prompt`), promptTokens: w.promptTokens };
}

/** `vantage.v1.route` request. */
export const routeRequestCodec: MessageCodec<RouteRequest> = withBulkFastPath(makeCodec(
  'route-request.v1.json',
  (m) => ({
    v: PROTOCOL_VERSION,
    requestId: m.requestId,
    sessionId: m.sessionId,
    stageProposal: m.stageProposal,
    candidates: { efficient: candidateToWire(m.candidates.efficient), capable: candidateToWire(m.candidates.capable) },
    ...(m.deadlineMs === null ? {} : { deadlineMs: m.deadlineMs }),
  }),
  (w) => ({
    requestId: w.requestId,
    sessionId: w.sessionId,
    stageProposal: w.stageProposal,
    candidates: {
      efficient: candidateFromWire(w.candidates.efficient, '/candidates/efficient'),
      capable: candidateFromWire(w.candidates.capable, '/candidates/capable'),
    },
    deadlineMs: w.deadlineMs ?? null,
  }),),
  { le64: ['localHashesLe64'], u32: ['tokenIds'] },
  (json) => (isObj(json.candidates) ? [...promptHolders(json.candidates.efficient?.prompt, 'efficient'), ...promptHolders(json.candidates.capable?.prompt, 'capable')] : []),
  (value, lists) => {
    const fill = (c: RouteCandidate, list: BigUint64Array | Uint32Array | undefined): RouteCandidate => {
      const prompt = patchPrompt(c.prompt, list);
      return prompt === c.prompt ? c : { model: c.model, pool: c.pool, prompt, promptTokens: c.promptTokens };
    };
    const { efficient, capable } = value.candidates;
    return { ...value, candidates: { efficient: fill(efficient, lists.get('efficient')), capable: fill(capable, lists.get('capable')) } };
  },
);

function observationToWire(o: CandidateObservation | null): Record<string, unknown> | null {
  if (o === null) return null;
  return {
    ...o,
    workerId: o.workerId === null ? null : str(o.workerId),
    pending: o.pending === null ? null : { ...o.pending },
    ages: { ...o.ages },
    error: o.error === null ? null : { ...o.error },
  };
}

/** The chosen worker's facts when no worker was observed. */
export const NO_WORKER_FACTS: Omit<ChosenWorkerFacts, 'workerId'> = {
  dpRank: null,
  schedulable: null,
  K: null,
  R: null,
  P: null,
  effectivePrefillTokens: null,
  hostOverlapBlocks: null,
  diskOverlapBlocks: null,
  activeBlocks: null,
  totalKvBlocks: null,
};

/** A route reply's observation of one candidate, member by member: the chosen worker's facts `f`, its id apart. */
export function candidateObservation(
  c: Pick<CandidateObservation, 'model' | 'pool' | 'promptTokens'>,
  queryDurationUs: number | null,
  workerId: WorkerId | null,
  f: Omit<ChosenWorkerFacts, 'workerId'>,
  pending: PendingWork | null,
  ages: CandidateObservation['ages'],
  error: CandidateObservation['error'],
): CandidateObservation {
  return {
    model: c.model,
    pool: c.pool,
    promptTokens: c.promptTokens,
    queryDurationUs,
    workerId,
    dpRank: f.dpRank,
    schedulable: f.schedulable,
    K: f.K,
    R: f.R,
    P: f.P,
    effectivePrefillTokens: f.effectivePrefillTokens,
    hostOverlapBlocks: f.hostOverlapBlocks,
    diskOverlapBlocks: f.diskOverlapBlocks,
    activeBlocks: f.activeBlocks,
    totalKvBlocks: f.totalKvBlocks,
    pending,
    ages,
    error,
  };
}

function observationFromWire(w: W, path: string): CandidateObservation | null {
  if (w === null) return null;
  return candidateObservation(
    w,
    w.queryDurationUs,
    w.workerId === null ? null : (u64(w.workerId, `${path}/workerId`) as WorkerId),
    w,
    w.pending === null ? null : { requests: w.pending.requests, tokens: w.pending.tokens },
    { collectedMs: w.ages.collectedMs, ...agesFromWire(w.ages) },
    w.error === null ? null : { code: w.error.code, reason: w.error.reason },
  );
}

/** `vantage.v1.route` reply. */
export const routeReplyCodec: MessageCodec<RouteReply> = makeCodec(
  'route-reply.v1.json',
  (m) => ({
    v: PROTOCOL_VERSION,
    requestId: m.requestId,
    ...(m.sessionId === null ? {} : { sessionId: m.sessionId }),
    stageProposal: m.stageProposal,
    model: m.model,
    modelRole: m.modelRole,
    pool: m.pool,
    workerId: m.workerId === null ? null : str(m.workerId),
    dpRank: m.dpRank,
    endpoint: m.endpoint,
    reason: m.reason,
    fallback: m.fallback,
    detail: m.detail,
    variant: m.variant,
    observations: { efficient: observationToWire(m.observations.efficient), capable: observationToWire(m.observations.capable) },
    predictions: { ...m.predictions },
    parameterVersion: m.parameterVersion,
    queryDurationUs: m.queryDurationUs,
    decisionDurationUs: m.decisionDurationUs,
  }),
  (w) => ({
    requestId: w.requestId,
    sessionId: w.sessionId ?? null,
    stageProposal: w.stageProposal,
    model: w.model,
    modelRole: w.modelRole,
    pool: w.pool ?? null,
    workerId: w.workerId === null ? null : (u64(w.workerId, '/workerId') as WorkerId),
    dpRank: w.dpRank,
    endpoint: w.endpoint ?? null,
    reason: w.reason,
    fallback: w.fallback ?? null,
    detail: w.detail ?? null,
    variant: w.variant,
    observations: {
      efficient: observationFromWire(w.observations.efficient, '/observations/efficient'),
      capable: observationFromWire(w.observations.capable, '/observations/capable'),
    },
    predictions: {
      estimator: w.predictions.estimator,
      efficientTtftMs: w.predictions.efficientTtftMs,
      capableTtftMs: w.predictions.capableTtftMs,
      advantageMs: w.predictions.advantageMs,
      marginMs: w.predictions.marginMs,
    },
    parameterVersion: w.parameterVersion,
    queryDurationUs: w.queryDurationUs,
    decisionDurationUs: w.decisionDurationUs,
  }),
);

// --- bookings -----------------------------------------------------------------------

/** `vantage.v1.bookings.{pool}` event. */
export const bookingEventCodec: MessageCodec<BookingEvent> = withBulkFastPath(makeCodec<BookingEvent>(
  'booking-event.v1.json',
  (m) => ({
    v: PROTOCOL_VERSION,
    requestId: m.requestId,
    sessionId: m.sessionId,
    pool: m.pool,
    workerId: str(m.workerId),
    dpRank: m.dpRank,
    promptTokens: m.promptTokens,
    overlapBlocks: m.overlapBlocks,
    // Sequence hashes win when a caller filled both: the schema allows only one.
    ...(m.sequenceHashes !== null
      ? { sequenceHashesLe64: le64Base64(m.sequenceHashes) }
      : m.localHashes !== null
        ? { localHashesLe64: le64Base64(m.localHashes) }
        : {}),
    ...(m.expectedOutputTokens === null ? {} : { expectedOutputTokens: m.expectedOutputTokens }),
    ...(m.prefillTokens === null ? {} : { prefillTokens: m.prefillTokens }),
    atMs: m.atMs,
  }),
  (w) => ({
    requestId: w.requestId,
    sessionId: w.sessionId,
    pool: w.pool,
    workerId: u64(w.workerId, '/workerId') as WorkerId,
    dpRank: w.dpRank,
    promptTokens: w.promptTokens,
    overlapBlocks: w.overlapBlocks,
    sequenceHashes: u64ListEither(w.sequenceHashes, w.sequenceHashesLe64, '/sequenceHashes'),
    localHashes: u64ListEither(w.localHashes, w.localHashesLe64, '/localHashes'),
    expectedOutputTokens: w.expectedOutputTokens ?? null,
    prefillTokens: w.prefillTokens ?? null,
    atMs: w.atMs,
  }),
),
  { le64: ['sequenceHashesLe64', 'localHashesLe64'] },
  (json) => [
    [json, 'sequenceHashesLe64', 'sequenceHashesLe64'],
    [json, 'localHashesLe64', 'localHashesLe64'],
  ],
  (value, lists) => ({
    ...value,
    sequenceHashes: (lists.get('sequenceHashesLe64') as BigUint64Array | undefined) ?? value.sequenceHashes,
    localHashes: (lists.get('localHashesLe64') as BigUint64Array | undefined) ?? value.localHashes,
  }),
);

// --- lifecycle ----------------------------------------------------------------------

/**
 * `vantage.v1.lifecycle.{pool}` event (`background` is written only when true, `arrivalMs` only
 * when set; decoded as false / null when absent).
 */
export const lifecycleEventCodec: MessageCodec<LifecycleEvent> = makeCodec(
  'lifecycle-event.v1.json',
  (m) => ({
    v: PROTOCOL_VERSION,
    requestId: m.requestId,
    sessionId: m.sessionId,
    pool: m.pool,
    kind: m.kind,
    atMs: m.atMs,
    ...(m.workerId === null ? {} : { workerId: str(m.workerId) }),
    ...(m.dpRank === null ? {} : { dpRank: m.dpRank }),
    ...(m.usage === null ? {} : { usage: { ...m.usage } }),
    ...(m.error === null ? {} : { error: { ...m.error } }),
    ...(m.background === true ? { background: true } : {}),
    ...(m.arrivalMs === undefined || m.arrivalMs === null ? {} : { arrivalMs: m.arrivalMs }),
  }),
  (w) => ({
    requestId: w.requestId,
    sessionId: w.sessionId,
    pool: w.pool,
    kind: w.kind,
    atMs: w.atMs,
    workerId: w.workerId == null ? null : (u64(w.workerId, '/workerId') as WorkerId),
    dpRank: w.dpRank ?? null,
    usage: w.usage === undefined ? null : { inputTokens: w.usage.inputTokens, outputTokens: w.usage.outputTokens, cachedTokens: w.usage.cachedTokens },
    error: w.error === undefined ? null : { code: w.error.code, message: w.error.message },
    background: w.background === true,
    arrivalMs: w.arrivalMs ?? null,
  }),
);

// --- workers ------------------------------------------------------------------------

/** `vantage.v1.workers.{pool}` event. */
export const workerRegistrationCodec: MessageCodec<WorkerRegistration> = makeCodec(
  'worker-registration.v1.json',
  (m) =>
    m.kind === 'deregister'
      ? { v: PROTOCOL_VERSION, pool: m.pool, kind: m.kind, workerId: str(m.workerId), atMs: m.atMs }
      : {
          v: PROTOCOL_VERSION,
          pool: m.pool,
          kind: m.kind,
          workerId: str(m.workerId),
          atMs: m.atMs,
          ...m.capacity,
          ttlMs: m.ttlMs,
          ...(m.endpoint === null ? {} : { endpoint: m.endpoint }),
          ...(m.model === null ? {} : { model: m.model }),
        },
  (w) => {
    const workerId = u64(w.workerId, '/workerId') as WorkerId;
    if (w.kind === 'deregister') return { kind: 'deregister', pool: w.pool, workerId, atMs: w.atMs };
    return {
      kind: w.kind,
      pool: w.pool,
      workerId,
      atMs: w.atMs,
      capacity: capacityOf(w.blockSize, w),
      ttlMs: w.ttlMs,
      endpoint: w.endpoint ?? null,
      model: w.model ?? null,
    };
  },
);
