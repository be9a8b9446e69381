/**
 * A stored event whose block hashes repeat (a block equal to another of the event's blocks or to its
 * parent) is refused whole, as Dynamo's router refuses it: counted in `vantage_indexer_kv_refused_total`
 * with reason `self_referencing`, logged, and the index unchanged; the event id is still taken, so the
 * worker's next event is applied without a gap.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sequenceHashes } from '@vantage/hashing';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvPublisher, observe, publishRegistration, spawnIndexer, type IndexerChild } from './helpers';

const BS = 16;
const CAP = { totalKvBlocks: 1000, maxNumBatchedTokens: 4096, maxNumSeqs: 8, dpStartRank: 0, dpSize: 1, schedulable: true };

describe('indexer: self-referencing stored events', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('selfref').replace(/-/g, '_');
  const W = 0xf000_0000_0000_0007n as WorkerId;

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({ natsUrl: natsUrl(), pools: [{ name: pool, blockSize: BS, namespace: pool }] });
  });
  afterAll(async () => {
    expect(await child?.stop()).toBe(0);
    await nc?.close();
  });

  it('refuses the event whole, counts and logs it, and applies the next event without a gap', async () => {
    publishRegistration(nc, pool, BS, W, CAP);
    const publish = kvPublisher(nc, 'event_plane', pool, 'backend');
    const local = BigUint64Array.from({ length: 6 }, (_, i) => BigInt(i * 7919 + 11));
    const seq = sequenceHashes(local);
    const ev = (eventId: bigint, parentHash: bigint | null, blockHashes: BigUint64Array, tokensHashes: BigUint64Array): KvEvent => ({
      workerId: W,
      dpRank: 0,
      storageTier: 'device',
      eventId,
      data: { kind: 'stored', parentHash: parentHash as ExternalHash | null, startPosition: 0, blockHashes, tokensHashes },
    });
    // 1: the first two blocks. 2: a block repeated within the event. 3: a block equal to its parent.
    await publish(ev(1n, null, seq.slice(0, 2), local.slice(0, 2)));
    await publish(ev(2n, seq[1]!, BigUint64Array.of(seq[2]!, seq[3]!, seq[2]!), local.slice(2, 5)));
    await publish(ev(3n, seq[1]!, BigUint64Array.of(seq[1]!), local.slice(1, 2)));
    await nc.flush();
    await eventually('two refused', async () => (await child.metric('vantage_indexer_kv_refused_total', { pool, reason: 'self_referencing' })) === 2);
    const before = await observe(nc, pool, local, local.length * BS);
    expect(before.workers.map((w) => [w.workerId, w.deviceOverlapBlocks, w.suspect])).toEqual([[W, 2, null]]);
    expect(child.lines.some((l) => l['msg'] === 'KV event refused by the index' && l['reason'] === 'self_referencing')).toBe(true);
    // 4 follows 3 without a gap: the refused ids were taken.
    await publish(ev(4n, seq[1]!, seq.slice(2, 6), local.slice(2, 6)));
    await nc.flush();
    await eventually('next event applied', async () => (await observe(nc, pool, local, local.length * BS)).workers[0]?.deviceOverlapBlocks === 6);
    expect(await child.metric('vantage_indexer_kv_gaps_total', { pool })).toBe(0);
    const after = await observe(nc, pool, local, local.length * BS);
    expect(after.workers[0]?.suspect).toBeNull();
  });
});
