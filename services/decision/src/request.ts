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
 *     schema's pattern;
 *   - the codec's `fromWire` then validates everything else, with empty
 *     prompts in place of the bulk.
 *
 * Whenever the fast path is not sure (non-ASCII text, an escaped key, a number
 * that is not a plain integer, a base64 string that is not canonical, ...), the
 * request is decoded by the codec alone from the original bytes: accepted and
 * rejected requests, and rejection codes, are the codec's.
 */
import { isAscii } from 'node:buffer';
// MAX_LE64_CHARS and MAX_TOKEN_IDS: the schema's bounds, checked here for the parts taken out of the codec's view.
import { DEFAULT_MAX_PAYLOAD_BYTES, MAX_LE64_CHARS, MAX_TOKENS as MAX_TOKEN_IDS, routeRequestCodec, type DecodeResult, type PromptSpec, type RouteCandidate, type RouteRequest } from '@vantage/protocol';

type Role = 'efficient' | 'capable';
const ROLES: readonly Role[] = ['efficient', 'capable'];

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

function slow(data: Uint8Array, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES): DecodeResult<RouteRequest> {
  return routeRequestCodec.decode(data, maxBytes);
}

// --- token-id arrays -----------------------------------------------------------------

const TOKEN_KEY = Buffer.from('"tokenIds"');
const HASH_KEY = Buffer.from('"localHashesLe64"');
const PLACEHOLDER = /^@(?:0|[1-9][0-9]*)$/;
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
 * fraction, exponent or leading zero) within u32, whitespace allowed between tokens. Returns the
 * values and the index after `]`, or null when the array is anything else (the codec then decides).
 * Digits are read in a tight inner loop; past the end of `b`, reads give undefined, which no test
 * below accepts.
 */
function parseU32Array(b: Uint8Array, at: number): { values: Uint32Array; end: number } | null {
  let out = scratch;
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
      if (count >= MAX_TOKEN_IDS) return null;
      const bigger = new Uint32Array(out.length * 2);
      bigger.set(out);
      out = scratch = bigger;
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

interface Extracted {
  readonly text: string;
  /** Token-id arrays, replaced in `text` by `[k]`. */
  readonly arrays: readonly Uint32Array[];
  /** The bytes of each base64 hash string (views of the request), replaced in `text` by `"@k"`. */
  readonly strings: readonly Buffer[];
}

/**
 * Every `"tokenIds": [ ... ]` member, parsed and replaced by `[k]` (k its index in `arrays`), and
 * every `"localHashesLe64": "..."` member, its string taken out and replaced by `"@k"`, so that
 * `JSON.parse` sees only the small rest of the request.
 *
 * Only for text without backslashes: then every quote opens or closes a string, no key is written
 * with escapes, no string holds an escaped quote, and a key outside a string followed by `:` is that
 * member's key. null when the text is not one the scanner is sure about.
 */
function extractBulk(b: Uint8Array): Extracted | null {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.indexOf(BS) >= 0) return null;
  const arrays: Uint32Array[] = [];
  const arrayRanges: { start: number; end: number }[] = [];
  const strings: Buffer[] = [];
  const cuts: { start: number; end: number; placeholder: string }[] = [];
  let inString = false;
  let pos = 0; // the string state is known at pos
  let nextTok = buf.indexOf(TOKEN_KEY, 0);
  let nextHash = buf.indexOf(HASH_KEY, 0);
  while (nextTok >= 0 || nextHash >= 0) {
    const isTok = nextHash < 0 || (nextTok >= 0 && nextTok < nextHash);
    const k = isTok ? nextTok : nextHash;
    for (let q = buf.indexOf(Q, pos); q >= 0 && q < k; q = buf.indexOf(Q, q + 1)) inString = !inString;
    pos = k + (isTok ? TOKEN_KEY.length : HASH_KEY.length);
    // Inside a string: its closing quote is k, and the key's letters would follow it. Not an encoder's text.
    if (inString) return null;
    let i = pos;
    while (i < b.length && isWs(b[i]!)) i++;
    if (b[i] === COLON) {
      i++;
      while (i < b.length && isWs(b[i]!)) i++;
      if (isTok && b[i] === LBRACK) {
        // The same bytes as an earlier array (both candidates' prompts, usually): parse once.
        let parsed: { values: Uint32Array; end: number } | null = null;
        for (let a = 0; a < arrayRanges.length && parsed === null; a++) {
          const r = arrayRanges[a]!;
          const len = r.end - r.start;
          if (i + len <= b.length && buf.compare(buf, r.start, r.end, i, i + len) === 0) parsed = { values: arrays[a]!, end: i + len };
        }
        parsed ??= parseU32Array(b, i);
        if (parsed === null) return null;
        cuts.push({ start: i, end: parsed.end, placeholder: `[${arrays.length}]` });
        arrays.push(parsed.values);
        arrayRanges.push({ start: i, end: parsed.end });
        pos = parsed.end;
      } else if (!isTok && b[i] === Q) {
        const end = buf.indexOf(Q, i + 1);
        if (end < 0) return null;
        cuts.push({ start: i, end: end + 1, placeholder: `"@${strings.length}"` });
        strings.push(buf.subarray(i + 1, end));
        pos = end + 1;
      }
      // Anything else (a string value spelled like the key, a value of another type): left to JSON.parse and the codec.
    }
    if (nextTok >= 0 && nextTok < pos) nextTok = buf.indexOf(TOKEN_KEY, pos);
    if (nextHash >= 0 && nextHash < pos) nextHash = buf.indexOf(HASH_KEY, pos);
  }
  let out = '';
  let from = 0;
  for (const c of cuts) {
    const t = text(b, from, c.start);
    if (t === null) return null;
    out += t + c.placeholder;
    from = c.end;
  }
  const tail = text(b, from, b.length);
  if (tail === null) return null;
  return { text: out + tail, arrays, strings };
}

