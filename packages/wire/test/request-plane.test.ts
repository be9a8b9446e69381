import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import { FrameReader, decodeStreamHandshake, decodeStreamPrologue, decodeWorkerKvQueryStreamItem, encodeRequestControl, encodeTcpRequest, encodeTwoPart, encodeWorkerKvQueryRequest, isStreamSentinel, type TwoPartMessage } from '../src/index';
import { decodeTcpRequest } from './encode';
import { Fields, writeMsgpack, type WireValue } from '../src/msgpack';

/** Bytes Dynamo 1.6.1 wrote (see the fixture's `about`). */
const fx = JSON.parse(readFileSync(join(__dirname, 'fixtures', 'worker-kv-query-1.6.1.json'), 'utf8')) as {
  workerId: string;
  request: string;
  ack: string;
  responseStream: string;
};
const hex = (h: string): Uint8Array => Uint8Array.from(Buffer.from(h, 'hex'));
const td = new TextDecoder();
const te = new TextEncoder();

function frames(bytes: Uint8Array, kind: 'two_part' | 'ack', splits: number[] = []): TwoPartMessage[] {
  const r = new FrameReader(kind, 1 << 24);
  const out: TwoPartMessage[] = [];
  let at = 0;
  for (const cut of [...splits.filter((x) => x > 0 && x < bytes.length).sort((a, b) => a - b), bytes.length]) {
    r.push(bytes.slice(at, cut));
    at = cut;
    for (let f = r.next(); f !== null; f = r.next()) {
      if (!f.ok) throw new Error(f.reason);
      out.push(f.value);
    }
  }
  expect(r.pending).toBe(0);
  return out;
}

describe("the request Dynamo's router sends a worker's local index", () => {
  const req = hex(fx.request);
  const frame = decodeTcpRequest(req);

  it('decodes, and our encoders rebuild it byte for byte', () => {
    expect(frame.ok).toBe(true);
    if (!frame.ok) return;
    const f = frame.value;
    expect(f.endpointPath).toMatch(/^[0-9a-f]{16}\/dynamo\/backend\/worker_kv_query_source_[0-9a-f]+$/);
    expect(f.headers['x-endpoint-path']).toBe(f.endpointPath);
    // The payload is a two-part message: the control message, then the msgpack request.
    const [msg] = frames(f.payload, 'two_part');
    const control = JSON.parse(td.decode(msg!.header)) as { id: string; connection_info: { transport: string; info: string } };
    const info = JSON.parse(control.connection_info.info) as { address: string; subject: string; context: string; stream_type: string };
    expect(control.connection_info.transport).toBe('tcp_server');
    expect(info.context).toBe(control.id);
    expect(info.stream_type).toBe('response');
    // Our control message for the same id, address and subject is the same bytes.
    expect(td.decode(encodeRequestControl({ id: control.id, responseAddress: info.address, subject: info.subject }))).toBe(td.decode(msg!.header));
    // Our request body for the worker it queried is the same bytes (worker id past 2^63, exact).
    const body = encodeWorkerKvQueryRequest({ workerId: BigInt(fx.workerId) as WorkerId, dpRank: 0, startEventId: null, endEventId: null });
    expect(Buffer.from(body).toString('hex')).toBe(Buffer.from(msg!.body).toString('hex'));
    // And the frame around them.
    const again = encodeTcpRequest({ endpointPath: f.endpointPath, headers: f.headers, payload: encodeTwoPart({ header: msg!.header, body }) });
    expect(Buffer.from(again).toString('hex')).toBe(fx.request);
  });

  it('a start event id is written as a u64', () => {
    const body = encodeWorkerKvQueryRequest({ workerId: 7n as WorkerId, dpRank: 1, startEventId: 2n ** 64n - 1n, endEventId: null });
    const expected = writeMsgpack(
      new Fields([
        ['worker_id', 7],
        ['dp_rank', 1],
        ['start_event_id', 2n ** 64n - 1n],
        ['end_event_id', null],
        ['supports_tree_dump_failed', true],
        ['kind', 'recovery'],
      ]),
    );
    expect(body).toEqual(expected);
    expect(Buffer.from(body).includes(Buffer.from('cfffffffffffffffff', 'hex'))).toBe(true);
  });

  it('refuses cut-off and trailing request frames', () => {
    for (let n = 0; n < req.length; n += 37) expect(decodeTcpRequest(req.subarray(0, n))).toMatchObject({ ok: false, code: 'truncated' });
    const longer = new Uint8Array(req.length + 1);
    longer.set(req);
    expect(decodeTcpRequest(longer)).toMatchObject({ ok: false, code: 'malformed' });
  });
});

