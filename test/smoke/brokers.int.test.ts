/**
 * Smoke tests through the runtime helpers every service uses: request-reply with typed
 * errors over real NATS, a JetStream stream with a durable consumer, and Kafka produce
 * and consume with a consumer group — against the brokers the testkit started.
 */
import { AckPolicy, jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectKafka,
  connectNats,
  createLogger,
  createResponder,
  ensureDurableConsumer,
  ensureStream,
  request,
  VantageError,
  type KafkaClient,
  type Logger,
  type NatsConnection,
} from '@vantage/runtime';
import { kafkaBrokers, natsUrl, uniqueName } from '@vantage/testkit';

const log: Logger = createLogger({ service: 'smoke', instanceId: 'test', level: 'silent' });
const natsSettings = () => ({ url: natsUrl(), name: 'smoke', reconnectTimeWaitMs: 200, reconnectJitterMs: 0, maxReconnectAttempts: -1, connectTimeoutMs: 5000 });

describe('NATS through the runtime', () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connectNats(natsSettings(), log);
  });
  afterAll(async () => {
    await nc.drain();
  });

  it('publishes to a subscriber', async () => {
    const subject = uniqueName('smoke.pub');
    const got = new Promise<string>((resolve) => {
      nc.subscribe(subject, { max: 1, callback: (_e, m) => resolve(m.string()) });
    });
    nc.publish(subject, 'hello');
    expect(await got).toBe('hello');
  });

  it('answers requests, and keeps no-responders, timeouts and service errors apart', async () => {
    const subject = uniqueName('smoke.echo');
    const server = createResponder(nc, { name: 'smoke', log, discovery: false });
    server.add('echo', {
      subject,
      queue: '',
      handler: (m) => {
        const body = new TextDecoder().decode(m.data);
        if (body === 'bad') throw new VantageError('BAD_REQUEST', 'bad body');
        if (body === 'slow') return new Promise((r) => setTimeout(() => r(new Uint8Array([1])), 2_000));
        return new Uint8Array([...m.data].reverse());
      },
    });
    await nc.flush();
    const ok = await request(nc, subject, new Uint8Array([1, 2, 3]), { timeoutMs: 2000 });
    expect([...ok.data]).toEqual([3, 2, 1]);
    await expect(request(nc, subject, 'bad', { timeoutMs: 2000 })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    await expect(request(nc, subject, 'slow', { timeoutMs: 200 })).rejects.toMatchObject({ code: 'NATS_TIMEOUT' });
    await expect(request(nc, uniqueName('nobody'), 'x', { timeoutMs: 2000 })).rejects.toMatchObject({ code: 'NATS_NO_RESPONDERS' });
    await server.stop();
  });

  it('keeps messages in a JetStream stream for a durable consumer across connections', async () => {
    const name = uniqueName('S');
    await ensureStream(nc, { name, subjects: [`${name}.>`] }, log);
    await ensureDurableConsumer(nc, name, { durable_name: 'd', ack_policy: AckPolicy.Explicit }, log);
    const js = jetstream(nc);
    for (let i = 0; i < 5; i++) await js.publish(`${name}.x`, String(i));
    const got: string[] = [];
    const first = await (await js.consumers.get(name, 'd')).fetch({ max_messages: 2, expires: 2000 });
    for await (const m of first) {
      got.push(m.string());
      m.ack();
    }
    const nc2 = await connectNats({ ...natsSettings(), name: 'smoke-2' }, log);
    const rest = await (await jetstream(nc2).consumers.get(name, 'd')).fetch({ max_messages: 3, expires: 2000 });
    for await (const m of rest) {
      got.push(m.string());
      m.ack();
    }
    await nc2.close();
    expect(got).toEqual(['0', '1', '2', '3', '4']);
  });
});

describe('Kafka through the runtime', () => {
  let kafka: KafkaClient;
  beforeAll(async () => {
    kafka = await connectKafka({ brokers: kafkaBrokers(), clientId: 'smoke', connectionTimeoutMs: 3000, requestTimeoutMs: 30000, retries: 5 }, log);
  });
  afterAll(async () => {
    await kafka.close();
  });

  it('produces idempotently and consumes with a consumer group that commits its offsets', async () => {
    const topic = uniqueName('smoke');
    const groupId = uniqueName('g');
    await kafka.ensureTopics([{ topic, partitions: 3 }]);
    const producer = await kafka.createProducer();
    await producer.raw.send({ topic, acks: -1, messages: Array.from({ length: 30 }, (_, i) => ({ key: `k${i % 7}`, value: String(i) })) });
    const consumer = await kafka.createConsumer({ groupId });
    await consumer.subscribe({ topic, fromBeginning: true });
    const seen: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`saw ${seen.length}/30`)), 30_000);
      void consumer.run({
        eachMessage: async ({ message }) => {
          seen.push(message.value!.toString());
          if (seen.length === 30) {
            clearTimeout(t);
            resolve();
          }
        },
      });
    });
    await consumer.disconnect(); // commits the consumed offsets
    expect(seen.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    const offsets = await kafka.admin.fetchOffsets({ groupId, topics: [topic] });
    expect(offsets[0]!.partitions.reduce((s, p) => s + Number(p.offset), 0)).toBe(30);
    await kafka.admin.deleteTopics({ topics: [topic] });
  });
});
