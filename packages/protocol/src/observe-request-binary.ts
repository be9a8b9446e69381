/**
 * The observe request in its compact binary encoding: the same content as the JSON request
 * (schemas/protocol/observe-request.v1.json), with the prompt's hashes (or token ids) as raw
 * little-endian integers, so a receiver copies them instead of decoding base64 out of JSON text.
 * A 32k-token prompt is 4 KiB of hashes instead of 5.5 KiB of base64, and taking it apart costs a
 * copy: in the running indexer, decoding the JSON request was its largest single step (a median of
 * 22 µs of the ~100 µs it spends on a query; services/indexer/README.md).
 *
 * Layout (little-endian; documented in schemas/protocol/README.md):
 *
 *   0  u32  magic 0x01514F56 ("VOQ" 0x01)
 *   4  u32  flags: 1 workers "choice", 2 replyEncoding "binary", 4 prompt is token ids (else local
 *           hashes), 8 loraName present (a null or absent loraName has no bytes and no flag)
 *   8  f64  promptTokens
 *   16 u32  count: local hashes (u64 each) or token ids (u32 each)
 *   20 u16  requestId length in bytes (0: absent), 22 u16 loraName length in bytes
 *   24      the list, then requestId (UTF-8), then loraName (UTF-8); nothing after
 *
 * Decoding rebuilds the JSON request's wire object and validates it with the same schema, so both
 * encodings accept and reject exactly the same requests (a framing error is `malformed_binary`),
 * except for the fast path below, which takes only requests the schema certainly accepts.
 */
import { MAX_HASHES } from './schemas';
import { ID_MAX_LENGTH } from './ids';
import type { ObserveRequest } from './messages';
import type { Le64Scratch } from './scratch';

const OBSERVE_REQUEST_BINARY_MAGIC = 0x01514f56;
const OBSERVE_REQUEST_HEADER_BYTES = 24;

const FLAG_CHOICE = 1;
const FLAG_BINARY_REPLY = 2;
const FLAG_TOKEN_IDS = 4;
const FLAG_LORA = 8;
const KNOWN_FLAGS = FLAG_CHOICE | FLAG_BINARY_REPLY | FLAG_TOKEN_IDS | FLAG_LORA;
/** Longest request id the schema accepts, in characters. */
const REQUEST_ID_MAX = ID_MAX_LENGTH;

/** True when the bytes start with the binary observe request's magic (JSON never starts with 'V'). */
export function isObserveRequestBinary(data: Uint8Array): boolean {
  return data.byteLength >= 4 && data[0] === 0x56 && data[1] === 0x4f && data[2] === 0x51 && data[3] === 0x01;
}

/** The binary form of an observe request (any request the JSON codec encodes). */
export function encodeObserveRequestBinary(r: ObserveRequest): Uint8Array {
  const p = r.prompt;
  // Length 0 stands for an absent id, so an empty one (which the schema refuses anyway) cannot be written.
  if (r.requestId === '') throw new RangeError('observe request: requestId must not be empty');
  const id = r.requestId === null ? null : Buffer.from(r.requestId, 'utf8');
  const lora = p.loraName === null ? null : Buffer.from(p.loraName, 'utf8');
  const list = p.kind === 'local_hashes' ? p.localHashes : p.tokenIds;
  const listBytes = list.byteLength;
  const idBytes = id === null ? 0 : id.length;
  const loraBytes = lora === null ? 0 : lora.length;
  if (idBytes > 0xffff || loraBytes > 0xffff) throw new RangeError('observe request: requestId or loraName longer than 65,535 bytes');
  const out = Buffer.alloc(OBSERVE_REQUEST_HEADER_BYTES + listBytes + idBytes + loraBytes);
  out.writeUInt32LE(OBSERVE_REQUEST_BINARY_MAGIC, 0);
  out.writeUInt32LE(
    (r.workers === 'choice' ? FLAG_CHOICE : 0) | (r.replyEncoding === 'binary' ? FLAG_BINARY_REPLY : 0) | (p.kind === 'token_ids' ? FLAG_TOKEN_IDS : 0) | (lora === null ? 0 : FLAG_LORA),
    4,
  );
  out.writeDoubleLE(r.promptTokens, 8);
  out.writeUInt32LE(list.length, 16);
  out.writeUInt16LE(idBytes, 20);
  out.writeUInt16LE(loraBytes, 22);
  // Typed arrays hold their elements in the platform's order; every platform Node runs on here is little-endian.
  out.set(new Uint8Array(list.buffer, list.byteOffset, listBytes), OBSERVE_REQUEST_HEADER_BYTES);
  if (id !== null) out.set(id, OBSERVE_REQUEST_HEADER_BYTES + listBytes);
  if (lora !== null) out.set(lora, OBSERVE_REQUEST_HEADER_BYTES + listBytes + idBytes);
  return out;
}

