import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createLogger, VantageError, writeErrorHeaders } from '@vantage/runtime';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import { RecordPublisher } from '../src/publisher';
import { Requester } from '../src/requester';

const log = createLogger({ service: 'test', instanceId: 'test', level: 'silent' });

describe('requester and record publisher over real NATS', () => {
  let nc: NatsConnection;
  let requester: Requester;
  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    requester = new Requester(nc);
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

  it('retries records until the stream exists and stores each exactly once', async () => {
    const stream = uniqueName('REC').replace(/-/g, '_');
    const subject = `${uniqueName('rec')}.decisions`;
    const pub = new RecordPublisher({ requester, subject, log, maxInFlight: 4, maxQueued: 100, publishTimeoutMs: 500, retryBaseMs: 20, retryMaxMs: 100 });
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
});
