/**
 * A client of Dynamo workers' local KV indexes over Dynamo's TCP request plane (the transport
 * 1.6.1 uses by default, `DYN_REQUEST_PLANE=tcp`; NATS request-reply is not supported). The
 * framing and the messages are @vantage/wire's; this owns the sockets.
 *
 * One query: connect to the worker's request-plane address (`host:port/path` from discovery's
 * `recovery_target`), send the request frame, read its acknowledgement, then wait for the worker
 * to dial this client's response-stream server (one per client, listening on `responseHost`) and
 * read the answer from that stream. Each query has a deadline; every failure is a VantageError
 * with a code (UPSTREAM_UNAVAILABLE: cannot connect, refused, stream cut; DEADLINE_EXCEEDED;
 * DECODE_FAILED: bytes that are not an answer; BAD_REQUEST: an address or codec we cannot use).
 */
import { randomUUID } from 'node:crypto';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { VantageError } from '@vantage/runtime';
import type { WorkerId } from '@vantage/types';
import {
  FrameReader,
  decodeStreamHandshake,
  decodeStreamPrologue,
  decodeWorkerKvQueryStreamItem,
  encodeRequestControl,
  encodeTcpRequest,
  encodeTwoPart,
  encodeWorkerKvQueryRequest,
  isStreamSentinel,
  type WorkerKvQueryResponse,
} from '@vantage/wire';

/** Where a worker's local index answers: discovery's `recovery_target`. */
export interface RecoveryTarget {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** The transport kind (`tcp` is supported). */
  readonly transport: string;
  /** `host:port/path` for `tcp`. */
  readonly address: string;
  /** `request_plane_codec` (`msgpack` is supported; null means Dynamo's default, msgpack). */
  readonly codec: string | null;
}

interface WorkerQueryClientOptions {
  /** Interface the response-stream server listens on. */
  readonly responseHost: string;
  /** Its port (0: any free port). */
  readonly responsePort: number;
  /** Host the workers are told to dial back (default: `responseHost`). */
  readonly advertiseHost?: string;
  /** Deadline of one query, from connecting to the last response frame. */
  readonly timeoutMs: number;
  /** Largest frame accepted from a worker (a tree dump of a large cache is tens of MB). */
  readonly maxFrameBytes: number;
}

/** Settles one call's promise. */
type Settle = (err: VantageError | null, r?: WorkerKvQueryResponse) => void;

export class WorkerQueryClient {
  private server: Server | null = null;
  private readonly pending = new Map<string, Settle>();
  private readonly streams = new Set<Socket>();
  private advertised = '';

  constructor(private readonly o: WorkerQueryClientOptions) {}

  /** Start the response-stream server. */
  async start(): Promise<void> {
    if (this.server) return;
    const server = createServer((s) => this.onStream(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.o.responsePort, this.o.responseHost, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', () => {});
    this.server = server;
    const port = (server.address() as AddressInfo).port;
    this.advertised = `${this.o.advertiseHost || this.o.responseHost}:${port}`;
  }

  /** The `host:port` workers are told to dial. */
  get responseAddress(): string {
    return this.advertised;
  }

  async close(): Promise<void> {
    for (const settle of [...this.pending.values()]) settle(new VantageError('SHUTTING_DOWN', 'worker query client closed'));
    for (const s of this.streams) s.destroy();
    const srv = this.server;
    this.server = null;
    if (srv) await new Promise<void>((r) => srv.close(() => r()));
  }

  /**
   * Ask one worker's local index for its events from `startEventId` (inclusive), or for its whole
   * tree when null. Resolves with the worker's answer (which may itself be an error variant).
   */
  query(target: RecoveryTarget, startEventId: bigint | null): Promise<WorkerKvQueryResponse> {
    if (!this.server) return Promise.reject(new VantageError('INTERNAL', 'worker query client not started'));
    if (target.transport !== 'tcp') {
      return Promise.reject(new VantageError('BAD_REQUEST', `recovery transport ${JSON.stringify(target.transport)} is not supported (tcp only)`));
    }
    if (target.codec !== null && target.codec !== 'msgpack') {
      return Promise.reject(new VantageError('BAD_REQUEST', `request-plane codec ${JSON.stringify(target.codec)} is not supported (msgpack only)`));
    }
    const m = /^([^/:]+|\[[^\]]+\]):(\d{1,5})\/(.+)$/.exec(target.address);
    if (!m || Number(m[2]) > 65535) return Promise.reject(new VantageError('BAD_REQUEST', `recovery address ${JSON.stringify(target.address.slice(0, 200))} is not host:port/path`));
    const host = m[1]!.replace(/^\[|\]$/g, '');
    const port = Number(m[2]);
    const path = m[3]!;
    const id = randomUUID();
    const subject = randomUUID();
    const payload = encodeTwoPart({
      header: encodeRequestControl({ id, responseAddress: this.advertised, subject }),
      body: encodeWorkerKvQueryRequest({ workerId: target.workerId, dpRank: target.dpRank, startEventId, endEventId: null }),
    });
    const frame = encodeTcpRequest({ endpointPath: path, headers: { 'x-endpoint-path': path, 'request-id': id }, payload });

    return new Promise<WorkerKvQueryResponse>((resolve, reject) => {
      let done = false;
      // The request connection carries only the acknowledgement; the answer comes on the stream.
      const sock = createConnection({ host, port });
      const timer = setTimeout(
        () => settle(new VantageError('DEADLINE_EXCEEDED', `worker ${target.workerId} dp rank ${target.dpRank}: no answer within ${this.o.timeoutMs} ms`)),
        this.o.timeoutMs,
      );
      const settle: Settle = (err, r) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.pending.delete(subject);
        sock.destroy();
        if (err) reject(err);
        else resolve(r!);
      };
      this.pending.set(subject, settle);
      const acks = new FrameReader('ack', 1 << 20);
      sock.on('connect', () => sock.write(frame));
      sock.on('data', (chunk: Buffer) => {
        acks.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        const a = acks.next();
        if (a === null) return;
        if (!a.ok) return settle(new VantageError('DECODE_FAILED', `acknowledgement: ${a.reason}`));
        if (a.value.body.length > 0) {
          const text = new TextDecoder().decode(a.value.body).slice(0, 500);
          return settle(new VantageError('UPSTREAM_UNAVAILABLE', `worker refused the query: ${text}`));
        }
        // Accepted: the request connection has done its part.
        sock.end();
      });
      sock.on('error', (e) => settle(new VantageError('UPSTREAM_UNAVAILABLE', `request plane ${host}:${port}: ${e.message}`, { cause: e })));
    });
  }

