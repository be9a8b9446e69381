import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { createLogger, readErrorHeaders, runtimeMetrics, VantageError } from '@vantage/runtime';
import { natsUrl, uniqueName } from '@vantage/testkit';
import { Outbox } from '../src/outbox';
import { serveRoutes } from '../src/server';

const log = createLogger({ service: 'test', instanceId: 'test', level: 'silent' });
const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

describe('route server over real NATS', () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
  });
  afterAll(async () => {
    await nc.close();
  });

  it('replies through the outbox; errors and OVERLOADED in headers; request metrics; stop waits for handlers', async () => {
    const subject = uniqueName('route');
    const registry = new Registry();
    const metrics = runtimeMetrics(registry);
    const outbox = new Outbox(nc);
    let release: (() => void) | null = null;
    const server = serveRoutes(nc, subject, { queue: 'q', log, metrics, maxInFlight: 1, outbox }, async (data) => {
      const t = dec(data);
      if (t === 'bad') throw new VantageError('BAD_REQUEST', 'nope');
      if (t === 'slow') await new Promise<void>((r) => (release = r));
      return enc(`re:${t}`);
    });
    await nc.flush();

    expect(dec((await nc.request(subject, enc('a'), { timeout: 2000 })).data)).toBe('re:a');
    const bad = await nc.request(subject, enc('bad'), { timeout: 2000 });
    expect(readErrorHeaders(bad.headers)).toMatchObject({ code: 'BAD_REQUEST' });

    // One handler in flight (maxInFlight 1): the next request is refused at once.
    const slow = nc.request(subject, enc('slow'), { timeout: 5000 });
    while (server.inFlight === 0) await new Promise((r) => setTimeout(r, 5));
    const over = await nc.request(subject, enc('b'), { timeout: 2000 });
    expect(readErrorHeaders(over.headers)).toMatchObject({ code: 'OVERLOADED' });

    // stop() drains intake and resolves only once the slow handler has replied.
    const stopped = server.stop();
    let done = false;
    void stopped.then(() => (done = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(done).toBe(false);
    release!();
    await stopped;
    expect(dec((await slow).data)).toBe('re:slow');

    const text = await registry.metrics();
    expect(text).toContain(`vantage_requests_total{subject="${subject}",outcome="ok"} 2`);
    expect(text).toContain(`vantage_requests_total{subject="${subject}",outcome="bad_request"} 1`);
    expect(text).toContain(`vantage_requests_total{subject="${subject}",outcome="overloaded"} 1`);
    expect(text).toContain(`vantage_requests_in_flight{subject="${subject}"} 0`);
    expect(text).toContain(`vantage_request_duration_seconds_count{subject="${subject}"} 3`);
  });
});
