import { existsSync } from 'node:fs';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { ownKafka, ownNats, uniqueName } from '@vantage/testkit';
import { connect } from '@nats-io/transport-node';

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

async function roundTrip(brokers: string, topic: string, value: string): Promise<string[]> {
  const kafka = new Kafka({ brokers: [brokers], clientId: 'restart-test', logLevel: logLevel.NOTHING, retry: { retries: 10 } });
  const admin = kafka.admin();
  await admin.connect();
  const existing = await admin.listTopics();
  if (!existing.includes(topic)) await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  await producer.send({ topic, acks: -1, messages: [{ value }] });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: uniqueName('g') });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only saw ${seen.join(',')}`)), 30_000);
    void consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value?.toString() ?? '');
        if (seen.includes(value)) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  return seen;
}

describe('broker process control', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });

  it('restarts Kafka after a graceful stop and after kill -9 left a stale pid file, keeping its data', async () => {
    const k = await ownKafka();
    cleanups.push(k.cleanup);
    const topic = uniqueName('restart');
    expect(await roundTrip(k.brokers, topic, 'before')).toEqual(['before']);

    await k.stop();
    expect(k.pid()).toBeUndefined();
    expect(existsSync(k.pidFile)).toBe(false);
    await k.start();
    expect(await roundTrip(k.brokers, topic, 'after-stop')).toEqual(['before', 'after-stop']);

    const pidBefore = k.pid();
    expect(pidBefore).toBeTypeOf('number');
    await k.kill9();
    // A crash leaves the pid file behind, naming a process that no longer exists.
    expect(existsSync(k.pidFile)).toBe(true);
    expect(k.pid()).toBeUndefined();
    await k.start();
    expect(k.pid()).not.toBe(pidBefore);
    expect(await roundTrip(k.brokers, topic, 'after-kill')).toEqual(['before', 'after-stop', 'after-kill']);
  });

  it('restarts nats-server with its JetStream store intact', async () => {
    const n = await ownNats();
    cleanups.push(n.cleanup);
    const { jetstreamManager } = await import('@nats-io/jetstream');
    let nc = await connect({ servers: n.url });
    const jsm = await jetstreamManager(nc);
    const stream = uniqueName('S');
    await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
    await jsm.jetstream().publish(`${stream}.a`, 'x');
    await nc.close();
    await n.kill9();
    await n.start();
    nc = await connect({ servers: n.url });
    const info = await (await jetstreamManager(nc)).streams.info(stream);
    expect(info.state.messages).toBe(1);
    await nc.close();
  });
});
