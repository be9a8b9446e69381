/**
 * /healthz tells the truth about the outcome service's brokers (issue 25, item 7): Kafka stopped
 * (the service idle, so only its probe can notice) and nats-server stopped each turn it unhealthy
 * past their thresholds, with the reason, and healthy again after they are back; a progress record
 * forged under another transactional id is refused and counted; requests published before and after
 * are written exactly once.
 */
import kafkajs from 'kafkajs';
import { eventually, ownKafka, ownNats } from '@vantage/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { progressRecord } from '../src/progress';
import { decision, decodeOutcomes, inProcess, names, Publisher, readTopic, serviceEnv } from './helpers';

interface Health {
  status: number;
  body: { ok: boolean; details: Record<string, Record<string, unknown>> };
}

async function health(port: number): Promise<Health> {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  return { status: res.status, body: (await res.json()) as Health['body'] };
}

/** The topic read back, or [] while the broker is not ready to answer (just created or restarted). */
const tryRead = (brokers: string, topic: string): Promise<{ value: Buffer | null }[]> => readTopic(brokers, topic, 20_000).catch(() => []);

describe('outcome: /healthz with Kafka and NATS stopped and started again', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it('is unhealthy with the reason while a broker is down, healthy after; forged progress refused', { timeout: 240_000 }, async () => {
    const [nats, kafka] = await Promise.all([ownNats(), ownKafka()]);
    cleanups.push(nats.cleanup, kafka.cleanup);
    const n = names('health');
    const env = serviceEnv(n, nats.url, kafka.brokers, {
      VANTAGE_OUTCOME_HEALTH_KAFKA_DOWN_MS: '1500',
      VANTAGE_OUTCOME_HEALTH_KAFKA_PROBE_MS: '500',
      VANTAGE_HEALTH_NATS_DOWN_MS: '1000',
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1000',
    });
    const { svc, outcome } = await inProcess(env);
    cleanups.push(async () => void (await svc.stop('test done')));
    const port = svc.opsPort;
    const pub = await Publisher.open(nats.url, n);
    cleanups.push(() => pub.close());

    const ds = Array.from({ length: 20 }, (_, i) => decision(i, 'h'));
    for (const d of ds.slice(0, 10)) await pub.request(d);
    await eventually('first outcomes written', async () => (await tryRead(kafka.brokers, n.topics.outcomes)).length >= 10, 60_000, 500);
    expect((await health(port)).status).toBe(200);

    // A progress record under another writer's id: refused, counted, never trusted.
    const k = new kafkajs.Kafka({ brokers: [kafka.brokers], clientId: 'forger', logLevel: kafkajs.logLevel.NOTHING });
    const producer = k.producer();
    await producer.connect();
    await producer.send({ topic: n.topics.progress, messages: [{ partition: 0, value: JSON.stringify(progressRecord('someone-else', 'forged', Date.now(), new Map([[n.decisionsStream, [1, 1_000_000]]]), new Map())) }] });
    await producer.disconnect();
    await eventually('forged progress refused', async () => (await svc.ctx.registry.getSingleMetric('vantage_outcome_progress_refused_total')!.get()).values.some((v) => v.labels['reason'] === 'foreign_writer' && v.value === 1), 30_000, 100);

    const unhealthy = async (check: string): Promise<Health> => {
      let got: Health | undefined;
      await eventually(`unhealthy (${check})`, async () => {
        const h = await health(port);
        if (h.status === 503 && h.body.details[check]?.['ok'] === false) got = h;
        return got !== undefined;
      }, 60_000, 100);
      return got!;
    };

    // Kafka down while the service is idle: its probe notices.
    const t0 = Date.now();
    await kafka.stop();
    const hk = await unhealthy('kafka');
    const kafkaAfterMs = Date.now() - t0;
    expect(String(hk.body.details['kafka']!['reason'])).not.toBe('');
    await kafka.start();
    await eventually('healthy after Kafka is back', async () => (await health(port)).status === 200, 120_000, 250);

    // NATS down.
    const t1 = Date.now();
    await nats.stop();
    const hn = await unhealthy('nats');
    const natsAfterMs = Date.now() - t1;
    expect(hn.body.details['nats']!['reason']).toBe('disconnected');
    await nats.start();
    await eventually('healthy after NATS is back', async () => (await health(port)).status === 200, 60_000, 250);

    for (const d of ds.slice(10)) await pub.request(d);
    let outs: ReturnType<typeof decodeOutcomes> = [];
    await eventually('every outcome written', async () => (outs = decodeOutcomes(await tryRead(kafka.brokers, n.topics.outcomes))).length >= 20, 120_000, 500);
    expect(outs.map((o) => o.requestId).sort()).toEqual(ds.map((d) => d.requestId).sort());
    expect(outcome.role).toBe('leader');
    console.log(
      `[health] outcome: unhealthy ${kafkaAfterMs} ms after Kafka stopped ("${String(hk.body.details['kafka']!['reason']).slice(0, 120)}"), ${natsAfterMs} ms after nats-server stopped; healthy again after each restart; forged progress record refused`,
    );
  });
});
