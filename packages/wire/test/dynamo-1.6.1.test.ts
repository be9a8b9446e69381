// Messages captured from Dynamo 1.6.1's own mocker on a real nats-server (raw bytes, as published),
// decoded as the indexer and `vantage decode` decode them; and the faults that shape invites.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { KvEvent, WorkerId } from '@vantage/types';
import { decodeEventPlaneMessage, decodeForwardPassMetrics, decodeJsonExact, decodeRouterEventsMsgpack, endpointSubjectPrefix, JsonFloat, prefixedSubject, sniffMessage, type ForwardPassMetrics } from '../src/index';
import { encodeEventPlaneMessage, encodeForwardPassMetrics, encodeRouterEventBatchMsgpack } from './encode';
import { writeMsgpack, Fields, F64 } from '../src/msgpack';

interface Fixture {
  readonly name: string;
  readonly subject: string;
  readonly hex: string;
}
const fixtures = (JSON.parse(readFileSync(join(__dirname, 'fixtures', 'dynamo-1.6.1-mocker.json'), 'utf8')) as { messages: Fixture[] }).messages;
const fixture = (name: string): Fixture => fixtures.find((f) => f.name === name)!;
const bytesOf = (f: Fixture): Uint8Array => new Uint8Array(Buffer.from(f.hex, 'hex'));

function must<T>(r: { ok: true; value: T } | { ok: false; code: string; reason: string }): T {
  if (!r.ok) throw new Error(`unexpected rejection ${r.code}: ${r.reason}`);
  return r.value;
}

describe('Dynamo 1.6.1 as published by its mocker', () => {
  it('every captured message decodes, on its endpoint-scoped subject', () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(10);
    for (const f of fixtures) {
      expect(f.subject.startsWith(`${endpointSubjectPrefix('dynamo', 'backend', 'generate')}.`)).toBe(true);
      must(decodeEventPlaneMessage(bytesOf(f), { topic: f.subject }));
      expect(sniffMessage(bytesOf(f))).toBe('envelope');
    }
  });

  it('kv-events: the payload is an array of RouterEvents; publisher_id is not the worker id', () => {
    const v = must(decodeEventPlaneMessage(bytesOf(fixture('kv-events:removed+stored')), { topic: 'kv-events' }));
    expect(v.kind).toBe('kv_events');
    if (v.kind !== 'kv_events') return;
    expect(v.events.map((e) => e.data.kind)).toEqual(['removed', 'stored']);
    expect(v.events.map((e) => e.eventId)).toEqual([21n, 22n]);
    expect(v.events[0]!.workerId).toBe(416501073076962504n);
    expect(v.envelope.publisherId).not.toBe(v.events[0]!.workerId);
    const dp = must(decodeEventPlaneMessage(bytesOf(fixture('kv-events:stored+stored:dp1')), { topic: 'kv-events' }));
    if (dp.kind !== 'kv_events') throw new Error('expected a batch');
    // A worker id above 2^63, exact.
    expect(dp.events.map((e) => [e.workerId, e.dpRank])).toEqual([
      [18329147160771148149n, 1],
      [18329147160771148149n, 1],
    ]);
    expect(dp.envelope.publisherId).toBe(7745431287137597n);
    expect(dp.events[0]!.data).toMatchObject({ kind: 'stored', parentHash: 1065638200292080071n });
  });

  it('forward-pass-metrics: worker id as a decimal string, scheduled and queued requests', () => {
    const q = must(decodeEventPlaneMessage(bytesOf(fixture('forward-pass-metrics:queued')), { topic: fixture('forward-pass-metrics:queued').subject }));
    expect(q.kind).toBe('forward_pass');
    if (q.kind !== 'forward_pass') return;
    expect(q.metrics).toMatchObject({ version: 1, workerId: 416501073076962504n, dpRank: 0, counterId: 245n });
    expect(q.metrics.queued).toMatchObject({ prefillRequests: 30, prefillTokens: 14175 });
    expect(q.metrics.scheduled).toMatchObject({ decodeRequests: 11, decodeKvTokens: 3407 });
    expect(q.metrics.wallTime).toBeCloseTo(0.003285609, 9);
    const big = must(decodeEventPlaneMessage(bytesOf(fixture('forward-pass-metrics:decode')), { topic: 'forward-pass-metrics' }));
    if (big.kind !== 'forward_pass') throw new Error('expected forward pass');
    expect(big.metrics.workerId).toBe(11487316532418974185n);
    const idle = must(decodeEventPlaneMessage(bytesOf(fixture('forward-pass-metrics:idle')), { topic: 'forward-pass-metrics' }));
    if (idle.kind !== 'forward_pass') throw new Error('expected forward pass');
    expect(idle.metrics.wallTime).toBe(0);
  });

  it('kv_metrics: ActiveLoad with nil scheduler fields', () => {
    const v = must(decodeEventPlaneMessage(bytesOf(fixture('kv_metrics:used')), { topic: fixture('kv_metrics:used').subject }));
    expect(v).toMatchObject({ kind: 'active_load', load: { workerId: 416501073076962504n, kvUsedBlocks: 12, activeDecodeBlocks: null, activePrefillTokens: null } });
  });

  it('endpoint subjects: prefix as discovery writes it, topics appended percent-encoded', () => {
    expect(endpointSubjectPrefix('dynamo', 'backend', 'generate')).toBe('namespace.dynamo.component.backend.endpoint.generate');
    expect(endpointSubjectPrefix('my.ns', 'back end', 'gen')).toBe('namespace.my%2Ens.component.back%20end.endpoint.gen');
    expect(prefixedSubject('namespace.dynamo.component.backend.endpoint.generate', 'forward-pass-metrics')).toBe(
      'namespace.dynamo.component.backend.endpoint.generate.forward-pass-metrics',
    );
    expect(() => prefixedSubject('namespace.>', 'kv-events')).toThrow(RangeError);
    expect(() => prefixedSubject('a..b', 'kv-events')).toThrow(RangeError);
  });
});

