/** Smoke tests: the shared test brokers do what every service relies on. */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kafkaBrokers, natsUrl, uniqueName } from '@vantage/testkit';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

describe('NATS', () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
  });
  afterAll(async () => {
    await nc.drain();
  });

  it('publishes to a subscriber and answers a request', async () => {
    const subject = uniqueName('smoke');
    const sub = nc.subscribe(`${subject}.echo`);
    void (async () => {
      for await (const m of sub) m.respond(new Uint8Array([...m.data].reverse()));
    })();
    const r = await nc.request(`${subject}.echo`, new Uint8Array([1, 2, 3]), { timeout: 2000 });
    expect([...r.data]).toEqual([3, 2, 1]);
    sub.unsubscribe();
  });

  it('keeps messages in a JetStream stream for a durable consumer across reconnects', async () => {
    const name = uniqueName('S');
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name, subjects: [`${name}.>`] });
    const js = jetstream(nc);
    for (let i = 0; i < 5; i++) await js.publish(`${name}.x`, String(i));
    await jsm.consumers.add(name, { durable_name: 'd', ack_policy: AckPolicy.Explicit });
    const c1 = await js.consumers.get(name, 'd');
    const first = await c1.fetch({ max_messages: 2, expires: 2000 });
    const got: string[] = [];
    for await (const m of first) {
      got.push(m.string());
      m.ack();
    }
    // A second connection picks up where the durable consumer left off.
    const nc2 = await connect({ servers: natsUrl() });
    const c2 = await jetstream(nc2).consumers.get(name, 'd');
    const rest = await c2.fetch({ max_messages: 3, expires: 2000 });
    for await (const m of rest) {
      got.push(m.string());
      m.ack();
    }
    await nc2.close();
    expect(got).toEqual(['0', '1', '2', '3', '4']);
    await jsm.streams.delete(name);
  });
});

describe('Kafka', () => {
  it('produces idempotently and consumes with a consumer group, committing offsets', async () => {
    const kafka = new Kafka({ brokers: kafkaBrokers(), clientId: 'smoke', logLevel: logLevel.NOTHING });
    const topic = uniqueName('smoke');
    const groupId = uniqueName('g');
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: Array.from({ length: 30 }, (_, i) => ({ key: `k${i % 7}`, value: String(i) })) });
    await producer.disconnect();

    const consume = async (want: number): Promise<string[]> => {
      const consumer = kafka.consumer({ groupId });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const seen: string[] = [];
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`saw ${seen.length}/${want}`)), 30_000);
        void consumer.run({
          eachMessage: async ({ message }) => {
            seen.push(message.value!.toString());
            if (seen.length === want) {
              clearTimeout(t);
              resolve();
            }
          },
        });
      });
      await consumer.disconnect(); // commits the consumed offsets
      return seen;
    };
    const first = await consume(30);
    expect(first.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    const offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
    const committed = offsets[0]!.partitions.reduce((s, p) => s + Number(p.offset), 0);
    expect(committed).toBe(30);
    await admin.deleteTopics({ topics: [topic] });
    await admin.disconnect();
  });
});
