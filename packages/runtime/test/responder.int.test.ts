// The request-reply server against a real nats-server: queue groups, the
// in-flight limit, error headers, the draining stop, $SRV discovery and the
// outbox (coalescing) option.
import { connect, createInbox, Empty, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { natsUrl, uniqueName } from '@vantage/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readErrorHeaders, VantageError } from '../src/errors';
import { runtimeMetrics } from '../src/metrics';
import { createRegistry } from '../src/ops';
import { Outbox } from '../src/outbox';
import { createResponder, type RequestHandler } from '../src/responder';
import { createShutdown } from '../src/shutdown';
import { captureLogger } from './helpers';

const te = new TextEncoder();
const td = new TextDecoder();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Sends `bodies` as requests at once (one write) and returns the replies in the same order. */
async function burst(nc: NatsConnection, subject: string, bodies: string[], timeoutMs = 5000): Promise<Msg[]> {
  const out = bodies.map((b) => nc.request(subject, te.encode(b), { timeout: timeoutMs }));
  return Promise.all(out);
}

/** A reply as text: the body, or the error code it carries in its headers. */
function text(m: Msg): string {
  const e = readErrorHeaders(m.headers);
  return e === null ? `ok:${td.decode(m.data)}` : `err:${e.code}:${e.message}`;
}

describe('responder over real NATS', () => {
  const cap = captureLogger('info');
  let nc: NatsConnection;
  let peer: NatsConnection;
  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    peer = await connect({ servers: natsUrl() });
  });
  afterAll(async () => {
    await nc.close();
    await peer.close();
  });

  it('replicas in one queue group share the requests: each is answered exactly once', async () => {
    const subject = uniqueName('shared');
    const handled = [0, 0];
    const make = (conn: NatsConnection, i: number) => {
      const r = createResponder(conn, { name: 'share', log: cap.log, discovery: false });
      r.add('echo', { subject, handler: (m) => (handled[i]!++, te.encode(`${i}:${td.decode(m.data)}`)) });
      return r;
    };
    const a = make(nc, 0);
    const b = make(peer, 1);
    await Promise.all([nc.flush(), peer.flush()]);
    const client = await connect({ servers: natsUrl() });
    const replies: string[] = [];
    for (let i = 0; i < 60; i++) replies.push(td.decode((await client.request(subject, te.encode(String(i)), { timeout: 2000 })).data));
    await client.close();
    expect(handled[0]! + handled[1]!).toBe(60);
    expect(handled[0]).toBeGreaterThan(0);
    expect(handled[1]).toBeGreaterThan(0);
    expect(replies.map((r) => r.split(':')[1])).toEqual(Array.from({ length: 60 }, (_, i) => String(i)));
    await Promise.all([a.stop(), b.stop()]);
  });

  it('errors travel as headers: a VantageError with its code, anything else as INTERNAL without its message', async () => {
    const subject = uniqueName('errors');
    const registry = createRegistry('responder-int');
    const r = createResponder(nc, { name: 'errs', log: cap.log, metrics: runtimeMetrics(registry), discovery: false });
    r.add('e', {
      subject,
      handler: (m) => {
        const t = td.decode(m.data);
        if (t === 'missing') throw new VantageError('NOT_FOUND', 'no pool named capable-7');
        if (t === 'async') return Promise.reject(new VantageError('BAD_REQUEST', 'bad field'));
        throw new TypeError('x is undefined at /srv/a.ts');
      },
    });
    await nc.flush();
    const [missing, async, crash] = await burst(nc, subject, ['missing', 'async', 'crash']);
    expect(missing!.data.length).toBe(0);
    expect(missing!.headers?.get('Nats-Service-Error-Code')).toBe('404');
    expect(readErrorHeaders(missing!.headers)).toMatchObject({ code: 'NOT_FOUND', message: 'no pool named capable-7', retryable: false });
    expect(readErrorHeaders(async!.headers)).toMatchObject({ code: 'BAD_REQUEST', message: 'bad field' });
    expect(readErrorHeaders(crash!.headers)).toMatchObject({ code: 'INTERNAL', message: 'internal error' });
    expect(cap.lines.some((l) => l['msg'] === 'request handler failed' && l['level'] === 'error')).toBe(true);
    const m = await registry.metrics();
    expect(m).toContain('vantage_requests_total{endpoint="e",outcome="not_found",service="responder-int"} 1');
    expect(m).toContain('vantage_requests_total{endpoint="e",outcome="internal",service="responder-int"} 1');
    expect(m).toContain('vantage_errors_total{code="bad_request",service="responder-int"} 1');
    await r.stop();
  });

  it('refuses past maxInFlight with OVERLOADED, counted; async handlers hold their place until they reply', async () => {
    const subject = uniqueName('limit');
    const registry = createRegistry('responder-int');
    const metrics = runtimeMetrics(registry);
    const gates: (() => void)[] = [];
    const r = createResponder(nc, { name: 'lim', log: cap.log, metrics, maxInFlight: 2, discovery: false });
    const ep = r.add('slow', {
      subject,
      handler: async (m) => {
        await new Promise<void>((res) => gates.push(res));
        return m.data;
      },
    });
    await nc.flush();
    const held = [nc.request(subject, te.encode('a'), { timeout: 5000 }), nc.request(subject, te.encode('b'), { timeout: 5000 })];
    await until('two in flight', () => ep.inFlight === 2);
    const over = await nc.request(subject, te.encode('c'), { timeout: 2000 });
    expect(readErrorHeaders(over.headers)).toMatchObject({ code: 'OVERLOADED', retryable: true });
    expect(over.headers?.get('Nats-Service-Error-Code')).toBe('429');
    for (const g of gates) g();
    expect((await Promise.all(held)).map((m) => td.decode(m.data))).toEqual(['a', 'b']);
    const m = await registry.metrics();
    expect(m).toContain('vantage_requests_refused_total{endpoint="slow",reason="overloaded",service="responder-int"} 1');
    expect(m).toContain('vantage_requests_total{endpoint="slow",outcome="overloaded",service="responder-int"} 1');
    expect(m).toContain('vantage_requests_total{endpoint="slow",outcome="ok",service="responder-int"} 2');
    expect(m).toContain('vantage_requests_in_flight{endpoint="slow",service="responder-int"} 0');
    expect(m).toContain('vantage_request_duration_seconds_count{service="responder-int",endpoint="slow"} 2');
    expect(m).toContain('vantage_errors_total{code="overloaded",service="responder-int"} 1');
    await r.stop();
  });

  it('a burst larger than the limit is refused in part even with a synchronous handler', async () => {
    const subject = uniqueName('burst');
    let handled = 0;
    const r = createResponder(nc, { name: 'burst', log: cap.log, maxInFlight: 4, discovery: false });
    r.add('sync', { subject, handler: (m) => (handled++, m.data) });
    await nc.flush();
    const replies = await burst(
      peer,
      subject,
      Array.from({ length: 300 }, (_, i) => String(i)),
    );
    const overloaded = replies.filter((m) => readErrorHeaders(m.headers)?.code === 'OVERLOADED').length;
    const ok = replies.filter((m, i) => readErrorHeaders(m.headers) === null && td.decode(m.data) === String(i)).length;
    expect(ok + overloaded).toBe(300);
    expect(ok).toBe(handled);
    expect(overloaded).toBeGreaterThan(0);
    expect(ok).toBeGreaterThanOrEqual(4);
    await r.stop();
  });

  it('stop: no new requests, those in flight finish, then it resolves; registerShutdown runs it in the phases', async () => {
    const subject = uniqueName('drain');
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const r = createResponder(nc, { name: 'drainer', log: cap.log });
    const ep = r.add('slow', { subject, handler: async () => (await gate, te.encode('finished')) });
    await nc.flush();
    const inFlight = peer.request(subject, Empty, { timeout: 5000 });
    await until('one in flight', () => ep.inFlight === 1);

    const shutdown = createShutdown({ deadlineMs: 5000, log: cap.log, signals: [], exit: () => {} });
    r.registerShutdown(shutdown);
    const report = shutdown.trigger('test');
    let done = false;
    void report.then(() => (done = true));
    await sleep(100);
    expect(done).toBe(false);
    expect(shutdown.state).toBe('draining');
    // Intake has stopped: a new request finds nobody.
    await expect(peer.request(subject, Empty, { timeout: 1000 })).rejects.toThrow();
    release();
    expect(td.decode((await inFlight).data)).toBe('finished');
    expect((await report).exitCode).toBe(0);
    expect(r.inFlight).toBe(0);
    // Discovery stopped in the close phase.
    await expect(peer.request(`$SRV.PING.drainer.${r.id}`, Empty, { timeout: 500 })).rejects.toThrow();
  });

  it('answers $SRV PING, INFO and STATS as the micro-service protocol has them', async () => {
    const subject = uniqueName('disco');
    const r = createResponder(nc, { name: 'vantage-test-disco', version: '1.2.3', description: 'a test service', metadata: { pools: 'a,b' }, log: cap.log });
    r.add('observe-a', { subject, queue: 'q-a', metadata: { pool: 'a' }, handler: (m) => m.data });
    r.add('observe-b', { subject: `${subject}.b`, handler: () => Promise.reject(new VantageError('NOT_FOUND', 'nothing')) });
    await nc.flush();
    await peer.request(subject, te.encode('x'), { timeout: 2000 });
    await peer.request(`${subject}.b`, Empty, { timeout: 2000 });

    // PING on the bare subject reaches every service on the broker: keep ours.
    const inbox = createInbox();
    const pings: Record<string, unknown>[] = [];
    const sub = peer.subscribe(inbox, { callback: (_e, m) => void pings.push(m.json<Record<string, unknown>>()) });
    peer.publish('$SRV.PING', Empty, { reply: inbox });
    peer.publish('$SRV.PING.vantage-test-disco', Empty, { reply: inbox });
    await sleep(300);
    sub.unsubscribe();
    const ours = pings.filter((p) => p['id'] === r.id);
    expect(ours).toHaveLength(2);
    expect(ours[0]).toEqual({ type: 'io.nats.micro.v1.ping_response', name: 'vantage-test-disco', id: r.id, version: '1.2.3', metadata: { pools: 'a,b' } });

    const info = (await peer.request(`$SRV.INFO.vantage-test-disco.${r.id}`, Empty, { timeout: 2000 })).json<Record<string, unknown>>();
    expect(info).toEqual({
      type: 'io.nats.micro.v1.info_response',
      name: 'vantage-test-disco',
      id: r.id,
      version: '1.2.3',
      description: 'a test service',
      metadata: { pools: 'a,b' },
      endpoints: [
        { name: 'observe-a', subject, queue_group: 'q-a', metadata: { pool: 'a' } },
        { name: 'observe-b', subject: `${subject}.b`, queue_group: 'vantage-test-disco', metadata: {} },
      ],
    });

    const stats = (await peer.request(`$SRV.STATS.vantage-test-disco.${r.id}`, Empty, { timeout: 2000 })).json<Record<string, unknown>>();
    expect(stats).toMatchObject({ type: 'io.nats.micro.v1.stats_response', name: 'vantage-test-disco', id: r.id, version: '1.2.3' });
    expect(Number.isNaN(Date.parse(String(stats['started'])))).toBe(false);
    const eps = stats['endpoints'] as Record<string, unknown>[];
    expect(eps[0]).toMatchObject({ name: 'observe-a', subject, queue_group: 'q-a', num_requests: 1, num_errors: 0, last_error: '' });
    expect(eps[1]).toMatchObject({ name: 'observe-b', num_requests: 1, num_errors: 1, last_error: 'NOT_FOUND: nothing' });
    expect(eps[0]!['processing_time']).toBeGreaterThanOrEqual(0);
    await r.stop();
  });

  it('coalescing on and off give the same replies; on, a burst leaves in fewer writes than replies', async () => {
    const handler: RequestHandler = (m) => {
      const t = td.decode(m.data);
      const n = Number(t);
      if (n % 7 === 0) throw new VantageError('BAD_REQUEST', `bad ${t}`);
      if (n % 5 === 0) return sleep(n % 3).then(() => te.encode(`late ${t}`));
      if (n % 11 === 0) return Promise.reject(new VantageError('NOT_FOUND', `none ${t}`));
      return te.encode(`now ${t}`);
    };
    const plain = uniqueName('plain');
    const coalesced = uniqueName('coalesced');
    const outbox = new Outbox(nc);
    const a = createResponder(nc, { name: 'plain', log: cap.log, discovery: false });
    a.add('x', { subject: plain, handler });
    const b = createResponder(nc, { name: 'coalesced', log: cap.log, discovery: false, outbox });
    b.add('x', { subject: coalesced, handler });
    await nc.flush();
    const bodies = Array.from({ length: 200 }, (_, i) => String(i));
    const [pa, pb] = await Promise.all([burst(peer, plain, bodies), burst(peer, coalesced, bodies)]);
    expect(pb.map(text)).toEqual(pa.map(text));
    expect(pa.map(text)).toContain('err:BAD_REQUEST:bad 14');
    expect(pa.map(text)).toContain('ok:late 10');
    expect(outbox.flushes).toBeGreaterThan(0);
    expect(outbox.flushes).toBeLessThan(200);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('errorBody: a protocol that carries failures in its body gets them there, refusals included', async () => {
    const subject = uniqueName('body');
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const r = createResponder(nc, { name: 'body', log: cap.log, maxInFlight: 1, discovery: false });
    r.add('g', {
      subject,
      handler: async (m) => (td.decode(m.data) === 'boom' ? Promise.reject(new Error('boom')) : (await gate, te.encode('accepted'))),
      errorBody: (err) => te.encode(`failed ${err.label}`),
    });
    await nc.flush();
    const first = peer.request(subject, Empty, { timeout: 5000 });
    await sleep(50);
    const refused = await peer.request(subject, Empty, { timeout: 2000 });
    expect(refused.headers).toBeUndefined();
    expect(td.decode(refused.data)).toBe('failed overloaded');
    release();
    expect(td.decode((await first).data)).toBe('accepted');
    expect(td.decode((await peer.request(subject, te.encode('boom'), { timeout: 2000 })).data)).toBe('failed internal');
    await r.stop();
  });
});
