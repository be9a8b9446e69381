/**
 * Vitest global setup for the `integration` project: one real nats-server (JetStream)
 * and one real single-node Kafka broker for the whole run, on free ports under a
 * throw-away directory, unless NATS_URL / KAFKA_BROKERS name brokers to reuse.
 * Tests that restart or kill a broker start their own with `ownNats()` / `ownKafka()`.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { INFRA_DIR, kafkaBroker, natsBroker } from '@vantage/infra';

export default async function setup(): Promise<() => Promise<void>> {
  const dir = join(INFRA_DIR, 'test', `run-${process.pid}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const stops: (() => Promise<void>)[] = [];
  const t0 = Date.now();
  const [natsUrl, kafkaBrokers] = await Promise.all([
    (async () => {
      if (process.env.NATS_URL) return process.env.NATS_URL;
      const n = await natsBroker({ dir: join(dir, 'nats'), attached: true });
      await n.start();
      stops.push(() => n.stop(5_000));
      return n.url;
    })(),
    (async () => {
      if (process.env.KAFKA_BROKERS) return process.env.KAFKA_BROKERS;
      const k = await kafkaBroker({ dir: join(dir, 'kafka'), attached: true, heapMb: 512 });
      await k.start();
      stops.push(() => k.stop(10_000));
      return k.brokers;
    })(),
  ]);
  process.stderr.write(`[testkit] brokers ready in ${Date.now() - t0} ms: nats ${natsUrl}, kafka ${kafkaBrokers}\n`);
  // Test files read these (`natsUrl()`, `kafkaBrokers()`): their forks inherit the environment.
  process.env.NATS_URL = natsUrl;
  process.env.KAFKA_BROKERS = kafkaBrokers;
  return async () => {
    await Promise.all(stops.map((s) => s()));
    rmSync(dir, { recursive: true, force: true });
  };
}
