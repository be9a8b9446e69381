/**
 * Recovery from a worker's own local index, against Dynamo 1.6.1's own processes: the mocker's
 * workers (file discovery, NATS event plane, TCP request plane) serve their local indexes on
 * `worker_kv_query_source_*`; requests go through Dynamo's own Python client; Dynamo's own
 * KvRouter (`get_overlap_scores`) is the ground truth.
 *
 * The indexer is stopped (SIGTERM: it writes its last snapshot) while requests keep going to the
 * workers, so in core-NATS mode it misses their KV events, then started again from that snapshot.
 *
 *  1. Recovery only on suspicion (`recovery.onListing` off): right after the restart its answers
 *     are stale (they differ from KvRouter's, proving the loss is real), the next event from each
 *     worker reveals the id gap and marks it suspect, and the worker is recovered from its local
 *     index: no `cleared` anywhere, the suspicion ends, and every answer equals KvRouter's again.
 *  2. The default (also recover each worker when discovery lists it, as Dynamo's router does): after
 *     the same loss, with no request at all after the restart (quiet workers, no event to reveal a
 *     gap), the answers equal KvRouter's, for every rank of a worker with 2 dp ranks too.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localBlockHashes } from '@vantage/hashing';
import { INFRA_DIR } from '@vantage/infra';
import { observeReplyCodec, observeRequestCodec, observeSubject, type ObserveReply } from '@vantage/protocol';
import { eventually, natsUrl, startDynamoDriver, startMocker, uniqueName, type DynamoDriver, type MockerProcess } from '@vantage/testkit';
import { observe, rng, spawnIndexer, type IndexerChild, type PoolSpec } from './helpers';

const BS = 32;
const GPU_BLOCKS = 128;

describe("recovery of suspect workers from Dynamo 1.6.1's local indexes", () => {
  const ns = uniqueName('rec').replace(/-/g, '');
  const endpoint = `${ns}.backend.generate`;
  const pool = `${ns}_pool`;
  const dir = join(INFRA_DIR, 'test', `${ns}-kv`);
  const bucket = uniqueName('snap');
  let nc: NatsConnection;
  let mocker: MockerProcess;
  let dpMocker: MockerProcess;
  let driver: DynamoDriver;
  let indexer: IndexerChild | null = null;
  const pools: PoolSpec[] = [{ name: pool, namespace: ns, discovery: { backend: 'file', dir, pollMs: 50 } } as PoolSpec];
  const env = (onListing: boolean): Record<string, string> => ({
    VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '200',
    VANTAGE_INDEXER_SNAPSHOT_BUCKET: bucket,
    VANTAGE_INDEXER_RECOVERY_ON_LISTING: String(onListing),
    VANTAGE_INDEXER_RECOVERY_INITIAL_BACKOFF_MS: '100',
  });

  // Prompts: sessions over 3 shared system prompts, each turn the previous prompt plus more.
  const rand = rng(2424);
  const tok = (): number => 1 + rand.int(30_000);
  const systems = Array.from({ length: 3 }, () => Array.from({ length: BS * (2 + rand.int(3)) }, tok));
  const prompts: number[][] = [];
  let workers: bigint[] = [];

  async function traffic(n: number): Promise<void> {
    const live: { p: number[]; w: bigint }[] = [];
    for (let i = 0; i < n; i++) {
      let s = live.length >= 6 || (live.length > 0 && rand.next() < 0.6) ? live[rand.int(live.length)]! : undefined;
      if (!s) {
        s = { p: [...systems[rand.int(systems.length)]!, ...Array.from({ length: 10 + rand.int(40) }, tok)], w: workers[rand.int(workers.length)]! };
        live.push(s);
      } else s.p = [...s.p, ...Array.from({ length: 20 + rand.int(60) }, tok)];
      await driver.generate(s.p, { worker: s.w, maxTokens: 2 });
      prompts.push(s.p);
    }
  }

  /** Prompts whose indexer answer differs from KvRouter's (device blocks per worker). */
  async function mismatches(ix: IndexerChild, sample: number[][]): Promise<string[]> {
    void ix;
    const out: string[] = [];
    for (const p of sample) {
      const [mine, theirs] = await Promise.all([observe(nc, pool, localBlockHashes(Uint32Array.from(p), BS, null), p.length), driver.overlap(p)]);
      const a = new Map(mine.workers.map((w) => [`${w.workerId}:${w.dpRank}`, w.deviceOverlapBlocks]));
      for (const t of theirs.workers) {
        const k = `${t.workerId}:${t.dpRank}`;
        if ((a.get(k) ?? 0) !== t.deviceBlocks) out.push(`${k} tokens=${p.length}: indexer ${a.get(k) ?? 0}, Dynamo ${t.deviceBlocks}`);
      }
    }
    return out;
  }
  const lastPrompts = (n: number): number[][] => prompts.slice(-n);
  async function observeJson(p: number[]): Promise<ObserveReply> {
    const req = observeRequestCodec.encode({
      requestId: null,
      prompt: { kind: 'token_ids', tokenIds: Uint32Array.from(p), loraName: null },
      promptTokens: p.length,
      replyEncoding: 'json',
    });
    const r = observeReplyCodec.decode((await nc.request(observeSubject(pool), req, { timeout: 5_000 })).data);
    if (!r.ok) throw new Error(r.reason);
    return r.value;
  }

  beforeAll(async () => {
    mkdirSync(dir, { recursive: true });
    nc = await connect({ servers: natsUrl() });
    mocker = await startMocker({ natsUrl: natsUrl(), fileKvDir: dir, endpoint, numWorkers: 2, blockSize: BS, numGpuBlocks: GPU_BLOCKS, speedupRatio: 100 });
    // One worker with 2 dp ranks: each rank is its own publisher with its own local index.
    dpMocker = await startMocker({ natsUrl: natsUrl(), fileKvDir: dir, endpoint, numWorkers: 1, dataParallelSize: 2, blockSize: BS, numGpuBlocks: GPU_BLOCKS, speedupRatio: 100 });
    // The first test sends traffic to the single-rank workers only (a rank with no event after the
    // restart cannot reveal a gap); the second to every worker.
    workers = [...mocker.workerIds];
    driver = await startDynamoDriver({ natsUrl: natsUrl(), fileKvDir: dir, endpoint, blockSize: BS, minWorkers: 3 });
  }, 180_000);

  afterAll(async () => {
    await indexer?.stop();
    await driver?.stop();
    await Promise.all([mocker?.stop(), dpMocker?.stop()]);
    try {
      await (await jetstreamManager(nc)).streams.delete(`OBJ_${bucket}`);
    } catch {
      /* never created */
    }
    await nc?.close();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  async function restartAfterLoss(onListing: boolean, lostRequests: number): Promise<IndexerChild> {
    const written = await indexer!.metric('vantage_indexer_snapshots_total', { pool, outcome: 'written' });
    await eventually('a snapshot after the last traffic', async () => (await indexer!.metric('vantage_indexer_snapshots_total', { pool, outcome: 'written' })) > written, 10_000);
    expect(await indexer!.stop()).toBe(0);
    indexer = null;
    await traffic(lostRequests); // nobody listening: these KV events are gone for the indexer
    const next = await spawnIndexer({ natsUrl: natsUrl(), pools, env: env(onListing) });
    await next.waitLog((l) => l['msg'] === 'snapshot restored; its facts carry their original ages');
    indexer = next;
    return next;
  }

  it('a worker made suspect by a gap is recovered from its local index, without a cleared', async () => {
    const t0 = Date.now();
    indexer = await spawnIndexer({ natsUrl: natsUrl(), pools, env: env(false) });
    await traffic(60);
    await eventually('the indexer agrees with KvRouter before the loss', async () => (await mismatches(indexer!, lastPrompts(15))).length === 0, 20_000);

    const restartedAt = Date.now();
    const ix = await restartAfterLoss(false, 40);
    // Stale until the workers speak: the loss is real.
    const stale = await mismatches(ix, lastPrompts(20));
    expect(stale.length).toBeGreaterThan(0);
    expect(await ix.metric('vantage_indexer_recovery_attempts_total', { pool })).toBe(0);

    // One more request per worker: its first event reveals the gap.
    const before = prompts.length;
    for (const w of workers) {
      const p = [...systems[0]!, ...Array.from({ length: 50 }, tok)];
      await driver.generate(p, { worker: w, maxTokens: 2 });
      prompts.push(p);
    }
    for (const w of workers) {
      await ix.waitLog((l) => l['msg'] === "recovered a worker's blocks from its local index" && l['workerId'] === String(w) && l['why'] === 'event_gap', 20_000);
    }
    expect(await ix.metric('vantage_indexer_kv_gaps_total', { pool })).toBeGreaterThanOrEqual(2);
    await eventually('every answer equals KvRouter again', async () => (await mismatches(ix, [...lastPrompts(prompts.length - before + 30)])).length === 0, 20_000);
    // The answers say so: no suspicion, and when each worker was recovered (JSON replies).
    const reply = await observeJson(prompts[prompts.length - 1]!);
    for (const w of reply.workers) {
      expect(w.suspect).toBeNull();
      // The dp worker had no traffic (nothing lost, nothing to recover).
      if (workers.includes(w.workerId)) expect(w.recoveredAtMs).toBeGreaterThanOrEqual(restartedAt);
      else expect(w.recoveredAtMs).toBeUndefined();
    }
    expect(await ix.metric('vantage_indexer_events_applied_total', { pool, kind: 'cleared' })).toBe(0);
    expect(await ix.metric('vantage_indexer_recovery_outcomes_total', { pool, outcome: 'recovered' })).toBe(2);
    // And it stays right as traffic continues.
    await traffic(30);
    await eventually('still equal after more traffic', async () => (await mismatches(ix, lastPrompts(25))).length === 0, 20_000);
    process.stderr.write(`[recovery-dynamo] gap-driven: ${stale.length} stale answers before, ${prompts.length} requests, ${Date.now() - t0} ms\n`);
  }, 180_000);

  it('by default every listed worker is recovered at start, so quiet workers are right without any new event', async () => {
    const t0 = Date.now();
    workers = [...mocker.workerIds, ...dpMocker.workerIds];
    const ix = await restartAfterLoss(true, 60);
    const ranks = [...mocker.workerIds.map((w) => `${w}:0`), `${dpMocker.workerIds[0]}:0`, `${dpMocker.workerIds[0]}:1`];
    for (const r of ranks) {
      await ix.waitLog(
        (l) => l['msg'] === "recovered a worker's blocks from its local index" && `${String(l['workerId'])}:${String(l['dpRank'])}` === r && l['why'] === 'listed',
        20_000,
      );
    }
    // No request since the restart: only the recovery can have brought the index up to date.
    expect(await mismatches(ix, lastPrompts(40))).toEqual([]);
    expect(await ix.metric('vantage_indexer_events_applied_total', { pool, kind: 'cleared' })).toBe(0);
    process.stderr.write(`[recovery-dynamo] on listing: ${prompts.length} requests in all, ${Date.now() - t0} ms\n`);
  }, 180_000);
});
