import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createLogger, Outbox, Requester, VantageError, writeErrorHeaders } from '@vantage/runtime';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import { RecordPublisher } from '../src/publisher';

const log = createLogger({ service: 'test', instanceId: 'test', level: 'silent' });

describe('requester and record publisher over real NATS', () => {
  let nc: NatsConnection;
  let requester: Requester;
  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    requester = new Requester(nc, new Outbox(nc));
  });
  afterAll(async () => {
    requester.close();
    await nc.close();
  });

  it('tells a reply, no responders, a timeout and a remote error apart', async () => {
    const subject = uniqueName('req');
    const sub = nc.subscribe(subject, {
      callback: (_e, m) => {
        const t = new TextDecoder().decode(m.data);
        if (t === 'echo') m.respond(m.data);
        if (t === 'fail') {
          // The runtime's own error headers, as serveRequests writes them.
          const h = headers();
          writeErrorHeaders(h, new VantageError('BAD_REQUEST', 'nope'));
          m.respond(new Uint8Array(), { headers: h });
        }
        // 'silent': no reply
      },
    });
    await nc.flush();
    const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
    expect(new TextDecoder().decode((await requester.request(subject, enc('echo'), 1000)).data)).toBe('echo');
    await expect(requester.request(uniqueName('nobody'), enc('x'), 1000)).rejects.toMatchObject({ code: 'NATS_NO_RESPONDERS' });
    await expect(requester.request(subject, enc('silent'), 50)).rejects.toMatchObject({ code: 'NATS_TIMEOUT' });
    const remote = await requester.request(subject, enc('fail'), 1000).catch((e: unknown) => e);
    expect(remote).toBeInstanceOf(VantageError);
    expect(remote).toMatchObject({ code: 'BAD_REQUEST', details: { remote: true } });
    expect(requester.pending).toBe(0);
    sub.unsubscribe();
  });

  // sendDelayMs 0: each record is sent at once; 30: records are held until a kick or the delay.
  it.each([0, 30])('retries records until the stream exists and stores each exactly once (send delay %i ms)', async (sendDelayMs) => {
    const stream = uniqueName('REC').replace(/-/g, '_');
    const subject = `${uniqueName('rec')}.decisions`;
    const pub = new RecordPublisher({ requester, subject, log, maxInFlight: 4, maxQueued: 100, publishTimeoutMs: 500, retryBaseMs: 20, retryMaxMs: 100, sendDelayMs });
    // No stream yet: every publish is refused (no responders) and retried with backoff.
    for (let i = 0; i < 10; i++) pub.enqueue(`rec-${i}`, `req-${i}`, new TextEncoder().encode(`record ${i}`));
    await eventually('a failed attempt', () => pub.failures > 0, 5_000);
    expect(pub.published).toBe(0);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject] });
    try {
      await pub.idle();
      expect(pub.published).toBe(10);
      expect(pub.depth).toBe(0);
      // A record sent again with the same id is deduplicated by the stream.
      pub.enqueue('rec-3', 'req-3', new TextEncoder().encode('record 3'));
      await pub.idle();
      const info = await jsm.streams.info(stream);
      expect(info.state.messages).toBe(10);
    } finally {
      await jsm.streams.delete(stream);
    }
  });

  it('held records leave with the next outbox write once a batch is held, or after the send delay; each stored once', async () => {
    const stream = uniqueName('REC').replace(/-/g, '_');
    const subject = `${uniqueName('rec')}.decisions`;
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [subject] });
    const outbox = new Outbox(nc);
    const viaOutbox = new Requester(nc, outbox);
    const pub = new RecordPublisher({ requester: viaOutbox, subject, log, maxInFlight: 2, maxQueued: 100, publishTimeoutMs: 2000, retryBaseMs: 20, retryMaxMs: 100, sendDelayMs: 60_000, sendBatch: 5 });
    outbox.beforeFlush(() => pub.kick());
    try {
      for (let i = 0; i < 4; i++) pub.enqueue(`held-${i}`, `req-${i}`, new TextEncoder().encode(`record ${i}`));
      // Something else is written, but less than a batch is held: the records stay (the delay is long).
      outbox.publish(uniqueName('other'), new TextEncoder().encode('x'));
      await new Promise((r) => setTimeout(r, 50));
      expect(pub.held).toBe(4);
      expect(pub.published).toBe(0);
      pub.enqueue('held-4', 'req-4', new TextEncoder().encode('record 4'));
      // A batch is held: the next write takes it along (at most maxInFlight at a time, the rest as acks return).
      const flushes = outbox.flushes;
      outbox.publish(uniqueName('other'), new TextEncoder().encode('x'));
      await pub.idle();
      expect(pub.published).toBe(5);
      expect(outbox.flushes - flushes).toBeGreaterThanOrEqual(1);
      expect((await jsm.streams.info(stream)).state.messages).toBe(5);
      viaOutbox.close();
      // Without any other write, the send delay bounds how long a record is held.
      const timed = new RecordPublisher({ requester: new Requester(nc, new Outbox(nc)), subject, log, maxInFlight: 4, maxQueued: 100, publishTimeoutMs: 2000, retryBaseMs: 20, retryMaxMs: 100, sendDelayMs: 30 });
      const t0 = performance.now();
      for (let i = 0; i < 3; i++) timed.enqueue(`timed-${i}`, `req-t${i}`, new TextEncoder().encode(`timed ${i}`));
      expect(timed.held).toBe(3);
      await timed.idle();
      expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
      expect((await jsm.streams.info(stream)).state.messages).toBe(8);
    } finally {
      await jsm.streams.delete(stream);
    }
  });

  it('the outbox sends what one turn queued in one write, in order', async () => {
    const subject = uniqueName('ob');
    const got: string[] = [];
    const sub = nc.subscribe(`${subject}.*`, { callback: (_e, m) => void got.push(`${m.subject.slice(subject.length + 1)}:${new TextDecoder().decode(m.data)}`) });
    await nc.flush();
    const outbox = new Outbox(nc);
    const before = outbox.flushes;
    outbox.publish(`${subject}.a`, new TextEncoder().encode('1'));
    await Promise.resolve(); // a later microtask of the same turn
    outbox.publish(`${subject}.b`, new TextEncoder().encode('2'));
    queueMicrotask(() => outbox.publish(`${subject}.a`, new TextEncoder().encode('3')));
    await eventually('three messages', () => got.length === 3, 5_000);
    expect(got).toEqual(['a:1', 'b:2', 'a:3']);
    expect(outbox.flushes - before).toBe(1);
    // A publish the connection refuses is reported to its sender, not thrown at the turn's other messages.
    const refused: unknown[] = [];
    outbox.publish('', new TextEncoder().encode('bad subject'), undefined, undefined, (e) => refused.push(e));
    outbox.publish(`${subject}.b`, new TextEncoder().encode('4'));
    await eventually('the fourth message', () => got.length === 4, 5_000);
    expect(refused).toHaveLength(1);
    sub.unsubscribe();
  });
});
