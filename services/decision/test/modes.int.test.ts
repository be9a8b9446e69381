// Local and remote pools over real NATS: the same event stream and the same requests give the same
// route answers whether the decision service holds the pools itself or asks the indexers; and in
// remote mode a reply later than gate.maxAgeMs is refused by the age check itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteArgs } from '@vantage/gateway-client';
import { encodeObserveRequestBinary, observeSubject, type RouteReply } from '@vantage/protocol';
import { randomInt, seededRng } from '@vantage/random';
import { eventually, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { BLOCK, Harness, logSink, parameterSet, tokens } from './harness';

type Role = 'efficient' | 'capable';

/** What must agree between modes: everything but durations and ages. */
function answer(r: RouteReply): unknown {
  const obs = (o: RouteReply['observations']['efficient']) => {
    if (o === null) return null;
    const { ages: _a, queryDurationUs: _q, ...rest } = o;
    return rest;
  };
  return {
    model: r.model,
    modelRole: r.modelRole,
    pool: r.pool,
    workerId: r.workerId,
    dpRank: r.dpRank,
    endpoint: r.endpoint,
    reason: r.reason,
    fallback: r.fallback,
    detail: r.detail,
    variant: r.variant,
    predictions: r.predictions,
    observations: { efficient: obs(r.observations.efficient), capable: obs(r.observations.capable) },
  };
}

describe('local and remote pools give the same answers on the same stream', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-modes-'));
  const h = new Harness(join(dir, 'params.json'), { source: 'local' });
  const remoteSubject = `${uniqueName('route-remote')}.route`;
  let remote: Awaited<ReturnType<Harness['runDecision']>>;
  const workers: Record<Role, WorkerId[]> = {
    efficient: [21n, 22n, (1n << 64n) - 3n].map((x) => x as WorkerId),
    capable: [31n, (1n << 63n) + 5n, 33n].map((x) => x as WorkerId),
  };
  const registered: Record<Role, Set<WorkerId>> = { efficient: new Set(), capable: new Set() };
  /** Prompt families sharing prefixes: 4 base prompts of 24 blocks. */
  const prompts = [0, 1, 2, 3].map((i) => tokens(24 * BLOCK, 100 + i));

  beforeAll(async () => {
    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b', thresholds: { r: 1, p: null }, gate: { maxAgeMs: 1000, destinationLimit: 4, localLimit: 50 } }));
    remote = await h.runDecision('remote', remoteSubject, logSink(), { VANTAGE_DECISION_RECORDS_ENABLED: 'false', VANTAGE_LOG_LEVEL: 'warn' });
    for (const role of ['efficient', 'capable'] as const) {
      workers[role].forEach((w, j) => {
        h.register(role, w);
        registered[role].add(w);
        // Standing load, different per worker, so Dynamo's cost never ties (a tie is broken at random,
        // on each side by its own generator) and the choice is the same wherever it is computed.
        for (let b = 0; b <= j; b++) h.book(role, w, `standing-${role}-${j}-${b}`, 97 + 61 * j);
      });
    }
  });
  afterAll(async () => {
    await remote?.svc.stop('test done');
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The indexer and the local pool hold the same facts for every worker (K, R, schedulable, suspect). */
  const agree = async (hashes: BigUint64Array): Promise<boolean> => {
    for (const role of ['efficient', 'capable'] as const) {
      for (const w of workers[role]) {
        const i = await h.observeWorker(role, w, hashes);
        const l = h.localWorker(role, w, hashes);
        if ((i === undefined) !== (l === undefined)) return false;
        if (i === undefined || l === undefined) continue;
        if (i.K !== l.K || i.R !== l.R || i.schedulable !== l.schedulable) return false;
      }
    }
    return true;
  };

  const release = (r: RouteReply): void => {
    if (r.workerId === null || r.pool === null) return;
    h.client.cancelled({ requestId: r.requestId, sessionId: 's', pool: r.pool, workerId: r.workerId, dpRank: r.dpRank ?? 0 });
  };

  it('over seeded random streams with loss, duplicates and worker churn', { timeout: 120_000 }, async () => {
    const rng = seededRng('modes-differential');
    const remoteClient = h.clientFor(remoteSubject);
    let compared = 0;
    const reasons = new Map<string, number>();
    let bg = 0;
    const openBg: { role: Role; w: WorkerId; id: string }[] = [];
    for (let step = 0; step < 30; step++) {
      // A few events per step, chosen at random.
      for (let k = 0; k < 3; k++) {
        const role: Role = randomInt(rng, 2) === 0 ? 'efficient' : 'capable';
        const w = workers[role][randomInt(rng, workers[role].length)]!;
        const p = prompts[randomInt(rng, prompts.length)]!;
        const hashes = h.client.hashPrompt(role, p);
        const n = 1 + randomInt(rng, hashes.length);
        const op = randomInt(rng, 10);
        if (op < 4) h.store(role, w, hashes.subarray(0, n));
        else if (op === 4) h.kv(role, w, { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: hashes.subarray(0, n).map((x) => x ^ 0x5555n), tokensHashes: hashes.subarray(0, n) }, { skip: 1 + randomInt(rng, 3) }); // loss
        else if (op === 5) h.kv(role, w, { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: hashes.subarray(0, n).map((x) => x ^ 0x5555n), tokensHashes: hashes.subarray(0, n) }, { repeat: true }); // duplicate
        else if (op === 6) h.kv(role, w, { kind: 'removed', blockHashes: hashes.subarray(n - 1, n).map((x) => x ^ 0x5555n) });
        else if (op === 7) {
          // Churn: a worker leaves, or comes back.
          if (registered[role].has(w) && registered[role].size > 1) {
            h.deregister(role, w);
            registered[role].delete(w);
          } else {
            h.register(role, w);
            registered[role].add(w);
          }
        } else if (op === 8) {
          const id = `bg-${++bg}`;
          h.book(role, w, id);
          openBg.push({ role, w, id });
        } else if (openBg.length > 0) {
          const b = openBg.splice(randomInt(rng, openBg.length), 1)[0]!;
          h.client.done({ requestId: b.id, sessionId: 'bg', pool: h.poolOf(b.role), workerId: b.w, dpRank: 0 });
        }
      }
      const prompt = prompts[randomInt(rng, prompts.length)]!;
      const probe = h.client.hashPrompt('efficient', prompt);
      await eventually(`step ${step}: indexers and local pools agree`, () => agree(probe), 10_000);

      const proposal: Role = randomInt(rng, 4) === 0 ? 'capable' : 'efficient';
      const args = (id: string): RouteArgs => ({ requestId: id, sessionId: 's', stageProposal: proposal, prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });
      // The remote decision first; its booking released and gone from both sides before the local one routes.
      const r = await remoteClient.route(args(`rm-${step}`));
      release(r);
      await eventually(`step ${step}: remote route's booking released`, () => agree(probe), 10_000);
      const l = await h.client.route(args(`lc-${step}`));
      release(l);
      expect(answer(l), `step ${step}`).toEqual(answer(r));
      reasons.set(l.fallback ?? l.reason, (reasons.get(l.fallback ?? l.reason) ?? 0) + 1);
      compared++;
    }
    console.log(`[modes] ${compared} routes compared; answers by reason: ${[...reasons].map(([k, v]) => `${k} ${v}`).join(', ')}`);
    expect(compared).toBe(30);
    // The stream made the rule keep, act and fall back.
    expect(reasons.size).toBeGreaterThan(2);
  });
});

describe('remote pools: the age check refuses a reply later than gate.maxAgeMs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-age-'));
  // Deadline = maxAgeMs (100) + observeTimeoutMs (400) = 500 ms.
  const h = new Harness(join(dir, 'params.json'), { source: 'remote', observeTimeoutMs: 400 });
  const E = 41n as WorkerId;
  const C = 42n as WorkerId;
  const prompt = tokens(20 * BLOCK, 7);
  let delayMs = 0;

  beforeAll(async () => {
    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b', gate: { maxAgeMs: 100, destinationLimit: 6, localLimit: 50 } }));
    const hashes = h.client.hashPrompt('efficient', prompt);
    await h.seedWorkers(E, C, hashes, 10);
    // The capable indexer's real reply to the decision service's own query, then the indexer stops and
    // a responder answers with those bytes after `delayMs`: a slow indexer.
    const reply = (await h.nc.request(observeSubject(h.capPool), encodeObserveRequestBinary({ requestId: 'q', prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null }, promptTokens: prompt.length, workers: 'choice', replyEncoding: 'binary' }), { timeout: 2000 })).data;
    await h.indexers.capable.svc.stop('replaced by a slow responder');
    h.nc.subscribe(observeSubject(h.capPool), {
      callback: (_e, m) => {
        setTimeout(() => m.respond(reply), delayMs);
      },
    });
    await h.nc.flush();
  });
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const route = (id: string) => h.client.route({ requestId: id, sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });

  it('on time: no age fallback; past maxAgeMs: fallback_stale_observation; past the deadline: unavailable', async () => {
    delayMs = 5;
    const fast = await route('age-fast');
    expect(fast.fallback).not.toBe('fallback_stale_observation');
    expect(fast.observations.capable).toMatchObject({ workerId: C, error: null });

    delayMs = 250;
    const slow = await route('age-slow');
    expect(slow).toMatchObject({ reason: 'fallback', fallback: 'fallback_stale_observation', modelRole: 'efficient' });
    expect(slow.detail).toMatch(/more than 100 ms/);
    expect(slow.observations.capable!.ages.collectedMs).toBeGreaterThan(100);

    delayMs = 800;
    const late = await route('age-late');
    expect(late).toMatchObject({ reason: 'fallback', fallback: 'fallback_indexer_unavailable' });
    expect(late.observations.capable).toMatchObject({ workerId: null, error: { code: 'indexer_timeout' } });
  });
});