type RequestBinaryToWire = { ok: true; wire: Record<string, unknown> } | { ok: false; reason: string };

const utf8dec = new TextDecoder('utf-8', { fatal: true });

/** A binary request's header, checked against its length (what `frameObserveRequest` returns). */
interface Frame {
  /** The message's bytes as given, and as a Buffer view. */
  readonly data: Uint8Array;
  readonly buf: Buffer;
  readonly flags: number;
  readonly promptTokens: number;
  readonly count: number;
  readonly idLen: number;
  readonly loraLen: number;
  /** Byte length of the list. */
  readonly listBytes: number;
}

/** The header's fields when the framing holds (magic, known flags, lengths adding up to the message), else the reason it does not. */
export function frameObserveRequest(data: Uint8Array): Frame | string {
  const H = OBSERVE_REQUEST_HEADER_BYTES;
  if (data.byteLength < H || !isObserveRequestBinary(data)) return `not a binary observe request (${data.byteLength} bytes)`;
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const flags = b.readUInt32LE(4);
  if ((flags & ~KNOWN_FLAGS) !== 0) return `unknown flags 0x${(flags & ~KNOWN_FLAGS).toString(16)}`;
  const count = b.readUInt32LE(16);
  const idLen = b.readUInt16LE(20);
  const loraLen = b.readUInt16LE(22);
  if ((flags & FLAG_LORA) === 0 && loraLen !== 0) return 'loraName bytes without the loraName flag';
  const listBytes = count * ((flags & FLAG_TOKEN_IDS) !== 0 ? 4 : 8);
  const want = H + listBytes + idLen + loraLen;
  if (data.byteLength !== want) return `${data.byteLength} bytes where the header describes ${want}`;
  return { data, buf: b, flags, promptTokens: b.readDoubleLE(8), count, idLen, loraLen, listBytes };
}

/**
 * The JSON request's wire object from binary bytes, for the schema validation and conversion every
 * JSON request gets. Only framing is checked here (magic, flags, lengths, UTF-8 of the strings).
 */
export function observeRequestBinaryToWire(data: Uint8Array): RequestBinaryToWire {
  const f = frameObserveRequest(data);
  return typeof f === 'string' ? { ok: false, reason: f } : wireOfFrame(f);
}

