/**
 * The observe request in its compact binary encoding: the same content as the JSON request
 * (schemas/protocol/observe-request.v1.json), with the prompt's hashes (or token ids) as raw
 * little-endian integers, so a receiver copies them instead of decoding base64 out of JSON text.
 * A 32k-token prompt is 4 KiB of hashes instead of 5.5 KiB of base64, and taking it apart costs a
 * copy.
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
 * How it is decoded and validated: package README, "Codecs".
 */
import { MAX_HASHES } from './schemas';
import { utf8 } from './observe-binary';
import type { ObserveRequest } from './messages';

const OBSERVE_REQUEST_BINARY_MAGIC = 0x01514f56;
const OBSERVE_REQUEST_HEADER_BYTES = 24;

const FLAG_CHOICE = 1;
const FLAG_BINARY_REPLY = 2;
const FLAG_TOKEN_IDS = 4;
const FLAG_LORA = 8;
const KNOWN_FLAGS = FLAG_CHOICE | FLAG_BINARY_REPLY | FLAG_TOKEN_IDS | FLAG_LORA;

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

type RequestBinaryToWire =
  | { ok: true; wire: Record<string, unknown>; localHashes: BigUint64Array | null }
  | { ok: false; reason: string };

/**
 * The JSON request's wire object from binary bytes, with the local hashes beside it (package README,
 * "Codecs"); only framing is checked here. Past MAX_HASHES the list is written out as base64
 * instead, so that the schema refuses it with its own reason.
 */
export function observeRequestBinaryToWire(data: Uint8Array): RequestBinaryToWire {
  const H = OBSERVE_REQUEST_HEADER_BYTES;
  if (data.byteLength < H || !isObserveRequestBinary(data)) return { ok: false, reason: `not a binary observe request (${data.byteLength} bytes)` };
  const b = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const flags = b.readUInt32LE(4);
  if ((flags & ~KNOWN_FLAGS) !== 0) return { ok: false, reason: `unknown flags 0x${(flags & ~KNOWN_FLAGS).toString(16)}` };
  const count = b.readUInt32LE(16);
  const idLen = b.readUInt16LE(20);
  const loraLen = b.readUInt16LE(22);
  if ((flags & FLAG_LORA) === 0 && loraLen !== 0) return { ok: false, reason: 'loraName bytes without the loraName flag' };
  const tokenIds = (flags & FLAG_TOKEN_IDS) !== 0;
  const listBytes = count * (tokenIds ? 4 : 8);
  const want = H + listBytes + idLen + loraLen;
  if (b.length !== want) return { ok: false, reason: `${b.length} bytes where the header describes ${want}` };
  let requestId: string | undefined;
  let loraName: string | undefined;
  try {
    if (idLen > 0) requestId = utf8.decode(b.subarray(H + listBytes, H + listBytes + idLen));
    if ((flags & FLAG_LORA) !== 0) loraName = utf8.decode(b.subarray(H + listBytes + idLen, b.length));
  } catch {
    return { ok: false, reason: 'requestId or loraName is not valid UTF-8' };
  }
  const list = b.subarray(H, H + listBytes);
  const prompt: Record<string, unknown> = {};
  let localHashes: BigUint64Array | null = null;
  if (tokenIds) {
    const ids = new Array<number>(count);
    for (let i = 0; i < count; i++) ids[i] = list.readUInt32LE(4 * i);
    prompt.tokenIds = ids;
  } else if (count > MAX_HASHES) prompt.localHashesLe64 = list.toString('base64');
  else {
    // Copied into a buffer of their own: the message's bytes are seldom 8-byte aligned, and its buffer is the transport's.
    localHashes = new BigUint64Array(count);
    new Uint8Array(localHashes.buffer).set(list);
    prompt.localHashesLe64 = '';
  }
  if (loraName !== undefined) prompt.loraName = loraName;
  return {
    ok: true,
    wire: {
      v: 1,
      ...(requestId === undefined ? {} : { requestId }),
      prompt,
      promptTokens: b.readDoubleLE(8),
      ...((flags & FLAG_CHOICE) !== 0 ? { workers: 'choice' } : {}),
      ...((flags & FLAG_BINARY_REPLY) !== 0 ? { replyEncoding: 'binary' } : {}),
    },
    localHashes,
  };
}
