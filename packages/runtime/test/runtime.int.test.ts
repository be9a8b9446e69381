// Runtime against real brokers: request-reply error typing over NATS,
// JetStream set-up, Kafka set-up and a whole runService life cycle.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Empty, headers } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { kafkaBrokers, natsUrl, uniqueName } from '@vantage/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseConfigSchema } from '../src/config';
import { VantageError } from '../src/errors';
import { connectKafka } from '../src/kafka';
import { runtimeMetrics } from '../src/metrics';
import { connectNats, ensureDurableConsumer, ensureStream, natsConnected, request, type NatsConnection } from '../src/nats';
import { createRegistry } from '../src/ops';
import { s } from '../src/schema';
import { runService } from '../src/service';
import { captureLogger, serveRequests } from './helpers';

const te = new TextEncoder();
const td = new TextDecoder();
const natsSettings = () => ({
  url: natsUrl(),
  name: 'runtime-int',
  reconnectTimeWaitMs: 200,
  reconnectJitterMs: 0,
  maxReconnectAttempts: -1,
  connectTimeoutMs: 2000,
});

async function rejection(p: Promise<unknown>): Promise<VantageError> {
  const e = await p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(VantageError);
  return e as VantageError;
}

describe('request-reply over NATS', () => {
  const cap = captureLogger('info');
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connectNats(natsSettings(), cap.log);
  });
  afterAll(async () => {
    await nc.drain();
  });

  it('connects and reports itself connected', () => {
    expect(natsConnected(nc)).toBe(true);
    expect(cap.messages()).toContain('nats connected');
  });

  it('success: the handler body comes back', async () => {
    const subject = uniqueName('echo');
    const srv = serveRequests(nc, subject, { queue: 'q', log: cap.log }, (m) => te.encode(`echo:${td.decode(m.data)}`));
    await nc.flush();
    const reply = await request(nc, subject, te.encode('hi'), { timeoutMs: 2000 });
    expect(td.decode(reply.data)).toBe('echo:hi');
    await srv.stop();
  });

  it('no responders is NATS_NO_RESPONDERS', async () => {
    const subject = uniqueName('nobody');
    const e = await rejection(request(nc, subject, Empty, { timeoutMs: 2000 }));
    expect(e.code).toBe('NATS_NO_RESPONDERS');
    expect(e.retryable).toBe(true);
    expect(e.details['subject']).toBe(subject);
  });

  it('a subscriber that never answers is NATS_TIMEOUT', async () => {
    const subject = uniqueName('silent');
    const sub = nc.subscribe(subject, { callback: () => {} });
    await nc.flush();
    const t0 = Date.now();
    const e = await rejection(request(nc, subject, Empty, { timeoutMs: 200 }));
    expect(e.code).toBe('NATS_TIMEOUT');
    expect(Date.now() - t0).toBeLessThan(2000);
    sub.unsubscribe();
  });

  it('a thrown VantageError travels as headers and comes back with its code', async () => {
    const subject = uniqueName('reject');
    const registry = createRegistry('runtime-int');
    const metrics = runtimeMetrics(registry);
    const srv = serveRequests(nc, subject, { log: cap.log, metrics }, () => {
      throw new VantageError('NOT_FOUND', 'no pool named capable-7');
    });
    await nc.flush();
    const e = await rejection(request(nc, subject, Empty, { timeoutMs: 2000 }));
    expect(e.code).toBe('NOT_FOUND');
    expect(e.message).toBe('no pool named capable-7');
    expect(e.retryable).toBe(false);
    expect(e.details).toMatchObject({ remote: true, subject });
    const text = await registry.metrics();
    expect(text).toContain(`vantage_requests_total{endpoint="${subject}",outcome="not_found",service="runtime-int"} 1`);
    expect(text).toContain('vantage_errors_total{code="not_found",service="runtime-int"} 1');
    await srv.stop();
  });

  it('a foreign exception becomes INTERNAL without leaking its message', async () => {
    const subject = uniqueName('crash');
    const srv = serveRequests(nc, subject, { log: cap.log }, () => Promise.reject(new TypeError('x is undefined at /srv/a.ts')));
    await nc.flush();
    const e = await rejection(request(nc, subject, Empty, { timeoutMs: 2000 }));
    expect(e.code).toBe('INTERNAL');
    expect(e.message).toBe('internal error');
    expect(cap.lines.some((l) => l['msg'] === 'request handler failed' && l['level'] === 'error')).toBe(true);
    await srv.stop();
  });

  it('sheds load past maxInFlight with OVERLOADED, and stop() waits for in-flight handlers', async () => {
    const subject = uniqueName('busy');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finished = 0;
    const srv = serveRequests(nc, subject, { log: cap.log, maxInFlight: 1 }, async () => {
      await gate;
      finished++;
      return te.encode('done');
    });
    await nc.flush();
    const first = request(nc, subject, Empty, { timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 50));
    const e = await rejection(request(nc, subject, Empty, { timeoutMs: 2000 }));
    expect(e.code).toBe('OVERLOADED');
    expect(e.retryable).toBe(true);
    let stopped = false;
    const stopping = srv.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(finished).toBe(1);
    expect(td.decode((await first).data)).toBe('done');
  });

  it('passes request headers through', async () => {
    const subject = uniqueName('hdr');
    const srv = serveRequests(nc, subject, { log: cap.log }, (m) => te.encode(m.headers?.get('Trace-Id') ?? 'none'));
    await nc.flush();
    const h = headers();
    h.set('Trace-Id', 't-42');
    const reply = await request(nc, subject, Empty, { timeoutMs: 2000, headers: h });
    expect(td.decode(reply.data)).toBe('t-42');
    await srv.stop();
  });
});