/** `observeRequestBinaryToWire` of an already framed request. */
export function wireOfFrame(f: Frame): RequestBinaryToWire {
  const H = OBSERVE_REQUEST_HEADER_BYTES;
  const b = f.buf;
  let requestId: string | undefined;
  let loraName: string | undefined;
  try {
    if (f.idLen > 0) requestId = utf8dec.decode(b.subarray(H + f.listBytes, H + f.listBytes + f.idLen));
    if ((f.flags & FLAG_LORA) !== 0) loraName = utf8dec.decode(b.subarray(H + f.listBytes + f.idLen, b.length));
  } catch {
    return { ok: false, reason: 'requestId or loraName is not valid UTF-8' };
  }
  const list = b.subarray(H, H + f.listBytes);
  const prompt: Record<string, unknown> = {};
  if ((f.flags & FLAG_TOKEN_IDS) !== 0) {
    const ids = new Array<number>(f.count);
    for (let i = 0; i < f.count; i++) ids[i] = list.readUInt32LE(4 * i);
    prompt.tokenIds = ids;
  } else prompt.localHashesLe64 = list.toString('base64');
  if (loraName !== undefined) prompt.loraName = loraName;
  return {
    ok: true,
    wire: {
      v: 1,
      ...(requestId === undefined ? {} : { requestId }),
      prompt,
      promptTokens: f.promptTokens,
      ...((f.flags & FLAG_CHOICE) !== 0 ? { workers: 'choice' } : {}),
      ...((f.flags & FLAG_BINARY_REPLY) !== 0 ? { replyEncoding: 'binary' } : {}),
    },
  };
}

/**
 * The common request (local hashes, no LoRA name, a request id absent or of printable ASCII) decoded
 * without building its wire object: every check the schema would make is made here, so what this
 * returns is what the general path returns for the same bytes. The hashes are copied into `into`
 * (overwritten by the next call given it) or into a new array. Anything else returns null and takes
 * the general path, which decides. Tested against the general path on encoder output and mutations.
 */
export function observeRequestBinaryFast(data: Uint8Array, into?: Le64Scratch): { ok: true; value: ObserveRequest } | null {
  const f = frameObserveRequest(data);
  return typeof f === 'string' ? null : fastOfFrame(f, into);
}

/**
 * The fast paths' rule, past framing: what the schema certainly accepts and they take. Local hashes
 * without a LoRA name, at most MAX_HASHES of them, `promptTokens` a non-negative safe integer, a
 * request id absent or of at most REQUEST_ID_MAX printable ASCII bytes (at `idAt` in `data`).
 */
