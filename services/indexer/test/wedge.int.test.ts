/**
 * The wedge from issue 25: one valid worker registration with `dpSize` 4294967295 on
 * `vantage.v1.workers.{pool}` made the next observe time out and /healthz stop answering (the pool
 * created a rank slot per dp rank, each found by a linear scan). The registration must be refused
 * (counted as a limit hit) and the service must keep answering within the usual time.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observe, publishRegistration, spawnIndexer, type IndexerChild } from './helpers';

const BS = 16;

describe('indexer: a registration with dpSize 4294967295', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('wedge').replace(/-/g, '_');

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({ natsUrl: natsUrl(), pools: [{ name: pool, blockSize: BS }] });
  });
  afterAll(async () => {
    await child?.stop();
    await nc?.close();
  });

  it('is refused and counted; observe and /healthz keep answering', async () => {
    const cap = { totalKvBlocks: 1000, maxNumBatchedTokens: 8192, maxNumSeqs: 64, dpStartRank: 0, schedulable: true };
    publishRegistration(nc, pool, BS, 7n, { ...cap, dpSize: 2 });
    await nc.flush();
    const local = BigUint64Array.of(11n, 12n);
    // The good worker's two ranks are listed.
    await eventually('registration applied', async () => (await observe(nc, pool, local, 2 * BS, 2_000)).workers.length === 2);
    const before = await observe(nc, pool, local, 2 * BS, 2_000);
    expect(before.workers.map((w) => `${w.workerId}:${w.dpRank}`)).toEqual(['7:0', '7:1']);

    publishRegistration(nc, pool, BS, 8n, { ...cap, dpSize: 4294967295 });
    await nc.flush();

    const t0 = Date.now();
    const after = await observe(nc, pool, local, 2 * BS, 2_000);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(after.workers.map((w) => `${w.workerId}:${w.dpRank}`)).toEqual(['7:0', '7:1']);

    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 2_000);
    const res = await fetch(`http://127.0.0.1:${child.opsPort}/healthz`, { signal: ac.signal });
    clearTimeout(timer);
    expect(res.status).toBe(200);

    expect(await child.metric('vantage_indexer_limit_hits_total', { pool, limit: 'dp_ranks_per_worker' })).toBe(1);
    const line = await child.waitLog((l) => l['msg'] === 'message refused' && l['limit'] === 'dp_ranks_per_worker', 5_000);
    expect(line['workerId']).toBe('8');
  });
});
