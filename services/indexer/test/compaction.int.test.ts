/**
 * The index compacts itself under the running service (real nats-server): a worker stores long
 * chains and evicts their tails, so each chain's head keeps its whole allocation and the room the
 * index has handed out outgrows the tree (`@vantage/prefix-index`'s PrefixIndex rebuilds itself once
 * it passes about four times the tree). The compaction counter rises on /metrics, the index's own
 * figures equal the index fed the same events directly, and observe answers equal the reference
 * before and after the rebuild.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { PrefixIndex } from '@vantage/prefix-index';
import { natsUrl, uniqueName, eventually } from '@vantage/testkit';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { sequenceHashes } from '@vantage/hashing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RefModel, diffReply, kvPublisher, observe, publishRegistration, spawnIndexer, type Capacity, type IndexerChild } from './helpers';

const BS = 16;
/**
 * Chains of LEN blocks, each one stored event then its tail removed: CHAINS * LEN positions handed
 * out for about CHAINS in the tree. The index first looks at its room past 2^16 positions and again
 * once that has doubled, so the rebuild comes past about 131,000 (at about 2,050 chains).
 */
const CHAINS = 2_400;
const LEN = 64;
const W = [18_446_744_073_709_551_557n, 3n] as WorkerId[];
const CAP: Capacity = { totalKvBlocks: 100_000, maxNumBatchedTokens: 2048, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true };

describe('indexer: the index compacts itself while the service runs', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('compact').replace(/-/g, '_');

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({ natsUrl: natsUrl(), pools: [{ name: pool, blockSize: BS, namespace: pool, component: 'backend', kvEvents: 'event_plane' }] });
  });

  afterAll(async () => {
    await child?.stop();
    await nc?.close();
  });

  it('counts its compactions, keeps its figures equal to a direct index and answers as the reference', async () => {
    const publish = kvPublisher(nc, 'event_plane', pool, 'backend');
    const ref = new RefModel(BS);
    const direct = new PrefixIndex(BS);
    let sent = 0;
    for (const w of W) {
      publishRegistration(nc, pool, BS, w, CAP);
      ref.register(w, CAP);
      sent++;
    }
    const ids = new Map<bigint, bigint>();
    const apply = async (ev: KvEvent): Promise<void> => {
      await publish(ev);
      ref.apply(ev);
      direct.apply(ev, 0);
      sent++;
    };
    const event = (w: WorkerId, data: KvEvent['data']): KvEvent => {
      const id = (ids.get(w) ?? 0n) + 1n;
      ids.set(w, id);
      return { workerId: w, dpRank: 0, storageTier: 'device', eventId: id, data };
    };
    // Every chain on worker 0; worker 1 holds the first chain whole (a second publisher whose
    // answers must survive the rebuild too).
    const chains: { local: BigUint64Array; seq: BigUint64Array }[] = [];
    for (let c = 0; c < CHAINS; c++) {
      const local = BigUint64Array.from({ length: LEN }, (_, k) => BigInt(c) * 1_000_003n + BigInt(k) * 7n + 0xabc0_0000_0000_0000n);
      const seq = sequenceHashes(local);
      chains.push({ local, seq });
      const stored = (from: number, to: number): KvEvent['data'] => ({
        kind: 'stored',
        parentHash: from === 0 ? null : (seq[from - 1]! as ExternalHash),
        startPosition: from,
        blockHashes: seq.slice(from, to),
        tokensHashes: local.slice(from, to),
      });
      await apply(event(W[0]!, stored(0, LEN)));
      if (c === 0) await apply(event(W[1]!, stored(0, LEN)));
      await apply(event(W[0]!, { kind: 'removed', blockHashes: seq.slice(1) }));
      if (c % 300 === 299) await nc.flush();
    }
    await nc.flush();
    await eventually('every event applied', async () => (await child.metric('vantage_indexer_events_applied_total', { pool })) >= sent, 30_000);

    const room = direct.room;
    // The workload does strand room as intended: without compaction it would be CHAINS * LEN positions.
    expect(room.compactions).toBeGreaterThan(0);
    expect(room.inTree).toBe(CHAINS - 1 + LEN);
    // The index's block count (what /metrics reports) is the reference's, not only the direct index's.
    let refBlocks = 0;
    for (const p of ref.pubs.values()) for (const s of p.tiers.values()) refBlocks += s.size;
    expect(refBlocks).toBe(CHAINS + LEN);
    expect(direct.totalBlocks).toBe(refBlocks);
    await eventually(
      'index figures on /metrics',
      async () =>
        JSON.stringify(
          await Promise.all(
            ['vantage_indexer_index_compactions_total', 'vantage_indexer_index_blocks', 'vantage_indexer_index_positions', 'vantage_indexer_index_room_positions'].map((n) =>
              child.metric(n, { pool }),
            ),
          ),
        ) === JSON.stringify([room.compactions, direct.totalBlocks, room.inTree, room.positions]),
      10_000,
    );
    expect(room.positions).toBeLessThan(CHAINS * LEN);

    // Answers after the rebuild: heads of chains old and new, the second publisher's whole chain,
    // and a prompt nobody holds.
    const queries = [0, 1, 700, CHAINS - 1].map((c) => chains[c]!.local);
    queries.push(BigUint64Array.of(1n, 2n, 3n));
    for (const q of queries) {
      const reply = await observe(nc, pool, q, q.length * BS);
      expect(diffReply(reply, ref.expect(q, q.length * BS), BS)).toEqual([]);
    }
    const first = ref.expect(chains[0]!.local, LEN * BS);
    expect(first.map((w) => w.device).sort((a, b) => a - b)).toEqual([1, LEN]);

    // The compacted tree keeps taking events: a head's chain grows again.
    const c = chains[CHAINS - 1]!;
    await apply(event(W[0]!, { kind: 'stored', parentHash: c.seq[0]! as ExternalHash, startPosition: 1, blockHashes: c.seq.slice(1, 3), tokensHashes: c.local.slice(1, 3) }));
    await nc.flush();
    await eventually('the last event applied', async () => (await child.metric('vantage_indexer_events_applied_total', { pool })) >= sent, 10_000);
    const grown = await observe(nc, pool, c.local, LEN * BS);
    expect(diffReply(grown, ref.expect(c.local, LEN * BS), BS)).toEqual([]);
    expect(grown.workers.find((w) => w.workerId === W[0])!.deviceOverlapBlocks).toBe(3);
  });
});