  /** A worker dialled back: read its handshake, then the answer of the call it names. */
  private onStream(s: Socket): void {
    this.streams.add(s);
    const frames = new FrameReader('two_part', this.o.maxFrameBytes);
    let call: Settle | null = null;
    let state: 'handshake' | 'prologue' | 'items' = 'handshake';
    let answer: WorkerKvQueryResponse | null = null;
    const fail = (e: VantageError): void => {
      call?.(e);
      call = null;
      s.destroy();
    };
    // A stream that never names a call is dropped after the query deadline.
    const idle = setTimeout(() => fail(new VantageError('DEADLINE_EXCEEDED', 'response stream sent no handshake')), this.o.timeoutMs);
    s.on('close', () => {
      clearTimeout(idle);
      this.streams.delete(s);
      call?.(answer ? null : new VantageError('UPSTREAM_UNAVAILABLE', 'response stream ended before an answer'), answer ?? undefined);
    });
    s.on('error', () => s.destroy());
    s.on('data', (chunk: Buffer) => {
      frames.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      for (let f = frames.next(); f !== null; f = frames.next()) {
        if (!f.ok) return fail(new VantageError('DECODE_FAILED', `response stream: ${f.reason}`));
        const msg = f.value;
        if (state === 'handshake') {
          const h = decodeStreamHandshake(msg.header);
          const p = h.ok ? this.pending.get(h.value.subject) : undefined;
          if (!p) return fail(new VantageError('DECODE_FAILED', h.ok ? 'response stream for no pending call' : `handshake: ${h.reason}`));
          clearTimeout(idle);
          call = p;
          state = 'prologue';
        } else if (state === 'prologue') {
          const p = decodeStreamPrologue(msg.header);
          if (!p.ok) return fail(new VantageError('DECODE_FAILED', `prologue: ${p.reason}`));
          if (p.value !== null) return fail(new VantageError('UPSTREAM_UNAVAILABLE', `worker could not answer: ${p.value}`));
          state = 'items';
        } else if (isStreamSentinel(msg)) {
          const c = call;
          call = null;
          s.end();
          if (!answer) return c?.(new VantageError('DECODE_FAILED', 'response stream ended without an answer'));
          return c?.(null, answer);
        } else {
          const it = decodeWorkerKvQueryStreamItem(msg.body, { limits: { maxMessageBytes: this.o.maxFrameBytes } });
          if (!it.ok) return fail(new VantageError('DECODE_FAILED', `worker KV query answer: ${it.code}: ${it.reason}`));
          if (it.value.response) {
            if (answer) return fail(new VantageError('DECODE_FAILED', 'worker KV query answered twice'));
            answer = it.value.response;
          }
          if (it.value.completeFinal) {
            // The sentinel may follow; the answer is complete either way.
            const c = call;
            call = null;
            if (!answer) return fail(new VantageError('DECODE_FAILED', 'response stream completed without an answer'));
            c?.(null, answer);
          }
        }
      }
    });
  }
}
