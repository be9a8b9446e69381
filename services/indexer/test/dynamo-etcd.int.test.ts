/**
 * The indexer beside Dynamo 1.6.1 with discovery in etcd (Dynamo's production default), nothing
 * simulated: a real etcd (`ownEtcd`), Dynamo's mocker in three processes (`DYN_DISCOVERY_BACKEND=etcd`,
 * each worker's keys under its own lease), requests through Dynamo's own Python client, ground truth
 * from Dynamo's own KvRouter (`get_overlap_scores`, `device_blocks`). The indexer is configured with
 * Dynamo's namespace and the etcd endpoint only; block size (32), capacity, subjects and publisher
 * ids come from etcd.
 *
 *   1. Agent-like traffic on the first two processes' three workers, with comparison rounds at
 *      random moments: for every active prompt, the indexer's per-worker device overlap equals
 *      KvRouter's (the same settle-and-compare as dynamo-live.int.test.ts: intake stops, in-flight
 *      requests finish, both sides are asked until they agree or 5 s pass).
 *   2. One worker process killed with SIGKILL: it cannot deregister, its lease expires (TTL 5 s here,
 *      Dynamo's default is 30 s) and the indexer drops the worker; the time from the kill is measured.
 *   3. A new worker process started while traffic runs joins the pool from etcd; traffic pinned to it
 *      and the comparison rounds cover it, its overlap equal to KvRouter's and not zero.
 * In every comparison round, Dynamo's choice too: the indexer's `dynamoChoice` against the worker
 * `KvRouter.best_worker` picks (query only) for the same prompt, at the same settled moment (no
 * request in flight, so neither side holds bookings: the choice turns on overlap and request
 * blocks), counted apart where either side has a tie for the lowest cost; and each rank's cost
 * against Dynamo's `get_potential_loads` (one known difference, see `compareChoice`).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localBlockHashes } from '@vantage/hashing';
import { INFRA_DIR } from '@vantage/infra';
import type { ObserveReply } from '@vantage/protocol';
import { eventually, natsUrl, ownEtcd, startDynamoDriver, startMocker, uniqueName, type DynamoDriver, type MockerProcess } from '@vantage/testkit';
import { observe, rng, spawnIndexer, type IndexerChild } from './helpers';

const BS = 32;
const GPU_BLOCKS = 96;
const LEASE_TTL_S = 5;
const CONCURRENCY = 8;
const TURNS = 8;

type Rank = string; // `${workerId}:${dpRank}`

describe('indexer beside Dynamo 1.6.1 with discovery in etcd', () => {
  const ns = uniqueName('dyn').replace(/-/g, '');
  const endpoint = `${ns}.backend.generate`;
  const pool = `${ns}_pool`;
  const logDir = join(INFRA_DIR, 'test', `${ns}-logs`);
  let etcd: Awaited<ReturnType<typeof ownEtcd>>;
  let nc: NatsConnection;
  let a: MockerProcess; // two workers, stay
  let b: MockerProcess; // one worker, killed
  let c: MockerProcess | undefined; // one worker, joins mid-run
  let driver: DynamoDriver;
  let indexer: IndexerChild;

  const observeTokens = (tokens: readonly number[]): Promise<ObserveReply> => observe(nc, pool, localBlockHashes(Uint32Array.from(tokens), BS, null), tokens.length, 10_000);
  const mockerOpts = () => ({ natsUrl: natsUrl(), etcd: { endpoints: etcd.endpoint, leaseTtlS: LEASE_TTL_S }, endpoint, blockSize: BS, numGpuBlocks: GPU_BLOCKS, speedupRatio: 100, maxNumBatchedTokens: 4096, logDir });

  beforeAll(async () => {
    mkdirSync(logDir, { recursive: true });
    etcd = await ownEtcd();
    nc = await connect({ servers: natsUrl() });
    a = await startMocker({ ...mockerOpts(), numWorkers: 2 });
    b = await startMocker({ ...mockerOpts(), numWorkers: 1 });
    indexer = await spawnIndexer({
      natsUrl: natsUrl(),
      // Only Dynamo's namespace and where its discovery is.
      pools: [{ name: pool, namespace: ns, discovery: { backend: 'etcd', endpoints: [etcd.endpoint] } }],
    });
    driver = await startDynamoDriver({ natsUrl: natsUrl(), etcd: { endpoints: etcd.endpoint }, endpoint, blockSize: BS, minWorkers: 3, logDir });
  }, 240_000);

  afterAll(async () => {
    await driver?.stop();
    await indexer?.stop();
    await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
    await nc?.close();
    await etcd?.cleanup();
  }, 60_000);

  it('agrees with KvRouter, drops a SIGKILLed worker when its lease expires, and answers for a worker that joins mid-run', async () => {
    const t0 = Date.now();
    const rand = rng(2406);
    const tok = (): number => 1 + rand.int(30_000);
    const systems = Array.from({ length: 3 }, () => Array.from({ length: BS * (3 + rand.int(3)) }, tok));

    // Discovery in etcd gave the indexer the three workers, the cards' block size and budget.
    const initial = [...a.workerIds, ...b.workerIds];
    await eventually('the indexer lists the 3 workers', async () => (await observeTokens([1, 2, 3])).workers.length === 3, 30_000);
    const first = await observeTokens(Array.from({ length: 64 }, (_, i) => i + 1));
    expect(first.blockSize).toBe(BS);
    expect(first.workers.map((w) => w.workerId).sort()).toEqual([...initial].sort());
    for (const w of first.workers) {
      expect(w.totalKvBlocks).toBe(GPU_BLOCKS);
      expect(w.maxNumBatchedTokens).toBe(4096);
    }

    interface Session {
      prompt: number[];
      turn: number;
      worker: bigint;
    }
    let live: bigint[] = [...initial];
    const newSession = (pin?: bigint): Session => ({
      prompt: [...systems[rand.int(systems.length)]!, ...Array.from({ length: 20 + rand.int(40) }, tok)],
      turn: 0,
      worker: pin ?? live[rand.int(live.length)]!,
    });
    let sessions: Session[] = Array.from({ length: CONCURRENCY }, () => newSession());
    const counts = { requests: 0, failed: 0, prompts: 0, comparisons: 0, mismatches: 0, retried: 0, nonZero: 0, nonZeroOnJoined: 0 };
    const mismatchDetail: string[] = [];
    // Dynamo's choice: our `dynamoChoice` against the worker KvRouter.best_worker picks for the same
    // prompt, at the same settled moment; prompts where either side has a tie for the lowest cost
    // are counted apart (Dynamo breaks those at random).
    const choice = { compared: 0, agreed: 0, tiesOurs: 0, tiesDynamo: 0, costRanksCompared: 0, costRanksEqual: 0, costRanksOnePartialBlockAbove: 0 };
    const choiceDetail: string[] = [];
    const compareChoice = async (p: number[], ours: ObserveReply, ranks: Rank[]): Promise<void> => {
      // The pick (a query: nothing booked), then the loads it weighed.
      const theirs = { ...(await driver.bestWorker(p)), loads: await driver.potentialLoads(p) };
      // Dynamo 1.6.1's default cost (prefill_load_scale 1, overlap credit 1, no request weight):
      // potential prefill tokens / block size + potential decode blocks, per (worker, rank).
      const dynCost = new Map<Rank, number>(theirs.loads.map((l) => [`${l.workerId}:${l.dpRank}`, l.potentialPrefillTokens / BS + l.potentialDecodeBlocks]));
      const ourCost = new Map<Rank, number>(ours.workers.filter((w) => w.dynamoCost !== null).map((w) => [`${w.workerId}:${w.dpRank}`, w.dynamoCost!]));
      // Measured difference: our cost counts a prompt's trailing partial block as one more decode
      // block (ceil(tokens / block size)); Dynamo 1.6.1's potential loads count only the hashed full
      // blocks. It is the same +1 on every worker, so it cannot change the choice; anything else is a
      // cost mismatch.
      const partial = p.length % BS === 0 ? 0 : 1;
      for (const r of ranks) {
        choice.costRanksCompared++;
        const o = ourCost.get(r);
        const d = dynCost.get(r);
        if (o !== undefined && d !== undefined && o === d) choice.costRanksEqual++;
        else if (o !== undefined && d !== undefined && partial === 1 && o === d + 1) choice.costRanksOnePartialBlockAbove++;
        else if (choiceDetail.length < 5) choiceDetail.push(`cost ${r} (${p.length} tokens): ours ${o}, Dynamo ${d}`);
      }
      const tie = (m: Map<Rank, number>): boolean => {
        const live = ranks.map((r) => m.get(r)).filter((v): v is number => v !== undefined);
        const min = Math.min(...live);
        return live.filter((v) => v === min).length > 1;
      };
      const tiedOurs = tie(ourCost);
      const tiedDyn = tie(dynCost);
      if (tiedOurs) choice.tiesOurs++;
      if (tiedDyn) choice.tiesDynamo++;
      if (tiedOurs || tiedDyn) return;
      choice.compared++;
      const mine = ours.dynamoChoice === null ? 'none' : `${ours.dynamoChoice.workerId}:${ours.dynamoChoice.dpRank}`;
      const dyn = `${theirs.workerId}:${theirs.dpRank}`;
      if (mine === dyn) choice.agreed++;
      else if (choiceDetail.length < 5) choiceDetail.push(`${p.length} tokens: ours ${mine}, KvRouter ${dyn}`);
    };

    /** Every active prompt (and its next turn) compared on the live workers' ranks. */
    const compareRound = async (): Promise<void> => {
      const ranks = live.map((w) => `${w}:0`);
      const prompts = sessions.flatMap((s) => [s.prompt, [...s.prompt, ...Array.from({ length: BS + 5 }, tok)]]);
      for (const p of prompts) {
        let lastDiff = '';
        let agreed = false;
        const until = Date.now() + 5_000;
        for (let attempt = 0; ; attempt++) {
          const [ours, theirs] = await Promise.all([observeTokens(p), driver.overlap(p)]);
          const mine = new Map<Rank, number>(ours.workers.map((w) => [`${w.workerId}:${w.dpRank}`, w.deviceOverlapBlocks]));
          const dyn = new Map<Rank, number>(theirs.workers.map((w) => [`${w.workerId}:${w.dpRank}`, w.deviceBlocks]));
          const diffs = ranks.filter((r) => (mine.get(r) ?? 0) !== (dyn.get(r) ?? 0)).map((r) => `${r}: ours ${mine.get(r) ?? 0}, KvRouter ${dyn.get(r) ?? 0}`);
          // The indexer must not list a worker that is no longer live either.
          for (const r of mine.keys()) if (!ranks.includes(r)) diffs.push(`${r}: listed by the indexer, not live`);
          if (diffs.length === 0) {
            agreed = true;
            await compareChoice(p, ours, ranks);
            for (const [r, v] of dyn) {
              if (v > 0 && ranks.includes(r)) counts.nonZero++;
              if (v > 0 && c !== undefined && r === `${c.workerIds[0]}:0`) counts.nonZeroOnJoined++;
            }
            if (attempt > 0) counts.retried++;
            break;
          }
          lastDiff = diffs.join('; ');
          if (Date.now() > until) break;
          await new Promise((r) => setTimeout(r, 100));
        }
        counts.prompts++;
        counts.comparisons += ranks.length;
        if (!agreed) {
          counts.mismatches++;
          if (mismatchDetail.length < 5) mismatchDetail.push(`${p.length} tokens: ${lastDiff}`);
        }
      }
    };

    /** Closed-loop traffic for `n` requests with comparison rounds (and `during.run`) at the given request counts. */
    const traffic = async (n: number, roundsAt: Set<number>, during?: { at: number; run: () => Promise<void> }): Promise<void> => {
      let sent = 0;
      let inFlight = 0;
      let barrier: Promise<void> | null = null;
      let release: (() => void) | null = null;
      let drained: (() => void) | null = null;
      const loop = async (i: number): Promise<void> => {
        for (;;) {
          if (barrier) await barrier;
          if (sent >= n) return;
          const k = ++sent;
          if (roundsAt.has(k) || during?.at === k) {
            barrier = new Promise<void>((r) => (release = r));
            await new Promise<void>((r) => {
              drained = r;
              if (inFlight === 0) r();
            });
            drained = null;
            if (during?.at === k) await during.run();
            if (roundsAt.has(k)) await compareRound();
            const r = release!;
            barrier = null;
            r();
          }
          const s = sessions[i]!;
          inFlight++;
          try {
            const res = await driver.generate(s.prompt, { maxTokens: 1 + rand.int(4), worker: s.worker });
            counts.requests++;
            s.prompt.push(...Array.from({ length: res.tokensOut }, tok), ...Array.from({ length: 10 + rand.int(40) }, tok));
          } catch {
            counts.failed++;
          } finally {
            inFlight--;
            if (inFlight === 0 && drained) (drained as () => void)();
          }
          if (++s.turn >= TURNS) sessions[i] = newSession();
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => loop(i)));
    };
    const pick = (n: number, lo: number, hi: number): Set<number> => {
      const s = new Set<number>();
      while (s.size < n) s.add(lo + rand.int(hi - lo));
      return s;
    };

    // 1. Traffic on the three workers.
    await traffic(600, pick(4, 30, 590));
    await compareRound();

    // 2. SIGKILL the single-worker process: no deregistration, only its lease can remove it.
    const killed = b.workerIds[0]!;
    // Dynamo's lease id is the worker's instance id: how long etcd keeps its keys after the kill.
    const admin = new Etcd3({ hosts: etcd.endpoint });
    const lease = await admin.leaseClient.leaseTimeToLive({ ID: killed.toString() });
    admin.close();
    expect(Number(lease.grantedTTL)).toBe(LEASE_TTL_S);
    const remainingMs = Number(lease.TTL) * 1000;
    await b.kill9();
    const killedAt = Date.now();
    await eventually('the killed worker gone from the indexer', async () => !(await observeTokens([1, 2])).workers.some((w) => w.workerId === killed), 60_000, 100);
    const leftAfterMs = Date.now() - killedAt;
    await eventually("the killed worker gone from Dynamo's client", async () => !(await driver.instances()).includes(killed), 60_000, 200);
    live = live.filter((w) => w !== killed);
    sessions = sessions.map((s) => (s.worker === killed ? newSession() : s));
    expect((await observeTokens([1, 2])).workers.map((w) => w.workerId).sort()).toEqual([...a.workerIds].sort());

    // 3. Traffic on the survivors; a new worker process starts part-way and joins from etcd.
    let joinedAt = 0;
    let joinMs = 0;
    await traffic(500, pick(3, 150, 495), {
      at: 60,
      run: async () => {
      c = await startMocker({ ...mockerOpts(), numWorkers: 1 });
      joinedAt = Date.now();
      const id = c.workerIds[0]!;
      await eventually('the new worker in the indexer', async () => (await observeTokens([1, 2])).workers.some((w) => w.workerId === id), 30_000, 100);
      joinMs = Date.now() - joinedAt;
      await eventually("the new worker in Dynamo's client", async () => (await driver.instances()).includes(id), 30_000, 200);
      live = [...live, id];
      // Half the sessions move to the new worker: its cache fills and the rounds compare it.
      sessions = sessions.map((s, i) => (i % 2 === 0 ? newSession(id) : s));
      },
    });
    await compareRound();
    const trafficS = (Date.now() - t0) / 1000;

    const kvStored = await indexer.metric('vantage_indexer_events_applied_total', { pool, kind: 'stored' });
    const kvRemoved = await indexer.metric('vantage_indexer_events_applied_total', { pool, kind: 'removed' });
    const rejected = await indexer.metric('vantage_indexer_messages_rejected_total', { pool });
    console.log(
      JSON.stringify({
        ...counts,
        leaseTtlS: LEASE_TTL_S,
        killedWorkerLeaseRemainingS: remainingMs / 1000,
        killedWorkerLeftIndexerAfterMs: leftAfterMs,
        joinedWorkerInIndexerAfterMs: joinMs,
        joinedWorkerStartMs: joinedAt > 0 ? joinedAt : null,
        trafficSeconds: trafficS,
        storedEventsApplied: kvStored,
        removedEventsApplied: kvRemoved,
        indexerRejections: rejected,
        dynamoChoice: { ...choice, agreementRate: choice.compared > 0 ? choice.agreed / choice.compared : null },
      }),
    );
    expect(mismatchDetail).toEqual([]);
    expect(counts.mismatches).toBe(0);
    expect(choiceDetail).toEqual([]);
    expect(choice.compared).toBeGreaterThan(counts.prompts / 4);
    expect(choice.agreed).toBe(choice.compared);
    expect(counts.failed).toBe(0);
    expect(counts.nonZero).toBeGreaterThan(counts.prompts / 2);
    expect(counts.nonZeroOnJoined).toBeGreaterThan(0); // the joined worker held blocks, and both sides agreed on them
    expect(kvRemoved).toBeGreaterThan(0); // eviction happened
    expect(rejected).toBe(0);
    // Removed when its lease ran out (etcd's TTL is whole seconds: up to 1 s early), not on a guess,
    // and not long after.
    expect(leftAfterMs).toBeGreaterThanOrEqual(remainingMs - 1_000);
    expect(leftAfterMs).toBeLessThan(remainingMs + 8_000);
    expect(c).toBeDefined();
  }, 240_000);
});
