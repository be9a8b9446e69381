/**
 * Decoding a `route` request without paying for its bulk twice.
 *
 * A route request is small except for its prompts: a 32k-token prompt is 4 KiB
 * of hashes (5.5 KB of base64) or 32,768 token ids (~200 KB of JSON digits),
 * and there are two of them. The protocol codec validates everything with the
 * schema, which is right but slow on that bulk: a regular expression and a
 * code-point count over each base64 string, and per-element type and range
 * checks, `JSON.parse` and `Uint32Array.from` over each token array.
 *
 * Here the bulk is validated directly and the rest goes through the codec
 * exactly as before:
 *   - token-id arrays are parsed straight from the bytes (a strict scanner for
 *     `[` non-negative JSON integers `]`) and replaced in the text by a
 *     one-element placeholder before `JSON.parse`; two candidates carrying the
 *     same bytes are parsed once;
 *   - a `localHashesLe64` string is accepted when it is canonical base64 of a
 *     whole number of u64s (decoded and re-encoded natively), which implies the
 *     schema's pattern; it is kept as is, so the observe queries and the
 *     booking forward it without re-encoding;
 *   - the codec's `fromWire` then validates everything else, with empty
 *     prompts in place of the bulk.
 *
 * Whenever the fast path is not sure (non-ASCII text, an escaped key, a number
 * that is not a plain integer, a base64 string that is not canonical, ...), the
 * request is decoded by the codec alone from the original bytes: accepted and
 * rejected requests, and rejection codes, are the codec's.
 */
import { isAscii } from 'node:buffer';
import { DEFAULT_MAX_PAYLOAD_BYTES, routeRequestCodec, type DecodeResult, type PromptSpec, type RouteCandidate, type RouteRequest } from '@vantage/protocol';

type Role = 'efficient' | 'capable';
const ROLES: readonly Role[] = ['efficient', 'capable'];

/** Schema bounds (route-request.v1.json), checked here for the parts taken out of the codec's view. */
const MAX_LE64_CHARS = 1_398_104;
const MAX_TOKEN_IDS = 2_097_152;

