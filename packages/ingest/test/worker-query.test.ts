import { readFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import { FrameReader, encodeTwoPart } from '@vantage/wire';
import { decodeTcpRequest } from '@vantage/wire/test/encode';
import { WorkerQueryClient, type RecoveryTarget } from '../src/worker-query';

/**
 * The client's handling of each way a worker can fail it, against a scripted peer on 127.0.0.1
 * that speaks the request plane with Dynamo 1.6.1's captured bytes (the live exchange with Dynamo's
 * own workers is test/recovery-dynamo.int.test.ts).
 */
const fx = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'packages', 'wire', 'test', 'fixtures', 'worker-kv-query-1.6.1.json'), 'utf8')) as { workerId: string; responseStream: string };
const capturedStream = Uint8Array.from(Buffer.from(fx.responseStream, 'hex'));
const te = new TextEncoder();

type Script = (req: { control: { connection_info: { info: string } } }, ackSock: Socket) => void;

let server: Server;
let port = 0;
let script: Script = () => {};
const seen: { path: string; headers: Record<string, string> }[] = [];

/** The worker's response-stream frames of the capture, its handshake naming `subject`. */
function streamFor(subject: string, mutate?: (frames: Uint8Array[]) => Uint8Array[]): Uint8Array {
  const r = new FrameReader('two_part', 1 << 24);
  r.push(capturedStream);
  const frames: Uint8Array[] = [];
  for (let f = r.next(); f !== null; f = r.next()) {
    if (!f.ok) throw new Error(f.reason);
    frames.push(encodeTwoPart(f.value));
  }
  frames[0] = encodeTwoPart({ header: te.encode(JSON.stringify({ subject, stream_type: 'response' })), body: new Uint8Array(0) });
  return Buffer.concat(mutate ? mutate(frames) : frames);
}

function dialBack(info: string, bytes: Uint8Array, end = true): void {
  const { address } = JSON.parse(info) as { address: string };
  const [h, p] = address.split(':');
  const s = createConnection({ host: h!, port: Number(p) }, () => {
    s.write(bytes);
    if (end) s.end();
  });
  s.on('error', () => {});
}

const target = (over: Partial<RecoveryTarget> = {}): RecoveryTarget => ({
  workerId: BigInt(fx.workerId) as WorkerId,
  dpRank: 0,
  transport: 'tcp',
  address: `127.0.0.1:${port}/9805dbf52db50e67/dynamo/backend/worker_kv_query_source_30117a1818e9b`,
  codec: 'msgpack',
  ...over,
});

const client = new WorkerQueryClient({ responseHost: '127.0.0.1', responsePort: 0, timeoutMs: 1_500, maxFrameBytes: 1 << 20 });

