/**
 * The fleet's serving protocol (fleet-internal JSON, not a Dynamo contract): subject, request and
 * progress messages as README.md's "Serving" section gives them. Decoding never throws: a malformed
 * request is a typed rejection answered with `failed`.
 */
import { ID_MAX_LENGTH, isValidId, SUBJECT_PREFIX } from '@vantage/protocol';

export const GENERATE_PREFIX = `${SUBJECT_PREFIX}.fleet.generate`;

export function generateSubject(pool: string, workerId: bigint): string {
  return `${GENERATE_PREFIX}.${pool}.${workerId.toString()}`;
}

export type PromptPayload =
  | { readonly kind: 'token_ids'; readonly tokens: Uint32Array }
  | { readonly kind: 'mooncake'; readonly hashIds: Uint32Array; readonly inputLength: number };

export interface GenerateRequest {
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly osl: number;
  readonly prompt: PromptPayload;
  readonly outputTokens: Uint32Array | null;
}

export type GenerateProgress =
  | { readonly kind: 'accepted'; readonly requestId: string; readonly workerId: string; readonly arrivalMs: number }
  | { readonly kind: 'first_token'; readonly requestId: string; readonly workerId: string; readonly atMs: number }
  | {
      readonly kind: 'done';
      readonly requestId: string;
      readonly workerId: string;
      readonly atMs: number;
      readonly arrivalMs: number;
      readonly firstTokenMs: number;
      readonly outputTokens: number;
      readonly reusedTokens: number;
      readonly isl: number;
      readonly preemptions: number;
    }
  | { readonly kind: 'failed'; readonly requestId: string; readonly workerId: string; readonly code: string; readonly reason: string };

type GenerateDecode = { ok: true; value: GenerateRequest } | { ok: false; code: 'malformed_json' | 'invalid_request'; reason: string; requestId: string | null };

const MAX_TOKENS = 4_000_000;
const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

/** u32 little-endian tokens as base64 (4 bytes a token instead of ~7 JSON characters). */
function tokensToB64(t: Uint32Array): string {
  return Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('base64');
}

function b64ToTokens(s: string): Uint32Array | string {
  const b = Buffer.from(s, 'base64');
  if (b.length % 4 !== 0) return 'base64 token data is not a whole number of u32s';
  const out = new Uint32Array(b.length / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}

function u32Array(v: unknown, what: string): Uint32Array | string {
  if (!Array.isArray(v)) return `${what} must be an array`;
  if (v.length > MAX_TOKENS) return `${what} has more than ${MAX_TOKENS} entries`;
  const out = new Uint32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffff_ffff) return `${what}[${i}] must be an integer in [0, 2^32)`;
    out[i] = x;
  }
  return out;
}

function tokens(v: unknown, what: string): Uint32Array | string {
  if (typeof v !== 'object' || v === null) return `${what} must be an object`;
  const o = v as Record<string, unknown>;
  if (o.kind === 'token_ids') return u32Array(o.tokenIds, `${what}.tokenIds`);
  if (o.kind === 'token_ids_b64') return typeof o.data === 'string' ? b64ToTokens(o.data) : `${what}.data must be a string`;
  return `${what}.kind must be token_ids or token_ids_b64`;
}

export function decodeGenerateRequest(data: Uint8Array): GenerateDecode {
  let o: unknown;
  try {
    o = JSON.parse(dec.decode(data));
  } catch (e) {
    return { ok: false, code: 'malformed_json', reason: (e as Error).message, requestId: null };
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return { ok: false, code: 'malformed_json', reason: 'not a JSON object', requestId: null };
  const r = o as Record<string, unknown>;
  const requestId = isValidId(r.requestId) ? r.requestId : null;
  const bad = (reason: string): GenerateDecode => ({ ok: false, code: 'invalid_request', reason, requestId });
  if (r.v !== 1) return bad('v must be 1');
  if (requestId === null) return bad(`requestId must be a string of 1..${ID_MAX_LENGTH} characters`);
  if (r.sessionId !== undefined && r.sessionId !== null && !isValidId(r.sessionId)) return bad(`sessionId must be a string of 1..${ID_MAX_LENGTH} characters`);
  if (typeof r.osl !== 'number' || !Number.isInteger(r.osl) || r.osl < 0 || r.osl > MAX_TOKENS) return bad('osl must be a non-negative integer');
  const p = r.prompt;
  if (typeof p !== 'object' || p === null) return bad('prompt must be an object');
  const po = p as Record<string, unknown>;
  let prompt: PromptPayload;
  if (po.kind === 'mooncake') {
    const ids = u32Array(po.hashIds, 'prompt.hashIds');
    if (typeof ids === 'string') return bad(ids);
    const n = po.inputLength;
    if (typeof n !== 'number' || !Number.isInteger(n) || n <= 0 || n > MAX_TOKENS) return bad('prompt.inputLength must be a positive integer');
    if (ids.length !== Math.ceil(n / 512)) return bad(`prompt.hashIds has ${ids.length} entries; inputLength ${n} needs ${Math.ceil(n / 512)}`);
    prompt = { kind: 'mooncake', hashIds: ids, inputLength: n };
  } else {
    const t = tokens(p, 'prompt');
    if (typeof t === 'string') return bad(t);
    if (t.length === 0) return bad('prompt is empty');
    prompt = { kind: 'token_ids', tokens: t };
  }
  let outputTokens: Uint32Array | null = null;
  if (r.outputTokens !== undefined && r.outputTokens !== null) {
    const t = tokens(r.outputTokens, 'outputTokens');
    if (typeof t === 'string') return bad(t);
    outputTokens = t;
  }
  return { ok: true, value: { requestId, sessionId: typeof r.sessionId === 'string' ? r.sessionId : null, osl: r.osl, prompt, outputTokens } };
}

/** Encodes a request (used by the load generator; token prompts go as base64). */
export function encodeGenerateRequest(r: GenerateRequest): Uint8Array {
  const prompt =
    r.prompt.kind === 'mooncake'
      ? { kind: 'mooncake', hashIds: Array.from(r.prompt.hashIds), inputLength: r.prompt.inputLength }
      : { kind: 'token_ids_b64', data: tokensToB64(r.prompt.tokens) };
  return enc.encode(
    JSON.stringify({
      v: 1,
      requestId: r.requestId,
      ...(r.sessionId === null ? {} : { sessionId: r.sessionId }),
      osl: r.osl,
      prompt,
      ...(r.outputTokens === null ? {} : { outputTokens: { kind: 'token_ids_b64', data: tokensToB64(r.outputTokens) } }),
    }),
  );
}

export function encodeProgress(p: GenerateProgress): Uint8Array {
  return enc.encode(JSON.stringify(p));
}

export function decodeProgress(data: Uint8Array): GenerateProgress | null {
  try {
    const o = JSON.parse(dec.decode(data)) as unknown;
    if (typeof o !== 'object' || o === null) return null;
    const k = (o as { kind?: unknown }).kind;
    if (k === 'accepted' || k === 'first_token' || k === 'done' || k === 'failed') return o as GenerateProgress;
    return null;
  } catch {
    return null;
  }
}