describe('JetStream set-up', () => {
  const cap = captureLogger('info');
  let nc: NatsConnection;
  const stream = uniqueName('RUNTIME').toUpperCase();
  beforeAll(async () => {
    nc = await connectNats(natsSettings(), cap.log);
  });
  afterAll(async () => {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(stream).catch(() => {});
    await nc.drain();
  });

  it('creates, leaves alone, then updates a stream and a durable consumer', async () => {
    const subjects = [`${stream.toLowerCase()}.>`];
    const a = await ensureStream(nc, { name: stream, subjects, max_msgs: 1000 }, cap.log);
    expect(a.config.max_msgs).toBe(1000);
    await ensureStream(nc, { name: stream, subjects, max_msgs: 1000 }, cap.log);
    const c = await ensureStream(nc, { name: stream, subjects, max_msgs: 2000 }, cap.log);
    expect(c.config.max_msgs).toBe(2000);
    expect(cap.messages().filter((m) => m === 'jetstream stream created')).toHaveLength(1);
    expect(cap.messages().filter((m) => m === 'jetstream stream updated')).toHaveLength(1);

    const d1 = await ensureDurableConsumer(nc, stream, { durable_name: 'outcome', max_ack_pending: 100 }, cap.log);
    expect(d1.config.ack_policy).toBe('explicit');
    await ensureDurableConsumer(nc, stream, { durable_name: 'outcome', max_ack_pending: 100 }, cap.log);
    const d3 = await ensureDurableConsumer(nc, stream, { durable_name: 'outcome', max_ack_pending: 200 }, cap.log);
    expect(d3.config.max_ack_pending).toBe(200);
    expect(cap.messages().filter((m) => m === 'jetstream durable consumer created')).toHaveLength(1);
  });

  it('a conflicting immutable change is JETSTREAM_SETUP_FAILED naming the stream', async () => {
    const e = await rejection(ensureStream(nc, { name: stream, subjects: [`${stream.toLowerCase()}.>`], storage: 'memory' as never }, cap.log));
    expect(e.code).toBe('JETSTREAM_SETUP_FAILED');
    expect(e.message).toContain(stream);
  });
});

describe('Kafka set-up', () => {
  it('connects, creates topics idempotently, sends with an idempotent producer', async () => {
    const cap = captureLogger('info');
    const client = await connectKafka(
      { brokers: kafkaBrokers(), clientId: '', connectionTimeoutMs: 3000, requestTimeoutMs: 30000, retries: 3 },
      cap.log,
      'runtime-int',
    );
    try {
      const topic = uniqueName('runtime');
      await client.ensureTopics([{ topic, partitions: 2, config: { 'retention.ms': '3600000' } }]);
      await client.ensureTopics([{ topic, partitions: 3 }]);
      expect(cap.messages().filter((m) => m === 'kafka topics created')).toHaveLength(1);
      expect(cap.lines.some((l) => l['msg'] === 'kafka topic exists with a different partition count; left unchanged')).toBe(true);
      const producer = await client.createProducer();
      const meta = await producer.raw.send({ topic, acks: -1, messages: [{ key: 'session-1', value: 'v' }] });
      expect(meta[0]?.errorCode).toBe(0);
    } finally {
      await client.close();
    }
  });

  it('an unreachable cluster is KAFKA_CONNECT_FAILED naming the brokers', async () => {
    const cap = captureLogger('info');
    const e = await rejection(
      connectKafka({ brokers: ['127.0.0.1:1'], clientId: 'x', connectionTimeoutMs: 200, requestTimeoutMs: 1000, retries: 0 }, cap.log),
    );
    expect(e.code).toBe('KAFKA_CONNECT_FAILED');
    expect(e.message).toContain('127.0.0.1:1');
  });
});

