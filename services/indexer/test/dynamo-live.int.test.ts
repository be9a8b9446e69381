/**
 * The indexer beside Dynamo 1.6.1's own processes, nothing simulated: Dynamo's mocker (4 workers,
 * one of them with 2 dp ranks, small GPU caches so blocks are evicted all the time) publishing on
 * a real nats-server and listing itself in file discovery; requests sent through Dynamo's own Python
 * client (agent-like sessions whose prompts grow turn by turn over shared system prompts); ground
 * truth from Dynamo's own KvRouter (`get_overlap_scores`, its `device_blocks`). The indexer is
 * configured with Dynamo's namespace and the discovery directory only: block size (32 here, not the
 * indexer's default 64), capacity, subjects and publisher ids all come from discovery.
 *
 * Comparing without catching either side mid-flight: a comparison round happens at a random moment
 * of the traffic. New requests stop, every request in flight finishes (both sides then hold still:
 * the mocker evicts only to make room for a new request), and for every active session's current
 * and next prompt the indexer's per-(worker, rank) device overlap is compared with KvRouter's. Events
 * still on their way are allowed for by asking both sides again, every 100 ms for up to 5 s, until
 * they agree (the 5 s run from the start of the round); a prompt still differing after that counts as a
 * mismatch. The test requires zero. (Checked that it can fail: applying only the first event of
 * each kv-events batch gives mismatches from the first round on.)
 *
 * Also checked: P = trackedPrefillTokens / maxNumBatchedTokens with the card's budget (bookings
 * published on our own subject so P is not trivially 0), forward-pass metrics in every worker's
 * answer, `vantage decode` accepting every message the mocker published (raw subscription on
 * `namespace.{ns}.>`), and a worker process stopped gracefully leaving the pool.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeCapturedMessage } from '@vantage/cli';
import { sequenceHashes, localBlockHashes } from '@vantage/hashing';
import { INFRA_DIR } from '@vantage/infra';
import { observeReplyCodec, observeRequestCodec, observeSubject, type ObserveReply } from '@vantage/protocol';
import { eventually, natsUrl, startDynamoDriver, startMocker, uniqueName, type DynamoDriver, type MockerProcess } from '@vantage/testkit';
import { publishBooking, rng, spawnIndexer, type IndexerChild } from './helpers';

const BS = 32;
const GPU_BLOCKS = 96;
const MAX_BATCHED = 4096;
const REQUESTS = 2000;
const CONCURRENCY = 16;
const TURNS = 10;
const ROUNDS = 12;

type Rank = string; // `${workerId}:${dpRank}`

async function observeTokens(nc: NatsConnection, pool: string, tokens: readonly number[]): Promise<ObserveReply> {
  const req = observeRequestCodec.encode({
    requestId: null,
    prompt: { kind: 'token_ids', tokenIds: Uint32Array.from(tokens), loraName: null },
    promptTokens: tokens.length,
    replyEncoding: 'json',
  });
  const m = await nc.request(observeSubject(pool), req, { timeout: 10_000 });
  const r = observeReplyCodec.decode(m.data);
  if (!r.ok) throw new Error(`bad observe reply: ${r.reason}`);
  return r.value;
}

function overlapMap(rows: readonly { workerId: bigint; dpRank: number; deviceBlocks: number }[]): Map<Rank, number> {
  const m = new Map<Rank, number>();
  for (const r of rows) m.set(`${r.workerId}:${r.dpRank}`, r.deviceBlocks);
  return m;
}

describe('indexer beside Dynamo 1.6.1 (mocker, client, KvRouter)', () => {
  const ns = uniqueName('dyn').replace(/-/g, '');
  const endpoint = `${ns}.backend.generate`;
  const pool = `${ns}_pool`;
  const dir = join(INFRA_DIR, 'test', `${ns}-kv`);
  let nc: NatsConnection;
  let capture: Subscription;
  const captured: { subject: string; data: Uint8Array }[] = [];
  let plain: MockerProcess;
  let dp: MockerProcess;
  let driver: DynamoDriver;
  let indexer: IndexerChild;

  beforeAll(async () => {
    mkdirSync(dir, { recursive: true });
    nc = await connect({ servers: natsUrl() });
    capture = nc.subscribe(`namespace.${ns}.>`, { callback: (_e, m) => void captured.push({ subject: m.subject, data: new Uint8Array(m.data) }) });
    await nc.flush();
    const common = { natsUrl: natsUrl(), fileKvDir: dir, endpoint, blockSize: BS, numGpuBlocks: GPU_BLOCKS, speedupRatio: 100, maxNumBatchedTokens: MAX_BATCHED };
    // One after the other: each learns its own workers' ids as the cards that appeared while it started.
    plain = await startMocker({ ...common, numWorkers: 3 });
    dp = await startMocker({ ...common, numWorkers: 1, dataParallelSize: 2 });
    indexer = await spawnIndexer({
      natsUrl: natsUrl(),
      // Only Dynamo's namespace and where its discovery is: component and endpoint are Dynamo's defaults.
      pools: [{ name: pool, namespace: ns, discovery: { backend: 'file', dir, pollMs: 50 } }],
    });
    driver = await startDynamoDriver({ natsUrl: natsUrl(), fileKvDir: dir, endpoint, blockSize: BS, minWorkers: 4 });
  }, 240_000);

  afterAll(async () => {
    capture?.unsubscribe();
    await driver?.stop();
    await indexer?.stop();
    await Promise.all([plain?.stop(), dp?.stop()]);
    await nc?.close();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('agrees with KvRouter on every active prompt, with P from the cards and every published message decodable', async () => {
    const t0 = Date.now();
    const workers = [...plain.workerIds, ...dp.workerIds];
    expect(workers).toHaveLength(4);
    const ranks = [...plain.workerIds.map((w) => `${w}:0`), `${dp.workerIds[0]}:0`, `${dp.workerIds[0]}:1`].sort();

    // Discovery gave the indexer every rank, the cards' block size and batch budget.
    await eventually('the indexer lists the 5 ranks', async () => {
      const r = await observeTokens(nc, pool, [1, 2, 3]);
      return r.workers.length === 5;
    }, 20_000);
    const first = await observeTokens(nc, pool, Array.from({ length: 64 }, (_, i) => i + 1));
    expect(first.blockSize).toBe(BS);
    expect(first.workers.map((w) => `${w.workerId}:${w.dpRank}`).sort()).toEqual(ranks);
    for (const w of first.workers) {
      expect(w.maxNumBatchedTokens).toBe(MAX_BATCHED);
      expect(w.totalKvBlocks).toBe(GPU_BLOCKS);
    }

    // Agent-like traffic: sessions on one of 4 shared system prompts, each turn the previous prompt
    // plus the reply and a new user message.
    const rand = rng(24);
    const tok = (): number => 1 + rand.int(30_000);
    const systems = Array.from({ length: 4 }, () => Array.from({ length: BS * (3 + rand.int(4)) }, tok));
    interface Session {
      prompt: number[];
      turn: number;
      worker: bigint | undefined;
    }
    const newSession = (): Session => ({
      prompt: [...systems[rand.int(systems.length)]!, ...Array.from({ length: 20 + rand.int(60) }, tok)],
      turn: 0,
      // Most sessions stay on one worker (prefix reuse); some go round robin through Dynamo's client.
      worker: rand.next() < 0.8 ? workers[rand.int(workers.length)] : undefined,
    });
    const sessions: Session[] = Array.from({ length: CONCURRENCY }, newSession);
    let sent = 0;
    let failed = 0;
    let cachedSeen = 0;
    const roundAt = new Set<number>();
    while (roundAt.size < ROUNDS) roundAt.add(100 + rand.int(REQUESTS - 150));
    let queries = 0;
    let comparisons = 0;
    let mismatches = 0;
    let retried = 0;
    let nonZero = 0;
    const mismatchDetail: string[] = [];

    const compareRound = async (): Promise<void> => {
      // Everything in flight has finished (the caller awaited it): both sides settle on one state.
      const prompts: number[][] = [];
      for (const s of sessions) {
        prompts.push(s.prompt);
        prompts.push([...s.prompt, ...Array.from({ length: BS + 5 }, tok)]);
      }
      // Events in flight have until 5 s after the round began to arrive (on either side); after
      // that each prompt is asked once. A failing run thus ends in bounded time.
      const until = Date.now() + 5_000;
      for (const p of prompts) {
        if (mismatches >= 20) return; // enough evidence; the assertions below report it
        let agreed = false;
        let lastDiff = '';
        for (let attempt = 0; ; attempt++) {
          const [ours, theirs] = await Promise.all([observeTokens(nc, pool, p), driver.overlap(p)]);
          queries += 2;
          const mine = new Map<Rank, number>(ours.workers.map((w) => [`${w.workerId}:${w.dpRank}`, w.deviceOverlapBlocks]));
          const dyn = overlapMap(theirs.workers);
          const diffs: string[] = [];
          for (const r of new Set([...ranks, ...mine.keys(), ...dyn.keys()])) {
            if ((mine.get(r) ?? 0) !== (dyn.get(r) ?? 0)) diffs.push(`${r}: ours ${mine.get(r) ?? 0}, KvRouter ${dyn.get(r) ?? 0}`);
          }
          if (diffs.length === 0) {
            agreed = true;
            for (const v of dyn.values()) if (v > 0) nonZero++;
            if (attempt > 0) retried++;
            break;
          }
          lastDiff = diffs.join('; ');
          if (Date.now() > until) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        comparisons += ranks.length;
        if (!agreed) {
          mismatches++;
          if (mismatchDetail.length < 5) mismatchDetail.push(`${p.length} tokens: ${lastDiff}`);
        }
      }
    };

    // Closed loop: CONCURRENCY sessions, each sending its next turn when the last returned; at the
    // chosen request counts, everyone stops, waits for the others, and a comparison round runs.
    let barrier: Promise<void> | null = null;
    let inFlight = 0;
    let release: (() => void) | null = null;
    let drained: (() => void) | null = null;
    const loop = async (i: number): Promise<void> => {
      for (;;) {
        if (barrier) await barrier;
        if (sent >= REQUESTS) return;
        const n = ++sent;
        if (roundAt.has(n)) {
          // Stop intake: wait for every other request in flight, compare, then let everyone go on.
          barrier = new Promise<void>((r) => (release = r));
          await new Promise<void>((r) => {
            drained = r;
            if (inFlight === 0) r();
          });
          drained = null;
          await compareRound();
          const r = release!;
          barrier = null;
          r();
        }
        const s = sessions[i]!;
        inFlight++;
        try {
          const res = await driver.generate(s.prompt, { maxTokens: 1 + rand.int(4), ...(s.worker !== undefined ? { worker: s.worker } : {}) });
          if ((res.cachedTokens ?? 0) > 0) cachedSeen++;
          s.prompt.push(...Array.from({ length: res.tokensOut }, tok), ...Array.from({ length: 10 + rand.int(50) }, tok));
        } catch {
          failed++;
        } finally {
          inFlight--;
          if (inFlight === 0 && drained) (drained as () => void)();
        }
        if (++s.turn >= TURNS) sessions[i] = newSession();
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => loop(i)));
    await compareRound();
    const trafficS = (Date.now() - t0) / 1000;

    // P from the cards' budget: bookings on our own subject, then P = tracked / max_num_batched_tokens.
    const promptTokens = 3000;
    for (const r of ranks) {
      const [w, d] = r.split(':');
      publishBooking(nc, pool, { requestId: uniqueName('bk'), workerId: BigInt(w!), dpRank: Number(d), promptTokens, overlapBlocks: 0, sequenceHashes: sequenceHashes(localBlockHashes(Uint32Array.from(Array.from({ length: promptTokens }, tok)), BS, null)) });
    }
    let pChecked = 0;
    await eventually('every rank booked', async () => (await observeTokens(nc, pool, [1, 2])).workers.every((w) => w.trackedPrefillTokens > 0), 10_000);
    const booked = await observeTokens(nc, pool, [1, 2]);
    for (const w of booked.workers) {
      expect(w.maxNumBatchedTokens).toBe(MAX_BATCHED);
      expect(w.trackedPrefillTokens).toBeGreaterThan(0);
      expect(w.P).toBe(w.trackedPrefillTokens / MAX_BATCHED);
      // Forward-pass metrics (about once a second per rank) are in every answer.
      expect(w.forwardPass).toBeDefined();
      expect(w.forwardPass!.ageMs).toBeLessThan(5_000);
      pChecked++;
    }

    // Every message the mocker (and Dynamo's client and router) published decodes.
    const byTopic = new Map<string, number>();
    const rejections: string[] = [];
    for (const m of captured) {
      const topic = m.subject.slice(m.subject.lastIndexOf('.') + 1);
      byTopic.set(topic, (byTopic.get(topic) ?? 0) + 1);
      let r;
      try {
        r = decodeCapturedMessage(m.data, { topic: m.subject });
      } catch (e) {
        rejections.push(`${m.subject}: ${(e as Error).message}`);
        continue;
      }
      if (!r.result.ok) rejections.push(`${m.subject}: ${r.result.code}: ${r.result.reason}`);
    }
    const rejectedByIndexer = await indexer.metric('vantage_indexer_messages_rejected_total', { pool });
    const foreign = await indexer.metric('vantage_indexer_events_applied_total', { pool, kind: 'load_foreign_ignored' });
    const kvApplied = await indexer.metric('vantage_indexer_events_applied_total', { pool, kind: 'stored' });
    const removedApplied = await indexer.metric('vantage_indexer_events_applied_total', { pool, kind: 'removed' });

    console.log(
      JSON.stringify({
        requests: sent,
        failedRequests: failed,
        requestsWithCachedTokens: cachedSeen,
        comparisonRounds: ROUNDS + 1,
        queries,
        comparisons,
        promptsCompared: comparisons / ranks.length,
        promptsAgreeingOnlyAfterRetry: retried,
        nonZeroOverlapsAgreed: nonZero,
        mismatches,
        pChecked,
        trafficSeconds: trafficS,
        storedEventsApplied: kvApplied,
        removedEventsApplied: removedApplied,
        capturedMessages: captured.length,
        capturedByTopic: Object.fromEntries(byTopic),
        decodeRejections: rejections.length,
        indexerRejections: rejectedByIndexer,
        loadForeignIgnored: foreign,
      }),
    );
    expect(mismatchDetail).toEqual([]);
    expect(mismatches).toBe(0);
    // Not a comparison of empty caches: most agreed answers hold cached blocks somewhere.
    expect(nonZero).toBeGreaterThan(comparisons / ranks.length / 2);
    expect(sent).toBeGreaterThanOrEqual(REQUESTS);
    expect(failed).toBe(0);
    expect(removedApplied).toBeGreaterThan(0); // eviction happened
    expect(cachedSeen).toBeGreaterThan(0); // prefixes were reused
    expect(rejections).toEqual([]);
    expect(byTopic.get('kv-events')).toBeGreaterThan(0);
    expect(byTopic.get('forward-pass-metrics')).toBeGreaterThan(0);
    expect(byTopic.get('kv_metrics')).toBeGreaterThan(0);
    expect(rejectedByIndexer).toBe(0);
    expect(foreign).toBe(0);

    // A worker process stopped gracefully leaves discovery, and the pool with it.
    await dp.stop();
    await eventually('the dp worker left the pool', async () => (await observeTokens(nc, pool, [1, 2])).workers.length === 3, 20_000);
    const after = await observeTokens(nc, pool, [1, 2]);
    expect(after.workers.map((w) => w.workerId)).not.toContain(dp.workerIds[0]);
  }, 300_000);
});