beforeAll(async () => {
  server = createServer((sock) => {
    let buf = Buffer.alloc(0);
    sock.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      const r = decodeTcpRequest(new Uint8Array(buf));
      if (!r.ok) return; // wait for the whole frame
      seen.push({ path: r.value.endpointPath, headers: { ...r.value.headers } });
      const fr = new FrameReader('two_part', 1 << 20);
      fr.push(r.value.payload);
      const m = fr.next();
      if (!m?.ok) throw new Error('bad payload');
      script({ control: JSON.parse(new TextDecoder().decode(m.value.header)) as { connection_info: { info: string } } }, sock);
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  port = (server.address() as AddressInfo).port;
  await client.start();
});

afterAll(async () => {
  await client.close();
  await new Promise<void>((r) => server.close(() => r()));
});

const ACK = Buffer.from('00000000', 'hex');

describe('WorkerQueryClient', () => {
  it("sends the query to the path after host:port and returns the worker's tree dump", async () => {
    script = (req, ack) => {
      ack.write(ACK);
      dialBack(req.control.connection_info.info, streamFor(JSON.parse(req.control.connection_info.info).subject));
    };
    const r = await client.query(target(), null);
    expect(r.kind).toBe('tree_dump');
    if (r.kind === 'tree_dump') {
      expect(r.lastEventId).toBe(3n);
      expect(r.events).toHaveLength(3);
      expect(r.events[0]!.workerId).toBe(BigInt(fx.workerId));
    }
    expect(seen.at(-1)!.path).toBe('9805dbf52db50e67/dynamo/backend/worker_kv_query_source_30117a1818e9b');
    expect(seen.at(-1)!.headers['x-endpoint-path']).toBe(seen.at(-1)!.path);
  });

  it('a refusal in the acknowledgement is UPSTREAM_UNAVAILABLE with its text', async () => {
    script = (_req, ack) => {
      const text = te.encode('Server overloaded: queue full');
      const len = Buffer.alloc(4);
      len.writeUInt32BE(text.length);
      ack.write(Buffer.concat([len, text]));
    };
    await expect(client.query(target(), null)).rejects.toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', message: expect.stringContaining('Server overloaded') });
  });

  it('no answer is DEADLINE_EXCEEDED; nothing listening is UPSTREAM_UNAVAILABLE', async () => {
    script = (_req, ack) => ack.write(ACK); // accepted, never answered
    await expect(client.query(target(), null)).rejects.toMatchObject({ code: 'DEADLINE_EXCEEDED' });
    const dead = createServer();
    await new Promise<void>((r) => dead.listen(0, '127.0.0.1', () => r()));
    const deadPort = (dead.address() as AddressInfo).port;
    await new Promise<void>((r) => dead.close(() => r()));
    await expect(client.query(target({ address: `127.0.0.1:${deadPort}/x` }), null)).rejects.toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
  });

  it('an error prologue, a stream cut before the answer, a garbled or oversized answer each fail the query', async () => {
    const cases: [string, (subject: string) => Uint8Array, string][] = [
      ['prologue error', (s) => streamFor(s, (f) => [f[0]!, encodeTwoPart({ header: te.encode('{"error":"engine stopped"}'), body: new Uint8Array(0) })]), 'UPSTREAM_UNAVAILABLE'],
      ['cut', (s) => streamFor(s, (f) => [f[0]!, f[1]!]), 'UPSTREAM_UNAVAILABLE'],
      ['garbled', (s) => streamFor(s, (f) => [f[0]!, f[1]!, encodeTwoPart({ header: new Uint8Array(0), body: Uint8Array.of(0x82, 0xa4, 0x64) })]), 'DECODE_FAILED'],
      [
        'oversized',
        (s) =>
          streamFor(s, (f) => {
            const big = new Uint8Array(24);
            new DataView(big.buffer).setBigUint64(8, 1n << 40n);
            return [f[0]!, f[1]!, big];
          }),
        'DECODE_FAILED',
      ],
    ];
    for (const [name, bytes, code] of cases) {
      script = (req, ack) => {
        ack.write(ACK);
        dialBack(req.control.connection_info.info, bytes(JSON.parse(req.control.connection_info.info).subject));
      };
      await expect(client.query(target(), null), name).rejects.toMatchObject({ code });
    }
  });

  it('a stream naming no pending call is dropped, and the real answer still arrives', async () => {
    script = (req, ack) => {
      ack.write(ACK);
      dialBack(req.control.connection_info.info, streamFor('not-a-call'));
      dialBack(req.control.connection_info.info, Uint8Array.from([1, 2, 3])); // garbage, never a handshake
      setTimeout(() => dialBack(req.control.connection_info.info, streamFor(JSON.parse(req.control.connection_info.info).subject)), 50);
    };
    expect((await client.query(target(), null)).kind).toBe('tree_dump');
  });

  it('refuses transports and codecs it does not speak, and addresses it cannot parse', async () => {
    await expect(client.query(target({ transport: 'nats_tcp' }), null)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(client.query(target({ codec: 'json' }), null)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(client.query(target({ address: 'no-port/path' }), null)).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });
});