const W = 18329147160771148149n as WorkerId;
const ev = (id: bigint, dpRank = 0): KvEvent => ({ workerId: W, dpRank, storageTier: 'device', eventId: id, data: { kind: 'removed', blockHashes: new BigUint64Array([id]) } });

describe('batches and forward-pass metrics, encoded and refused', () => {
  it('a batch round-trips; a single map still decodes as a one-event list; an empty batch is empty', () => {
    const batch = [ev(1n), ev(2n, 1)];
    expect(must(decodeRouterEventsMsgpack(encodeRouterEventBatchMsgpack(batch)))).toEqual(batch);
    const env = encodeEventPlaneMessage({ publisherId: 7n, sequence: 0n, publishedAtMs: 1n }, { kind: 'kv_events', events: batch });
    expect(must(decodeEventPlaneMessage(env))).toMatchObject({ kind: 'kv_events', events: batch });
    expect(must(decodeRouterEventsMsgpack(encodeRouterEventBatchMsgpack([])))).toEqual([]);
  });

  it('one bad event refuses the whole batch, naming its index', () => {
    const bad = writeMsgpack([new Fields([['worker_id', 1n], ['event', new Fields([['event_id', 1n], ['data', 'cleared']])]]), new Fields([['worker_id', 'x']])]);
    const r = decodeRouterEventsMsgpack(bad);
    expect(r).toMatchObject({ ok: false, code: 'wrong_type' });
    if (!r.ok) expect(r.reason).toContain('router_events[1].worker_id');
  });

  it('a batch past maxBatchEvents is too_large', () => {
    const r = decodeRouterEventsMsgpack(encodeRouterEventBatchMsgpack([ev(1n), ev(2n), ev(3n)]), { limits: { maxBatchEvents: 2 } });
    expect(r).toMatchObject({ ok: false, code: 'too_large' });
  });

  const fp: ForwardPassMetrics = {
    version: 1,
    workerId: W,
    dpRank: 1,
    counterId: 9n,
    wallTime: 0.25,
    scheduled: { prefillRequests: 2, prefillTokens: 900, prefillLengthVariance: 1.5, prefillKvTokens: 64, decodeRequests: 3, decodeKvTokens: 700, decodeKvTokensVariance: 0 },
    queued: { prefillRequests: 4, prefillTokens: 4000, prefillLengthVariance: 0, prefillKvTokens: 0, decodeRequests: 0, decodeKvTokens: 0, decodeKvTokensVariance: 0 },
  };

  it('forward-pass metrics round-trip through msgpack and JSON (worker id a string on the wire)', () => {
    expect(must(decodeForwardPassMetrics(encodeForwardPassMetrics(fp)))).toEqual(fp);
    const json = new TextDecoder().decode(encodeForwardPassMetrics(fp, { format: 'json' }));
    expect(json).toContain('"worker_id":"18329147160771148149"');
    expect(must(decodeForwardPassMetrics(json, { format: 'json' }))).toEqual(fp);
  });

  it('forward-pass faults: unknown version, a worker id that is not a u64, a non-numeric timing, missing parts', () => {
    const with_ = (k: string, v: unknown): Uint8Array => {
      const base = JSON.parse(new TextDecoder().decode(encodeForwardPassMetrics(fp, { format: 'json' }))) as Record<string, unknown>;
      if (v === undefined) delete base[k];
      else base[k] = v;
      return new TextEncoder().encode(JSON.stringify(base));
    };
    const dec = (b: Uint8Array) => decodeForwardPassMetrics(b, { format: 'json' });
    expect(dec(with_('version', 2))).toMatchObject({ ok: false, code: 'unknown_variant' });
    expect(dec(with_('worker_id', 'abc'))).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(dec(with_('worker_id', '18446744073709551616'))).toMatchObject({ ok: false, code: 'out_of_range' });
    expect(dec(with_('worker_id', '-1'))).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(dec(with_('wall_time', 'fast'))).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(dec(with_('queued_requests', undefined))).toMatchObject({ ok: false, code: 'missing_field' });
    expect(dec(with_('scheduled_requests', [1]))).toMatchObject({ ok: false, code: 'wrong_type' });
    const negative = writeMsgpack(new Fields([['version', 1], ['worker_id', '1'], ['scheduled_requests', new Fields([['num_prefill_requests', -1]])], ['queued_requests', new Fields([])]]));
    expect(decodeForwardPassMetrics(negative)).toMatchObject({ ok: false, code: 'out_of_range' });
    const nan = writeMsgpack(new Fields([['version', 1], ['worker_id', '1'], ['wall_time', new F64(NaN)], ['scheduled_requests', new Fields([])], ['queued_requests', new Fields([])]]));
    expect(decodeForwardPassMetrics(nan)).toMatchObject({ ok: false, code: 'out_of_range' });
  });

  it('a forward-pass payload under the kv-events topic is refused, not misread', () => {
    const env = encodeEventPlaneMessage({ publisherId: 1n, sequence: 0n, publishedAtMs: 1n }, { kind: 'forward_pass', metrics: fp });
    expect(decodeEventPlaneMessage(env, { topic: 'kv-events' })).toMatchObject({ ok: false, code: 'wrong_type' });
    expect(must(decodeEventPlaneMessage(env))).toMatchObject({ kind: 'forward_pass' });
  });
});

describe('exact JSON', () => {
  it('integers past 2^53 stay exact; floats are JsonFloat; duplicates and junk are refused', () => {
    const v = must(decodeJsonExact('{"instance_id":18329147160771148149,"x":1.5,"n":[1,2]}')) as Record<string, unknown>;
    expect(v.instance_id).toBe(18329147160771148149n);
    expect(v.x).toBeInstanceOf(JsonFloat);
    expect(v.n).toEqual([1n, 2n]);
    expect(decodeJsonExact('{"a":1,"a":2}')).toMatchObject({ ok: false, code: 'malformed' });
    expect(decodeJsonExact('{"a":')).toMatchObject({ ok: false });
    expect(decodeJsonExact('')).toMatchObject({ ok: false, code: 'truncated' });
  });
});
