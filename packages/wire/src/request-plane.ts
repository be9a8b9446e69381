/**
 * Dynamo's TCP request plane (lib/runtime `pipeline/network`), as far as a client of one endpoint
 * needs it, and the worker-local KV index query carried over it (lib/kv-router `indexer`,
 * `WorkerKvQueryRequest` / `WorkerKvQueryResponse`). The frames, messages and the order of a call
 * are laid out in the package README (checked against bytes Dynamo 1.6.1 wrote:
 * test/fixtures/worker-kv-query-1.6.1.json).
 */
import type { KvEvent, WorkerId } from '@vantage/types';
import { readJson } from './json';
import { resolveLimits, type WireLimits } from './limits';
import { Fields, readMsgpack, writeMsgpack } from './msgpack';
import { guard, WireReject, type Result } from './result';
import { routerEventList } from './router-event';
import { asMap, bool, get, isMap, optional, required, str, u64, variant } from './values';

const utf8 = new TextEncoder();
// Not fatal: a header of invalid UTF-8 is simply not the sentinel (isStreamSentinel never throws).
const utf8Text = new TextDecoder();

// --- request frame ------------------------------------------------------------

export interface TcpRequestFrame {
  readonly endpointPath: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly payload: Uint8Array;
}

/** The request-plane frame for one call. Throws RangeError when a part exceeds its length field. */
export function encodeTcpRequest(f: TcpRequestFrame): Uint8Array {
  const path = utf8.encode(f.endpointPath);
  const headers = utf8.encode(JSON.stringify(f.headers));
  if (path.length > 0xffff) throw new RangeError(`endpoint path of ${path.length} bytes exceeds 65535`);
  if (headers.length > 0xffff) throw new RangeError(`headers of ${headers.length} bytes exceed 65535`);
  if (f.payload.length > 0xffff_ffff) throw new RangeError('payload exceeds 4 GiB');
  const out = new Uint8Array(2 + path.length + 2 + headers.length + 4 + f.payload.length);
  const dv = new DataView(out.buffer);
  let o = 0;
  dv.setUint16(o, path.length);
  out.set(path, (o += 2));
  dv.setUint16((o += path.length), headers.length);
  out.set(headers, (o += 2));
  dv.setUint32((o += headers.length), f.payload.length);
  out.set(f.payload, (o += 4));
  return out;
}

// --- two-part messages ----------------------------------------------------------

export interface TwoPartMessage {
  readonly header: Uint8Array;
  readonly body: Uint8Array;
}

export function encodeTwoPart(m: TwoPartMessage): Uint8Array {
  const out = new Uint8Array(24 + m.header.length + m.body.length);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(0, BigInt(m.header.length));
  dv.setBigUint64(8, BigInt(m.body.length));
  dv.setBigUint64(16, 0n); // release builds write 0 (debug builds xxh3 of header+body, not checked here)
  out.set(m.header, 24);
  out.set(m.body, 24 + m.header.length);
  return out;
}

/**
 * Cuts a byte stream into frames: two-part messages (`kind: 'two_part'`, the response stream and a
 * request's payload) or acknowledgements (`kind: 'ack'`, u32 length + data). Feed chunks as they
 * arrive; `next()` returns a frame, null while one is incomplete, or a rejection (a length past
 * `maxFrameBytes`), after which the stream is unusable.
 */
export class FrameReader {
  private buf: Uint8Array = new Uint8Array(0);
  private failed: Extract<Result<never>, { ok: false }> | null = null;

  constructor(
    readonly kind: 'two_part' | 'ack',
    readonly maxFrameBytes: number,
  ) {}

  push(chunk: Uint8Array): void {
    if (this.buf.length === 0) {
      this.buf = chunk;
      return;
    }
    const b = new Uint8Array(this.buf.length + chunk.length);
    b.set(this.buf);
    b.set(chunk, this.buf.length);
    this.buf = b;
  }

