/**
 * Trust checks the broker cannot make (issue 25, item 5): a booking, lifecycle event or
 * registration on this pool's subject that names another pool is rejected (`pool_mismatch`) and
 * changes nothing; the same message naming this pool is applied.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { bookingsSubject, lifecycleEventCodec, lifecycleSubject, workerRegistrationCodec, workersSubject } from '@vantage/protocol';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBooking, observe, publishRegistration, spawnIndexer, type IndexerChild } from './helpers';

const BS = 16;

describe('indexer: messages naming another pool', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('trust').replace(/-/g, '_');
  const other = `${pool}_other`;

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({ natsUrl: natsUrl(), pools: [{ name: pool, blockSize: BS }] });
  });
  afterAll(async () => {
    await child?.stop();
    await nc?.close();
  });

  it('rejects them and applies nothing', async () => {
    const cap = { totalKvBlocks: 100, maxNumBatchedTokens: 1024, maxNumSeqs: 8, dpStartRank: 0, dpSize: 1, schedulable: true };
    publishRegistration(nc, pool, BS, 5n, cap);
    const booking = { requestId: 'r1', workerId: 5n, dpRank: 0, promptTokens: 64, overlapBlocks: 0, sequenceHashes: BigUint64Array.of(1n, 2n) };
    // Another pool's booking, registration and lifecycle event, on this pool's subjects.
    nc.publish(bookingsSubject(pool), encodeBooking(other, { ...booking, requestId: 'forged' }));
    nc.publish(
      workersSubject(pool),
      workerRegistrationCodec.encode({ kind: 'register', pool: other, workerId: 6n as WorkerId, atMs: Date.now(), capacity: { blockSize: BS, ...cap }, ttlMs: 60_000, endpoint: null, model: null }),
    );
    nc.publish(bookingsSubject(pool), encodeBooking(pool, booking));
    await nc.flush();
    const life = (p: string, kind: 'done'): Uint8Array => lifecycleEventCodec.encode({ requestId: 'r1', sessionId: 's', pool: p, kind, atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null });
    await eventually('own booking applied', async () => (await child.metric('vantage_indexer_events_applied_total', { pool, kind: 'book_booked' })) === 1);
    nc.publish(lifecycleSubject(pool), life(other, 'done')); // must not release r1
    await nc.flush();
    await eventually('three rejected', async () => (await child.metric('vantage_indexer_messages_rejected_total', { pool, reason: 'pool_mismatch' })) === 3);
    const r = await observe(nc, pool, BigUint64Array.of(9n), BS);
    expect(r.workers.map((w) => [w.workerId, w.R])).toEqual([[5n, 1]]);
    expect(child.lines.some((l) => l['msg'] === 'message rejected' && l['reason'] === 'pool_mismatch')).toBe(true);
    // The same lifecycle event naming this pool releases it.
    nc.publish(lifecycleSubject(pool), life(pool, 'done'));
    await nc.flush();
    await eventually('released', async () => (await observe(nc, pool, BigUint64Array.of(9n), BS)).workers[0]?.R === 0);
  });
});
