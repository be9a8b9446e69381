/**
 * Dynamo's runtime-free selection service (`python -m dynamo.select_service`, 1.6.1), started for real
 * and given the decision benchmark's workload through real ZMQ KV events (`bench/dynamo-select-peer.ts`):
 * its overlaps and choices must be those of our own pool fed the same events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localBlockHashes } from '@vantage/hashing';
import { BLOCK, SESSIONS } from '../bench/workload';
import { checkSelects, ourOverlaps, selectOpenLoop, startDynamoSelectPeer, type DynamoSelectPeer } from '../bench/dynamo-select-peer';

// 16 workers: two per session, holding prefixes of different lengths, so a prompt longer than the
// shorter prefix has one longest-overlap worker and a shorter one a tie. Ids near 2^64 (exact u64s).
const FIRST_ID = (1n << 64n) - 100n;

describe('Dynamo selection service as the benchmark peer', () => {
  let peer: DynamoSelectPeer;
  beforeAll(async () => {
    peer = await startDynamoSelectPeer({ workers: 16, threads: 1, firstWorkerId: FIRST_ID, maxSockets: 4 });
  }, 120_000);
  afterAll(async () => {
    await peer?.stop();
  });

  it('holds the same overlaps as our pool, for hashes at and above 2^63 too', async () => {
    const t = peer.sessionTokens[3]!;
    const hashes = localBlockHashes(t, BLOCK);
    expect(hashes.some((h) => h >= 1n << 63n)).toBe(true);
    const ours = ourOverlaps(peer, t);
    const theirs = await peer.overlapBlocks(t, 'block_hashes');
    expect(Math.max(...ours.values())).toBeGreaterThan(0);
    for (const w of peer.workers) expect([w.workerId, theirs.get(w.workerId) ?? 0]).toEqual([w.workerId, ours.get(w.workerId) ?? 0]);
    expect(await peer.overlapBlocks(t, 'token_ids')).toEqual(theirs);
  });

  it('answers 50 selects with a longest-overlap worker, as our selection does', async () => {
    const prompts: Uint32Array[] = [];
    const blocks = [3, 100, 300, 700, 1000, 1500];
    for (let i = 0; i < 50; i++) prompts.push(peer.sessionTokens[i % SESSIONS]!.subarray(0, blocks[Math.floor(i / SESSIONS) % blocks.length]! * BLOCK + (i % 3) * 17));
    // Some prompts have exactly one longest-overlap worker: there the choice is forced.
    const forced = prompts.filter((t) => {
      const o = [...ourOverlaps(peer, t).values()];
      const max = Math.max(...o);
      return o.filter((x) => x === max).length === 1;
    });
    expect(forced.length).toBeGreaterThan(10);
    const a = await checkSelects(peer, prompts.slice(0, 25), 'block_hashes');
    const b = await checkSelects(peer, prompts.slice(25), 'token_ids');
    expect(a.failures).toEqual([]);
    expect(b.failures).toEqual([]);
    expect(a.longestOverlap + b.longestOverlap).toBe(50);
    expect(a.sameWorkerAsOurs + b.sameWorkerAsOurs).toBeGreaterThanOrEqual(forced.length);
    const one = await peer.select(prompts[8]!, 'block_hashes');
    expect(one.workerId).toBeGreaterThanOrEqual(FIRST_ID);
  });

  it('is measured in an open loop: every select answered', async () => {
    const bodies = [0, 1].map((s) => peer.body(peer.sessionTokens[s]!.subarray(0, 512 * BLOCK), 'block_hashes'));
    const r = await selectOpenLoop(peer, 'test', bodies, 40, 1);
    expect(r.errors).toEqual({});
    expect(r.ok).toBe(40);
    expect(r.p50Us).toBeGreaterThan(0);
    expect(r.workersChosen).toBeGreaterThanOrEqual(2);
  });

  it('stops its processes', async () => {
    await peer.stop();
    expect(await Promise.race([peer.service.exited.then(() => 'exited'), new Promise((r) => setTimeout(() => r('running'), 5_000))])).toBe('exited');
    expect(await Promise.race([peer.publisher.exited.then(() => 'exited'), new Promise((r) => setTimeout(() => r('running'), 5_000))])).toBe('exited');
  });
});