  /** Bytes received and not yet returned as a frame. */
  get pending(): number {
    return this.buf.length;
  }

  next(): Result<TwoPartMessage> | null {
    if (this.failed) return this.failed;
    const b = this.buf;
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const twoPart = this.kind === 'two_part';
    const start = twoPart ? 24 : 4;
    if (b.length < start) return null;
    const h = twoPart ? dv.getBigUint64(0) : 0n;
    const l = twoPart ? dv.getBigUint64(8) : BigInt(dv.getUint32(0));
    const size = BigInt(start) + h + l;
    if (size > BigInt(this.maxFrameBytes)) {
      this.failed = { ok: false, code: 'too_large', reason: `${twoPart ? 'two-part frame' : 'acknowledgement'} of ${size} bytes exceeds ${this.maxFrameBytes}` };
      return this.failed;
    }
    const end = Number(size);
    if (b.length < end) return null;
    const frame = { header: b.slice(start, start + Number(h)), body: b.slice(start + Number(h), end) };
    this.buf = b.subarray(end);
    return { ok: true, value: frame };
  }
}

// --- control message and response stream ----------------------------------------

interface RequestControl {
  /** The request id (also the `request-id` header and the stream's `context`). */
  readonly id: string;
  /** `host:port` of the caller's response-stream server, as the worker must dial it. */
  readonly responseAddress: string;
  /** Names this call's stream to the response-stream server (the handshake echoes it). */
  readonly subject: string;
}

/** The control message (the two-part header of a request's payload), JSON as Dynamo's router writes it. */
export function encodeRequestControl(c: RequestControl): Uint8Array {
  const info = JSON.stringify({ address: c.responseAddress, subject: c.subject, context: c.id, stream_type: 'response' });
  return utf8.encode(
    JSON.stringify({
      id: c.id,
      request_type: 'single_in',
      response_type: 'many_out',
      payload_codec: 'msgpack',
      connection_info: { transport: 'tcp_server', info },
    }),
  );
}

/** The handshake a worker sends first on a response stream: which call it answers. */
export function decodeStreamHandshake(header: Uint8Array): Result<{ subject: string; streamType: string }> {
  return guard(() => {
    const m = asMap(readJson(header, 64 * 1024, 8), 'handshake');
    return {
      subject: str(required(m, 'subject', 'handshake'), 'handshake.subject', 256),
      streamType: str(required(m, 'stream_type', 'handshake'), 'handshake.stream_type', 64),
    };
  });
}

/** The prologue after the handshake: null when the worker started the stream, else its error. */
export function decodeStreamPrologue(header: Uint8Array): Result<string | null> {
  return guard(() => {
    const m = asMap(readJson(header, 1024 * 1024, 8), 'prologue');
    const e = get(m, 'error');
    if (e === undefined || e === null) return null;
    return typeof e === 'string' ? e.slice(0, 4096) : JSON.stringify(e, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x)).slice(0, 4096);
  });
}

/** True for the header-only frame that ends a response stream. */
export function isStreamSentinel(m: TwoPartMessage): boolean {
  return m.body.length === 0 && m.header.length === 10 && utf8Text.decode(m.header) === '"sentinel"';
}

// --- the worker KV query ------------------------------------------------------------

interface WorkerKvQueryRequest {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** First event id wanted (inclusive); null asks for the whole tree (a dump). */
  readonly startEventId: bigint | null;
  /** Last event id wanted (inclusive); null for up to the newest. */
  readonly endEventId: bigint | null;
}

/**
 * The request body, msgpack with named fields in declaration order, as 1.6.1's router sends it:
 * `{worker_id, dp_rank, start_event_id, end_event_id, supports_tree_dump_failed: true, kind: "recovery"}`.
 */
export function encodeWorkerKvQueryRequest(r: WorkerKvQueryRequest): Uint8Array {
  return writeMsgpack(
    new Fields([
      ['worker_id', r.workerId],
      ['dp_rank', r.dpRank],
      ['start_event_id', r.startEventId],
      ['end_event_id', r.endEventId],
      ['supports_tree_dump_failed', true],
      ['kind', 'recovery'],
    ]),
  );
}

