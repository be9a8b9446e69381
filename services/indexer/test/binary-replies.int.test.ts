/**
 * Binary observe replies over real NATS: under bursts of concurrent requests for different prompts
 * (the service reuses its encoder's scratch for every reply), every binary reply must say exactly
 * what the JSON reply for the same prompt says (bar the query's own time and the facts' ages).
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sequenceHashes } from '@vantage/hashing';
import { encodeObserveRequestBinary, observeReplyCodec, observeRequestCodec, observeSubject, type ObserveReply, type ObserveRequest } from '@vantage/protocol';
import { natsUrl, uniqueName } from '@vantage/testkit';
import type { ExternalHash, WorkerId } from '@vantage/types';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvPublisher, publishRegistration, spawnIndexer, type Capacity, type IndexerChild } from './helpers';

const BS = 16;
const WORKERS = 64;
const PROMPTS = 12;
const BLOCKS = 48;
const CAP: Capacity = { totalKvBlocks: 10_000, maxNumBatchedTokens: 4096, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true };

/**
 * What does not depend on when the reply was made (nor on the seeded random pick among workers of
 * equal lowest cost, which moves on with every query: only the chosen cost is kept of the choice).
 */
function timeless(r: ObserveReply): unknown {
  return { ...r, atMs: 0, queryDurationUs: 0, workers: r.workers.map((w) => ({ ...w, ages: null })), dynamoChoice: r.dynamoChoice?.cost ?? null };
}

describe('indexer: binary replies over NATS', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('bin').replace(/-/g, '_');
  const prompts = Array.from({ length: PROMPTS }, (_, p) => BigUint64Array.from({ length: BLOCKS }, (_, i) => BigInt(p * 1_000_003 + i * 7919 + 1)));

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({ natsUrl: natsUrl(), pools: [{ name: pool, blockSize: BS, namespace: pool }] });
    const publish = kvPublisher(nc, 'event_plane', pool, 'backend');
    for (let i = 0; i < WORKERS; i++) {
      const w = (0x4000_0000_0000_0000n + BigInt(i) * 104_729n) as WorkerId;
      publishRegistration(nc, pool, BS, w, CAP);
      // Worker i holds a prefix of prompt i mod PROMPTS whose length depends on i: every prompt's answer differs.
      const local = prompts[i % PROMPTS]!.subarray(0, 1 + ((i * 13) % BLOCKS));
      const seq = sequenceHashes(local);
      await publish({
        workerId: w,
        dpRank: 0,
        storageTier: 'device',
        eventId: 1n,
        data: { kind: 'stored', parentHash: null as ExternalHash | null, startPosition: 0, blockHashes: seq, tokensHashes: local },
      });
    }
    await nc.flush();
    // Wait until every worker's blocks are in (the last worker's prompt shows it).
    const deadline = Date.now() + 10_000;
    for (;;) {
      const r = await request(prompts[(WORKERS - 1) % PROMPTS]!, 'json');
      if (r.workers.length === WORKERS && r.workers.filter((w) => w.deviceOverlapBlocks > 0).length >= WORKERS / PROMPTS) break;
      if (Date.now() > deadline) throw new Error('KV events not applied');
      await new Promise((res) => setTimeout(res, 50));
    }
  });
  afterAll(async () => {
    expect(await child?.stop()).toBe(0);
    await nc?.close();
  });

  /** `enc`: the reply's encoding; `binaryRequest`: the request in the binary encoding rather than JSON. */
  async function request(local: BigUint64Array, enc: 'json' | 'binary', binaryRequest = false): Promise<ObserveReply> {
    const value: ObserveRequest = { requestId: binaryRequest ? 'r-bin' : null, prompt: { kind: 'local_hashes', localHashes: local, loraName: null }, promptTokens: local.length * BS, replyEncoding: enc };
    const req = binaryRequest ? encodeObserveRequestBinary(value) : observeRequestCodec.encode(value);
    const m = await nc.request(observeSubject(pool), req, { timeout: 10_000 });
    const r = observeReplyCodec.decode(m.data);
    if (!r.ok) throw new Error(`bad observe reply: ${r.reason}`);
    return r.value;
  }

  it('every binary reply of a burst says what the JSON reply for its prompt says', async () => {
    const expected = await Promise.all(prompts.map(async (p) => timeless(await request(p, 'json'))));
    // 3 bursts of 1,000 concurrent requests, prompts interleaved; every other request in the binary request encoding.
    for (let burst = 0; burst < 3; burst++) {
      const replies = await Promise.all(Array.from({ length: 1000 }, (_, k) => request(prompts[(k * 5 + burst) % PROMPTS]!, 'binary', k % 2 === 1)));
      replies.forEach((r, k) => expect(timeless(r)).toEqual(expected[(k * 5 + burst) % PROMPTS]));
    }
  });
});