describe('runService', () => {
  it('starts a service, serves health and requests, and shuts down in order with exit 0', async () => {
    const schema = s.extend(baseConfigSchema, { echo: s.object({ prefix: s.string({ default: '>' }) }) });
    const subject = uniqueName('svc');
    const lines: Record<string, unknown>[] = [];
    const exits: number[] = [];
    const order: string[] = [];
    const svc = await runService({
      name: 'echo',
      schema,
      env: { VANTAGE_NATS_URL: natsUrl(), VANTAGE_ECHO_PREFIX: '#', VANTAGE_SHUTDOWN_DEADLINE_MS: '5000' },
      exit: (c) => void exits.push(c),
      signals: [],
      processHandlers: false,
      logDestination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) },
      start(ctx) {
        const prefix: string = ctx.config.echo.prefix;
        const srv = serveRequests(ctx.nc, subject, { queue: 'echo', log: ctx.log, metrics: ctx.metrics }, (m) =>
          te.encode(prefix + td.decode(m.data)),
        );
        ctx.shutdown.register('echo-intake', 'intake', async () => {
          order.push('intake');
          await srv.stop();
        });
        ctx.shutdown.register('echo-flush', 'flush', () => void order.push('flush'));
        ctx.addHealthCheck('echo', () => ({ ok: true, details: { inFlight: srv.inFlight } }));
      },
    });
    const base = `http://127.0.0.1:${svc.opsPort}`;
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true, details: { state: 'running', nats: { ok: true }, echo: { ok: true } } });

    const client = await connectNats(natsSettings(), captureLogger().log);
    const reply = await request(client, subject, te.encode('x'), { timeoutMs: 2000 });
    expect(td.decode(reply.data)).toBe('#x');
    expect(await (await fetch(`${base}/metrics`)).text()).toContain(`vantage_requests_total{endpoint="${subject}",outcome="ok",service="echo"} 1`);

    const report = await svc.stop('test done');
    expect(report.exitCode).toBe(0);
    expect(exits).toEqual([0]);
    expect(order).toEqual(['intake', 'flush']);
    expect(svc.ctx.nc.isClosed()).toBe(true);
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
    const e = await rejection(request(client, subject, Empty, { timeoutMs: 1000 }));
    expect(e.code).toBe('NATS_NO_RESPONDERS');
    await client.drain();
    expect(lines.find((l) => l['msg'] === 'service started')).toMatchObject({ service: 'echo' });
    expect(lines.some((l) => l['msg'] === 'shutdown complete')).toBe(true);
  });
});

describe('a service process', () => {
  it('exits 0 promptly on SIGTERM with NATS and Kafka connected', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'fixtures', 'service-main.ts')], {
      env: {
        PATH: process.env['PATH'],
        VANTAGE_NATS_URL: natsUrl(),
        VANTAGE_KAFKA_BROKERS: kafkaBrokers().join(','),
        VANTAGE_INSTANCE_ID: uniqueName('fx'),
        VANTAGE_SHUTDOWN_DEADLINE_MS: '5000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Record<string, unknown>[] = [];
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as Record<string, unknown>);
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

    const deadline = Date.now() + 60_000;
    while (!lines.some((l) => l['msg'] === 'service started')) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`fixture did not start: ${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const t0 = Date.now();
    child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 10_000))]);
    if (code === 'hung') child.kill('SIGKILL');
    expect(code).toBe(0);
    // kafkajs alone would keep the process alive ~20 s after disconnect.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(lines.map((l) => l['msg'])).toEqual(expect.arrayContaining(['shutdown started', 'shutdown complete']));
    expect(lines.find((l) => l['msg'] === 'shutdown complete')?.['reason']).toBe('signal SIGTERM');
  });
});