export type WorkerKvQueryResponse =
  /** Buffered events with their real ids, from the requested start through the newest. */
  | { readonly kind: 'events'; readonly events: readonly KvEvent[]; readonly lastEventId: bigint }
  /** The worker's whole tree in replay order (synthetic ids from 0); `lastEventId` is its newest real id. */
  | { readonly kind: 'tree_dump'; readonly events: readonly KvEvent[]; readonly lastEventId: bigint }
  | { readonly kind: 'tree_dump_failed'; readonly lastEventId: bigint; readonly message: string }
  | { readonly kind: 'too_new'; readonly newestAvailable: bigint }
  | { readonly kind: 'invalid_range'; readonly startId: bigint; readonly endId: bigint }
  | { readonly kind: 'error'; readonly message: string };

/** One item of a response stream: the network wrapper `{data?, complete_final}`. */
interface WorkerKvQueryStreamItem {
  readonly response: WorkerKvQueryResponse | null;
  readonly completeFinal: boolean;
}

const events = (v: unknown, path: string, limits: WireLimits): KvEvent[] => routerEventList(v, limits, path, limits.maxBatchEvents * 256);

function responseFromValue(v: unknown, limits: WireLimits): WorkerKvQueryResponse {
  const { tag, content } = variant(v, 'response');
  const at = `response.${tag}`;
  const field = (key: string): unknown => required(asMap(content, at), key, at);
  const id = (key: string): bigint => u64(field(key), `${at}.${key}`);
  const message = (x: unknown, path: string): string => str(x, path, 1 << 20).slice(0, 4096);
  switch (tag) {
    case 'Events':
      return { kind: 'events', events: events(field('events'), `${at}.events`, limits), lastEventId: id('last_event_id') };
    case 'TreeDump': {
      // Absent in older releases, meaning the whole rank. A domain-scoped snapshot describes only part
      // of the rank's state: applying it as the whole would drop the rest, so it is refused (as
      // Dynamo's router ignores it).
      const scope = get(asMap(content, at), 'reset_scope');
      if (scope !== undefined && scope !== 'all') {
        throw new WireReject('unsupported', `${at}.reset_scope: only "all" is applied, got ${describeScope(scope)}`);
      }
      return { kind: 'tree_dump', events: events(field('events'), `${at}.events`, limits), lastEventId: id('last_event_id') };
    }
    case 'TreeDumpFailed':
      return { kind: 'tree_dump_failed', lastEventId: id('last_event_id'), message: message(field('message'), `${at}.message`) };
    case 'TooNew':
      return { kind: 'too_new', newestAvailable: id('newest_available') };
    case 'InvalidRange':
      return { kind: 'invalid_range', startId: id('start_id'), endId: id('end_id') };
    case 'Error':
      return { kind: 'error', message: message(content, at) };
    default:
      throw new WireReject('unknown_variant', `response: unknown worker KV query response ${JSON.stringify(tag.slice(0, 64))}`);
  }
}

function describeScope(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.slice(0, 64));
  if (isMap(v)) return `{${Object.keys(v).slice(0, 4).join(', ')}}`;
  return typeof v;
}

/** Decode one response-stream body of a worker KV query (msgpack). */
export function decodeWorkerKvQueryStreamItem(body: Uint8Array, opts?: { limits?: Partial<WireLimits> }): Result<WorkerKvQueryStreamItem> {
  return guard(() => {
    const limits = resolveLimits(opts?.limits);
    const m = asMap(readMsgpack(body, limits.maxMessageBytes), 'stream_item');
    const data = get(m, 'data');
    const completeFinal = optional(get(m, 'complete_final'), (x) => bool(x, 'stream_item.complete_final'));
    return { response: data === undefined || data === null ? null : responseFromValue(data, limits), completeFinal: completeFinal ?? false };
  });
}
