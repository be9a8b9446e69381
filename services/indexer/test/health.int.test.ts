/**
 * /healthz tells the truth about JetStream consumption (issue 25, item 7): deleting the indexer's
 * durable consumer, and deleting the stream while something else holds its subject (so it cannot
 * be made again), each turn the pool unhealthy with the reason; once the consumer can be made again
 * the indexer re-creates it, reports healthy and applies new events.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { jetStreamKvStreamName, jetStreamKvSubject } from '@vantage/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventGen, kvPublisher, makeDocs, observe, spawnIndexer, type IndexerChild } from './helpers';

const BS = 16;

interface Health {
  status: number;
  body: { ok: boolean; details: Record<string, unknown> };
}

async function health(port: number): Promise<Health> {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  return { status: res.status, body: (await res.json()) as Health['body'] };
}

describe('indexer: /healthz and JetStream consumption', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let child: IndexerChild;
  const pool = uniqueName('jshealth').replace(/-/g, '_');
  const stream = jetStreamKvStreamName(pool, 'backend');
  const subject = jetStreamKvSubject(pool, 'backend');
  const durable = uniqueName('dur');

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    jsm = await jetstreamManager(nc);
    child = await spawnIndexer({
      natsUrl: natsUrl(),
      pools: [{ name: pool, blockSize: BS, namespace: pool, kvEvents: 'jetstream' }],
      env: { VANTAGE_INDEXER_DURABLE_NAME: durable, VANTAGE_INDEXER_HEALTH_JETSTREAM_STALLED_MS: '300' },
    });
  });
  afterAll(async () => {
    await child?.stop();
    await jsm?.streams.delete(stream).catch(() => false);
    await nc?.close();
  });

  const docs = makeDocs(7, BS, 1, 3, 2, 3);
  const gen = new EventGen(8, docs, [{ workerId: 41n as WorkerId, dpRank: 0 }]);
  const publish = async (n: number): Promise<void> => {
    const pub = kvPublisher(nc, 'jetstream', pool, 'backend');
    for (const e of gen.events(n)) await pub(e);
  };
  const applied = (): Promise<number> => child.metric('vantage_indexer_events_applied_total', { pool });
  const unhealthyWith = async (what: string, re: RegExp): Promise<Health> => {
    let last: Health | undefined;
    await eventually(
      what,
      async () => {
        last = await health(child.opsPort);
        const js = (last.body.details['pools'] as Record<string, { jetstream?: { reason?: string } }> | undefined)?.[pool]?.jetstream;
        return last.status === 503 && re.test(js?.reason ?? '');
      },
      15_000,
      20,
    ).catch(() => expect(last).toBe('unhealthy'));
    return last!;
  };

  it('is healthy while consuming', async () => {
    await publish(5);
    await eventually('applied', async () => (await applied()) === 5);
    const h = await health(child.opsPort);
    expect(h.status).toBe(200);
  });

  it('turns unhealthy when the consumer is deleted, and healthy once it is re-created', async () => {
    await jsm.consumers.delete(stream, durable);
    const h = await unhealthyWith('unhealthy after the consumer was deleted', /JetStream/);
    expect(h.body.ok).toBe(false);
    await eventually('healthy again', async () => (await health(child.opsPort)).status === 200, 15_000, 50);
    await publish(5);
    await eventually('new events applied', async () => (await applied()) === 10, 15_000);
  });

  it('turns unhealthy while the stream is gone and cannot be made, healthy once it can', async () => {
    await jsm.streams.delete(stream);
    // Something else holds the subject: the indexer cannot create the stream again.
    const blocker = uniqueName('BLOCK').replace(/-/g, '_');
    await jsm.streams.add({ name: blocker, subjects: [subject] });
    const h = await unhealthyWith('unhealthy while the stream is gone', /JetStream/);
    const reason = String((h.body.details['pools'] as Record<string, { jetstream: { reason: string } }>)[pool]!.jetstream.reason);
    // Still unhealthy a while later: nothing pretends the index is fed.
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await health(child.opsPort)).status).toBe(503);
    await jsm.streams.delete(blocker);
    await eventually('healthy again', async () => (await health(child.opsPort)).status === 200, 15_000, 50);
    // The stream is new (its sequence starts again): the indexer reads it from its start.
    await publish(5);
    await eventually('events in the new stream applied', async () => (await applied()) === 15, 15_000);
    const r = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    expect(r.workers.map((w) => w.workerId)).toEqual([41n]);
    console.log(`[health] indexer JetStream: unhealthy with "${reason}", healthy again after the stream could be made`);
  });
});