function fastShape(data: Uint8Array, flags: number, count: number, promptTokens: number, idAt: number, idLen: number): boolean {
  if ((flags & (FLAG_TOKEN_IDS | FLAG_LORA)) !== 0) return false;
  if (count > MAX_HASHES || !Number.isSafeInteger(promptTokens) || promptTokens < 0 || idLen > REQUEST_ID_MAX) return false;
  for (let i = idAt; i < idAt + idLen; i++) {
    const c = data[i]!;
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** `observeRequestBinaryFast` of an already framed request. */
export function fastOfFrame(f: Frame, into?: Le64Scratch): { ok: true; value: ObserveRequest } | null {
  const data = f.data;
  const H = OBSERVE_REQUEST_HEADER_BYTES;
  const idAt = H + f.listBytes;
  if (!fastShape(data, f.flags, f.count, f.promptTokens, idAt, f.idLen)) return null;
  const requestId = f.idLen > 0 ? f.buf.toString('latin1', idAt, idAt + f.idLen) : null;
  const hashes = into === undefined ? new BigUint64Array(f.count) : into.take(f.count);
  new Uint8Array(hashes.buffer, hashes.byteOffset, f.listBytes).set(data.subarray(H, H + f.listBytes));
  return {
    ok: true,
    value: {
      requestId,
      prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null },
      promptTokens: f.promptTokens,
      workers: (f.flags & FLAG_CHOICE) !== 0 ? 'choice' : 'all',
      ...((f.flags & FLAG_BINARY_REPLY) !== 0 ? { replyEncoding: 'binary' as const } : {}),
    },
  };
}

/**
 * What the indexer's observe handler reads of a request, decoded by `decodeObserveRequestHot`
 * into this one reused record (its `localHashes` a view of its own buffer, or of the message when
 * that is aligned), overwritten by the next decode given it.
 */
export class ObserveRequestHot {
  localHashes: BigUint64Array = new BigUint64Array(0);
  /** Always null here: such requests take the full decoder. */
  readonly tokenIds = null;
  readonly loraName = null;
  promptTokens = 0;
  workers: 'all' | 'choice' = 'all';
  replyEncoding: 'json' | 'binary' = 'json';
  /** The hashes' buffer when the message's are not 8-byte aligned, its bytes, and its last view. */
  private buf = new BigUint64Array(0);
  private bufBytes = new Uint8Array(0);
  private view = new BigUint64Array(0);
  private readonly f64 = new Float64Array(1);
  private readonly f64Bytes = new Uint8Array(this.f64.buffer);

  /** @internal The request's n hashes at `at` in `data`: viewed in place when aligned, else copied into the reused buffer. */
  hashesOf(data: Uint8Array, at: number, n: number): BigUint64Array {
    const off = data.byteOffset + at;
    if (off % 8 === 0) return new BigUint64Array(data.buffer, off, n);
    if (this.buf.length < n) {
      this.buf = new BigUint64Array(Math.max(n, 2 * this.buf.length));
      this.bufBytes = new Uint8Array(this.buf.buffer);
    }
    this.bufBytes.set(data.subarray(at, at + 8 * n));
    if (this.view.length !== n) this.view = this.buf.subarray(0, n);
    return this.view;
  }

  /** @internal The f64 at `at` in `data` (little-endian, as every host this runs on). */
  f64At(data: Uint8Array, at: number): number {
    const b = this.f64Bytes;
    for (let i = 0; i < 8; i++) b[i] = data[at + i]!;
    return this.f64[0]!;
  }
}

const u32At = (d: Uint8Array, o: number): number => (d[o]! | (d[o + 1]! << 8) | (d[o + 2]! << 16) | (d[o + 3]! << 24)) >>> 0;

/**
 * The fast path's requests (binary, local hashes, no LoRA name, a request id absent or of
 * printable ASCII, within `maxBytes`), decoded into `into` with nothing allocated but, when the
 * message's hashes are not 8-byte aligned, nothing at all: the header read byte by byte, the
 * request id checked but not made into a string (the handler does not read it). True when taken;
 * false for every other request, which the caller then decodes in full (and which may be refused).
 * Takes exactly the requests `observeRequestBinaryFast` takes, with the same values; tested
 * against it on encoder output and mutations. After a millisecond of idling it took 5.3–6.2 µs where
 * the full decoder took 11.6–13.4 (`node --import tsx services/indexer/bench/hot-path.ts 3000
 * 'decodeTransient binary,decodeHot binary' --idle`; package README).
 */
export function decodeObserveRequestHot(data: Uint8Array, into: ObserveRequestHot, maxBytes: number): boolean {
  const H = OBSERVE_REQUEST_HEADER_BYTES;
  const len = data.byteLength;
  if (len < H || len > maxBytes || !isObserveRequestBinary(data)) return false;
  // Framing as `frameObserveRequest` checks it, for a request of local hashes without a LoRA name
  // (anything else fails `fastShape` anyway); then the fast paths' one rule.
  const flags = u32At(data, 4);
  const count = u32At(data, 16);
  const idLen = data[20]! | (data[21]! << 8);
  const loraLen = data[22]! | (data[23]! << 8);
  if ((flags & ~KNOWN_FLAGS) !== 0 || loraLen !== 0 || len !== H + 8 * count + idLen) return false;
  const promptTokens = into.f64At(data, 8);
  if (!fastShape(data, flags, count, promptTokens, H + 8 * count, idLen)) return false;
  into.localHashes = into.hashesOf(data, H, count);
  into.promptTokens = promptTokens;
  into.workers = (flags & FLAG_CHOICE) !== 0 ? 'choice' : 'all';
  into.replyEncoding = (flags & FLAG_BINARY_REPLY) !== 0 ? 'binary' : 'json';
  return true;
}