// --- base64 hash lists -----------------------------------------------------------------

interface Le64 {
  readonly hashes: BigUint64Array;
  /** The request's bytes they were decoded from (the other candidate's identical string is not decoded again). */
  readonly text: Buffer;
}

/** Canonical base64 of whole u64s: the hashes, or null (the codec decides). */
function le64(b: Buffer): Le64 | null {
  if (b.length > MAX_LE64_CHARS) return null;
  const s = b.toString('latin1');
  const bytes = Buffer.from(s, 'base64');
  if (bytes.length % 8 !== 0) return null;
  const canonical = bytes.toString('base64');
  // Padding is optional in the schema's pattern; anything else that differs is not canonical.
  if (canonical !== s && !(canonical.length - s.length <= 2 && canonical.startsWith(s) && /^=*$/.test(canonical.slice(s.length)))) return null;
  const hashes = new BigUint64Array(bytes.length / 8);
  new Uint8Array(hashes.buffer).set(bytes);
  return { hashes, text: b };
}

// --- the decoder -------------------------------------------------------------------

interface Bulk {
  tokens: Uint32Array | null;
  hashes: Le64 | null;
}

/** Decode a route request; the same accepted values and rejections as `routeRequestCodec.decode`. */
export function decodeRouteRequest(data: Uint8Array, maxBytes = DEFAULT_MAX_PAYLOAD_BYTES): DecodeResult<RouteRequest> {
  if (data.byteLength > maxBytes) return slow(data, maxBytes);
  let json: unknown;
  let bulk0: Extracted | null;
  try {
    bulk0 = extractBulk(data);
    if (bulk0 === null) return slow(data, maxBytes);
    json = JSON.parse(bulk0.text);
  } catch {
    return slow(data, maxBytes);
  }
  const { arrays, strings } = bulk0;
  const candidates = (json as { candidates?: Record<string, unknown> } | null)?.candidates;
  if (typeof candidates !== 'object' || candidates === null) return slow(data, maxBytes);
  const bulk: Record<Role, Bulk> = { efficient: { tokens: null, hashes: null }, capable: { tokens: null, hashes: null } };
  for (const role of ROLES) {
    const prompt = (candidates[role] as { prompt?: Record<string, unknown> } | undefined)?.prompt;
    if (typeof prompt !== 'object' || prompt === null || Array.isArray(prompt)) continue;
    const t = prompt['tokenIds'];
    if (Array.isArray(t)) {
      // Every `"tokenIds": [...]` member was replaced by `[k]`, so an array here is a placeholder.
      const k = t[0] as number;
      const values = arrays[k];
      if (t.length !== 1 || values === undefined || values.length > MAX_TOKEN_IDS) return slow(data, maxBytes);
      bulk[role].tokens = values;
      prompt['tokenIds'] = [];
    }
    const h = prompt['localHashesLe64'];
    if (typeof h === 'string') {
      // Every `"localHashesLe64": "..."` member was replaced by `"@k"`.
      const b = PLACEHOLDER.test(h) ? strings[Number(h.slice(1))] : undefined;
      // Both candidates' hashes are often the same (same tokens, same block size): check them once.
      const e = bulk.efficient.hashes;
      const d = b === undefined ? null : role === 'capable' && e !== null && b.equals(e.text) ? e : le64(b);
      if (d === null) return slow(data, maxBytes);
      bulk[role].hashes = d;
      prompt['localHashesLe64'] = '';
    }
  }
  const r = routeRequestCodec.fromWire(json);
  if (!r.ok) return slow(data, maxBytes); // the codec's own rejection, from the untouched bytes
  const req = r.value;
  const fill = (role: Role): RouteCandidate => {
    const c = req.candidates[role];
    const b = bulk[role];
    let prompt: PromptSpec = c.prompt;
    if (prompt.kind === 'token_ids' && b.tokens !== null) prompt = { kind: 'token_ids', tokenIds: b.tokens, loraName: prompt.loraName };
    else if (prompt.kind === 'local_hashes' && b.hashes !== null) prompt = { kind: 'local_hashes', localHashes: b.hashes.hashes, loraName: prompt.loraName };
    return prompt === c.prompt ? c : { model: c.model, pool: c.pool, prompt, promptTokens: c.promptTokens };
  };
  const candidates2 = { efficient: fill('efficient'), capable: fill('capable') };
  return { ok: true, value: { requestId: req.requestId, sessionId: req.sessionId, stageProposal: req.stageProposal, candidates: candidates2, deadlineMs: req.deadlineMs } };
}