describe("the worker's answer", () => {
  const stream = hex(fx.responseStream);

  it('is an empty acknowledgement, then handshake, prologue, one tree dump, the final item and the sentinel', () => {
    const [ack] = frames(hex(fx.ack), 'ack');
    expect(ack!.body.length).toBe(0);
    const got = frames(stream, 'two_part');
    expect(got).toHaveLength(5);
    const hs = decodeStreamHandshake(got[0]!.header);
    expect(hs).toMatchObject({ ok: true, value: { streamType: 'response' } });
    expect(decodeStreamPrologue(got[1]!.header)).toEqual({ ok: true, value: null });
    const item = decodeWorkerKvQueryStreamItem(got[2]!.body);
    expect(item.ok).toBe(true);
    if (!item.ok) return;
    expect(item.value.completeFinal).toBe(false);
    const r = item.value.response!;
    expect(r.kind).toBe('tree_dump');
    if (r.kind !== 'tree_dump') return;
    expect(r.lastEventId).toBe(3n);
    expect(r.events).toHaveLength(3);
    for (const [i, e] of r.events.entries()) {
      expect(e.workerId).toBe(BigInt(fx.workerId));
      expect(e.eventId).toBe(BigInt(i));
      expect(e.data.kind).toBe('stored');
      if (e.data.kind === 'stored') expect(e.data.blockHashes).toHaveLength(3);
    }
    expect(decodeWorkerKvQueryStreamItem(got[3]!.body)).toEqual({ ok: true, value: { response: null, completeFinal: true } });
    expect(isStreamSentinel(got[4]!)).toBe(true);
    expect(isStreamSentinel(got[2]!)).toBe(false);
    expect(isStreamSentinel({ header: new Uint8Array(10).fill(0xff), body: new Uint8Array(0) })).toBe(false);
  });

  it('frames the same however the bytes are split', () => {
    const whole = frames(stream, 'two_part');
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 12 }), (cuts) => {
        const got = frames(stream, 'two_part', cuts);
        expect(got).toEqual(whole);
      }),
      { seed: 24, numRuns: 200 },
    );
  });

  it('a frame longer than the bound is refused before it is buffered', () => {
    const r = new FrameReader('two_part', 1000);
    r.push(stream.subarray(0, 24 + 75)); // handshake fits
    expect(r.next()).toMatchObject({ ok: true });
    const big = new Uint8Array(24);
    new DataView(big.buffer).setBigUint64(8, 2n ** 62n);
    r.push(big);
    expect(r.next()).toMatchObject({ ok: false, code: 'too_large' });
    expect(r.next()).toMatchObject({ ok: false, code: 'too_large' });
    const a = new FrameReader('ack', 16);
    a.push(hex('000000ff'));
    expect(a.next()).toMatchObject({ ok: false, code: 'too_large' });
  });

  it('an error prologue and the error variants come back as values', () => {
    expect(decodeStreamPrologue(te.encode('{"error":"worker gone"}'))).toEqual({ ok: true, value: 'worker gone' });
    const item = (data: WireValue | undefined, final = false): Uint8Array =>
      writeMsgpack(new Fields(data === undefined ? [['complete_final', final]] : [['data', data], ['complete_final', final]]));
    expect(decodeWorkerKvQueryStreamItem(item(new Fields([['Error', 'boom']])))).toEqual({ ok: true, value: { response: { kind: 'error', message: 'boom' }, completeFinal: false } });
    expect(decodeWorkerKvQueryStreamItem(item(new Fields([['TooNew', new Fields([['requested_start', 5], ['requested_end', null], ['newest_available', 2n ** 64n - 2n]])]])))).toMatchObject({
      ok: true,
      value: { response: { kind: 'too_new', newestAvailable: 2n ** 64n - 2n } },
    });
    expect(decodeWorkerKvQueryStreamItem(item(new Fields([['InvalidRange', new Fields([['start_id', 9], ['end_id', 3]])]])))).toMatchObject({
      ok: true,
      value: { response: { kind: 'invalid_range', startId: 9n, endId: 3n } },
    });
    expect(decodeWorkerKvQueryStreamItem(item(new Fields([['TreeDumpFailed', new Fields([['last_event_id', 4], ['message', 'no']])]])))).toMatchObject({
      ok: true,
      value: { response: { kind: 'tree_dump_failed', lastEventId: 4n, message: 'no' } },
    });
    expect(decodeWorkerKvQueryStreamItem(item(new Fields([['Events', new Fields([['events', []], ['last_event_id', 12]])]])))).toMatchObject({
      ok: true,
      value: { response: { kind: 'events', events: [], lastEventId: 12n } },
    });
  });

  it('refuses what must not be applied as the whole rank, and unknown variants', () => {
    const item = (data: WireValue): Uint8Array => writeMsgpack(new Fields([['data', data], ['complete_final', false]]));
    const dump = (scope: WireValue, events: WireValue[] = []): Uint8Array =>
      item(new Fields([['TreeDump', new Fields([['events', events], ['last_event_id', 1], ['reset_scope', scope]])]]));
    expect(decodeWorkerKvQueryStreamItem(dump('all'))).toMatchObject({ ok: true });
    expect(decodeWorkerKvQueryStreamItem(dump(new Fields([['domain', 'worker']])))).toMatchObject({ ok: false, code: 'unsupported' });
    const cacheOwner = new Fields([
      ['worker_id', 1],
      ['storage_tier', 'device'],
      ['residency_domain', 'cache_owner'],
      ['event', new Fields([['event_id', 0], ['data', 'cleared'], ['dp_rank', 0]])],
    ]);
    expect(decodeWorkerKvQueryStreamItem(dump('all', [cacheOwner]))).toMatchObject({ ok: false, code: 'unsupported' });
    expect(decodeWorkerKvQueryStreamItem(item(new Fields([['Status', new Fields([])]])))).toMatchObject({ ok: false, code: 'unknown_variant' });
    expect(decodeWorkerKvQueryStreamItem(item(7))).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(decodeWorkerKvQueryStreamItem(new Uint8Array([0xc1]))).toMatchObject({ ok: false });
  });

  it('never throws on cut-off, mutated or random bodies', () => {
    const got = frames(stream, 'two_part');
    const body = got[2]!.body;
    for (let n = 0; n < body.length; n++) expect(decodeWorkerKvQueryStreamItem(body.subarray(0, n)).ok).toBe(false);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.nat(body.length - 1), fc.nat(255)), { minLength: 1, maxLength: 8 }), (edits) => {
        const b = body.slice();
        for (const [i, v] of edits) b[i] = v;
        const r = decodeWorkerKvQueryStreamItem(b);
        expect(typeof r.ok).toBe('boolean');
      }),
      { seed: 7, numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), (b) => {
        expect(typeof decodeWorkerKvQueryStreamItem(b).ok).toBe('boolean');
        expect(typeof decodeStreamHandshake(b).ok).toBe('boolean');
        expect(typeof decodeStreamPrologue(b).ok).toBe('boolean');
        expect(typeof decodeTcpRequest(b).ok).toBe('boolean');
      }),
      { seed: 11, numRuns: 500 },
    );
  });
});