export interface DecodedRoute {
  readonly req: RouteRequest;
  /**
   * Per candidate, the canonical base64 (`localHashesLe64`) of its local hashes when the request
   * carried them that way: forwarded as is to the observe query and the booking. null otherwise.
   */
  readonly le64: { readonly efficient: string | null; readonly capable: string | null };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function text(b: Uint8Array, from: number, to: number): string | null {
  const v = b.subarray(from, to);
  if (isAscii(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('latin1');
  try {
    return utf8.decode(v);
  } catch {
    return null;
  }
}

function slow(data: Uint8Array, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES): DecodeResult<DecodedRoute> {
  const r = routeRequestCodec.decode(data, maxBytes);
  return r.ok ? { ok: true, value: { req: r.value, le64: { efficient: null, capable: null } } } : r;
}

// --- token-id arrays -----------------------------------------------------------------

const TOKEN_KEY = Buffer.from('"tokenIds"');
const Q = 0x22; // "
const BS = 0x5c; // \
const COLON = 0x3a;
const LBRACK = 0x5b;
const RBRACK = 0x5d;
const COMMA = 0x2c;
const isWs = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

let scratch = new Uint32Array(1 << 16);

/**
 * Parse `[int, int, ...]` starting at `b[at] === '['`: plain non-negative JSON integers (no sign,
 * fraction, exponent or leading zero) within u32. Returns the values and the index after `]`,
 * or null when the array is anything else (the codec then decides).
 */
function parseU32Array(b: Uint8Array, at: number): { values: Uint32Array; end: number } | null {
  let i = at + 1;
  const n = b.length;
  let count = 0;
  while (i < n && isWs(b[i]!)) i++;
  if (i < n && b[i] === RBRACK) return { values: new Uint32Array(0), end: i + 1 };
  for (;;) {
    while (i < n && isWs(b[i]!)) i++;
    if (i >= n) return null;
    let c = b[i]!;
    if (c < 0x30 || c > 0x39) return null;
    let v = c - 0x30;
    i++;
    if (v === 0) {
      // A leading zero must be the whole number.
      if (i < n && b[i]! >= 0x30 && b[i]! <= 0x39) return null;
    } else {
      let digits = 1;
      while (i < n) {
        c = b[i]!;
        if (c < 0x30 || c > 0x39) break;
        v = v * 10 + (c - 0x30);
        i++;
        if (++digits > 10) return null;
      }
      if (v > 0xffff_ffff) return null;
    }
    if (count === scratch.length) {
      if (count >= MAX_TOKEN_IDS) return null;
      const bigger = new Uint32Array(scratch.length * 2);
      bigger.set(scratch);
      scratch = bigger;
    }
    scratch[count++] = v;
    while (i < n && isWs(b[i]!)) i++;
    if (i >= n) return null;
    c = b[i]!;
    if (c === COMMA) {
      i++;
      continue;
    }
    if (c === RBRACK) return { values: scratch.slice(0, count), end: i + 1 };
    return null;
  }
}

interface Extracted {
  readonly text: string;
  readonly arrays: readonly Uint32Array[];
}

/**
 * Every `"tokenIds": [ ... ]` member, parsed and replaced by `[k]` (k its index in `arrays`).
 * Only for text without backslashes: then every quote opens or closes a string, no key is written
 * with escapes, and a `"tokenIds"` outside a string followed by `:` is that member's key.
 * null when the text is not one the scanner is sure about.
 */
function extractTokenArrays(b: Uint8Array): Extracted | null {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.indexOf(BS) >= 0) return null;
  const arrays: Uint32Array[] = [];
  const ranges: { start: number; end: number }[] = [];
  let inString = false;
  let pos = 0; // the string state is known at pos
  for (;;) {
    const k = buf.indexOf(TOKEN_KEY, pos);
    if (k < 0) break;
    for (let q = buf.indexOf(Q, pos); q >= 0 && q < k; q = buf.indexOf(Q, q + 1)) inString = !inString;
    pos = k + TOKEN_KEY.length;
    // Inside a string: its closing quote is k; `tokenIds"` then opens another. Not an encoder's text.
    if (inString) return null;
    let i = pos;
    while (i < b.length && isWs(b[i]!)) i++;
    if (b[i] !== COLON) continue; // a string value "tokenIds", not a key
    i++;
    while (i < b.length && isWs(b[i]!)) i++;
    if (b[i] !== LBRACK) continue; // not an array: the codec will judge it
    // The same bytes as an earlier array (both candidates' prompts, usually): parse once.
    let parsed: { values: Uint32Array; end: number } | null = null;
    for (let a = 0; a < ranges.length && parsed === null; a++) {
      const r = ranges[a]!;
      const len = r.end - r.start;
      if (i + len <= b.length && buf.compare(buf, r.start, r.end, i, i + len) === 0) parsed = { values: arrays[a]!, end: i + len };
    }
    parsed ??= parseU32Array(b, i);
    if (parsed === null) return null;
    arrays.push(parsed.values);
    ranges.push({ start: i, end: parsed.end });
    pos = parsed.end;
  }
  if (ranges.length === 0) return null;
  let out = '';
  let from = 0;
  for (let a = 0; a < ranges.length; a++) {
    const t = text(b, from, ranges[a]!.start);
    if (t === null) return null;
    out += `${t}[${a}]`;
    from = ranges[a]!.end;
  }
  const tail = text(b, from, b.length);
  if (tail === null) return null;
  return { text: out + tail, arrays };
}

// --- base64 hash lists -----------------------------------------------------------------

/** Canonical base64 of whole u64s: the hashes and the canonical string, or null (the codec decides). */
function le64(s: string): { hashes: BigUint64Array; canonical: string } | null {
  if (s.length > MAX_LE64_CHARS) return null;
  const bytes = Buffer.from(s, 'base64');
  if (bytes.length % 8 !== 0) return null;
  const canonical = bytes.toString('base64');
  // Padding is optional in the schema's pattern; anything else that differs is not canonical.
  if (canonical !== s && !(canonical.length - s.length <= 2 && canonical.startsWith(s) && /^=*$/.test(canonical.slice(s.length)))) return null;
  const hashes = new BigUint64Array(bytes.length / 8);
  new Uint8Array(hashes.buffer).set(bytes);
  return { hashes, canonical };
}

// --- the decoder -------------------------------------------------------------------

interface Bulk {
  tokens: Uint32Array | null;
  hashes: { hashes: BigUint64Array; canonical: string } | null;
}

/** Decode a route request; the same accepted values and rejections as `routeRequestCodec.decode`. */
export function decodeRouteRequest(data: Uint8Array, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES): DecodeResult<DecodedRoute> {
  if (data.byteLength > maxBytes) return slow(data, maxBytes);
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let json: unknown;
  let arrays: readonly Uint32Array[] = [];
  try {
    if (buf.indexOf(TOKEN_KEY) >= 0) {
      const x = extractTokenArrays(data);
      if (x === null) return slow(data);
      arrays = x.arrays;
      json = JSON.parse(x.text);
    } else {
      const t = text(data, 0, data.byteLength);
      if (t === null) return slow(data);
      json = JSON.parse(t);
    }
  } catch {
    return slow(data);
  }
  const candidates = (json as { candidates?: Record<string, unknown> } | null)?.candidates;
  if (typeof candidates !== 'object' || candidates === null) return slow(data);
  const bulk: Record<Role, Bulk> = { efficient: { tokens: null, hashes: null }, capable: { tokens: null, hashes: null } };
  for (const role of ROLES) {
    const prompt = (candidates[role] as { prompt?: Record<string, unknown> } | undefined)?.prompt;
    if (typeof prompt !== 'object' || prompt === null || Array.isArray(prompt)) continue;
    const t = prompt['tokenIds'];
    if (Array.isArray(t)) {
      // Every `"tokenIds": [...]` member was replaced by `[k]`, so an array here is a placeholder.
      const k = t[0] as number;
      const values = arrays[k];
      if (t.length !== 1 || values === undefined || values.length > MAX_TOKEN_IDS) return slow(data);
      bulk[role].tokens = values;
      prompt['tokenIds'] = [];
    }
    const h = prompt['localHashesLe64'];
    if (typeof h === 'string') {
      const d = le64(h);
      if (d === null) return slow(data);
      bulk[role].hashes = d;
      prompt['localHashesLe64'] = '';
    }
  }
  const r = routeRequestCodec.fromWire(json);
  if (!r.ok) return slow(data); // the codec's own rejection, from the untouched bytes
  const req = r.value;
  const le64s: Record<Role, string | null> = { efficient: null, capable: null };
  const fill = (role: Role): RouteCandidate => {
    const c = req.candidates[role];
    const b = bulk[role];
    let prompt: PromptSpec = c.prompt;
    if (prompt.kind === 'token_ids' && b.tokens !== null) prompt = { kind: 'token_ids', tokenIds: b.tokens, loraName: prompt.loraName };
    else if (prompt.kind === 'local_hashes' && b.hashes !== null) {
      prompt = { kind: 'local_hashes', localHashes: b.hashes.hashes, loraName: prompt.loraName };
      le64s[role] = b.hashes.canonical;
    }
    return prompt === c.prompt ? c : { ...c, prompt };
  };
  const candidatesOut = { efficient: fill('efficient'), capable: fill('capable') };
  return { ok: true, value: { req: { ...req, candidates: candidatesOut }, le64: le64s } };
}
