// Differential: the offline study's decision path (@vantage/study's simulated pools: PoolState,
// the observe reply, decideRoute) and the live decision service (real NATS, two real indexers)
// fed the same observations — the same worker registrations, KV events and bookings — and the
// same parameter sets give the same decision: choice, reason, worker and predictions, route by route.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { replyReason } from '@vantage/decision-core';
import { createParameterSet, DEFAULT_PARAMETER_SET, serializeParameterSet, type ParameterSet, type Variant } from '@vantage/rules';
import { polynomialTiming, scaledTiming } from '@vantage/sim';
import { TwoPoolFleet, type FleetSpec } from '@vantage/study';
import { eventually } from '@vantage/testkit';
import type { KvEvent } from '@vantage/types';
import { BLOCK, Harness, tokens } from './harness';

describe('offline study decision path vs the live decision service', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-study-diff-'));
  const h = new Harness(join(dir, 'params.json'));
  // The harness's worker capacity (register()): one worker per pool, block size BLOCK.
  const pool = { workers: 1, blockSize: BLOCK, numGpuBlocks: 4096, maxNumBatchedTokens: 2048, maxNumSeqs: 64 };
  const spec: FleetSpec = {
    efficient: { name: h.effModel, timing: polynomialTiming, ...pool },
    capable: { name: h.capModel, timing: scaledTiming(polynomialTiming, 0.6), ...pool },
  };
  const fleet = new TwoPoolFleet(spec);
  const E = fleet.pools.efficient.workerIds[0]!;
  const C = fleet.pools.capable.workerIds[0]!;
  /** Event ids per worker, as the harness numbers them. */
  const eventIds = { efficient: 0n, capable: 0n };

  /** Q tables wide enough for the prompts below, so the estimators predict rather than fall back. */
  const q = { nGrid: [16, 100_000], fGrid: [0, 1], valuesMs: [[20, 10], [400, 60]], clampN: false, clampF: false };
  const set = (variant: Variant, i: number): ParameterSet => {
    const d = DEFAULT_PARAMETER_SET;
    const r = createParameterSet({
      variant,
      models: { efficient: { ...d.models.efficient, name: h.effModel, qTable: q }, capable: { ...d.models.capable, name: h.capModel, qTable: { ...q, valuesMs: [[30, 15], [700, 90]] } } },
      thresholds: { r: 3, p: 0.5 },
      margins: { deltaBlindMs: 20, deltaCacheMs: 20 },
      // Limits above what the scenarios book (they accumulate: nothing is released), so the rules get to act.
      gate: { maxAgeMs: 1000, destinationLimit: 64, localLimit: 64 },
      provenance: { test: `diff-${i}` },
      createdAt: '2026-01-01T00:00:00Z',
    });
    if (!r.ok) throw new Error(r.errors.join('; '));
    return r.value;
  };

  beforeAll(async () => {
    await h.start(set('count', 0));
    h.register('efficient', E);
    h.register('capable', C);
    await eventually('both indexers know their worker', async () => (await h.observeWorker('efficient', E, new BigUint64Array(0)))?.schedulable === true && (await h.observeWorker('capable', C, new BigUint64Array(0)))?.schedulable === true);
  });
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The same KV event to the live indexer (event plane) and the offline pool. */
  const store = (role: 'efficient' | 'capable', hashes: BigUint64Array): void => {
    h.store(role, role === 'efficient' ? E : C, hashes);
    eventIds[role]++;
    const ev: KvEvent = {
      workerId: role === 'efficient' ? E : C,
      dpRank: 0,
      storageTier: 'device',
      eventId: eventIds[role],
      data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: hashes.map((x) => x ^ 0x5555n), tokensHashes: hashes },
    };
    fleet.pools[role].state.applyKvEvent(ev, fleet.nowMs);
  };
  /** The same booking (competing traffic) to both ledgers. */
  const book = (role: 'efficient' | 'capable', id: string): void => {
    const w = role === 'efficient' ? E : C;
    h.book(role, w, id);
    fleet.pools[role].state.ledger.book({ requestId: id, workerId: w, dpRank: 0, promptTokens: 256, overlapBlocks: 0, sequenceHashes: new BigUint64Array(0), expectedOutputTokens: null, source: 'decision_service', nowMs: fleet.nowMs });
  };

  it('gives the same decision for the same observations and parameters (seeded scenarios)', async () => {
    const variants: readonly Variant[] = ['count', 'count_prefill', 'blind', 'cache', 'stage'];
    const scenarios = fc.sample(
      fc.record({
        blocks: fc.integer({ min: 4, max: 60 }),
        heldEff: fc.integer({ min: 0, max: 60 }),
        heldCap: fc.integer({ min: 0, max: 60 }),
        bookEff: fc.integer({ min: 0, max: 4 }),
        bookCap: fc.integer({ min: 0, max: 2 }),
        capable: fc.boolean(),
        variant: fc.constantFrom(...variants),
      }),
      { numRuns: 30, seed: 28 },
    );
    let booked = 0;
    let version = '';
    const seen = new Set<string>();
    for (const [i, s] of scenarios.entries()) {
      const params = set(s.variant, i);
      if (params.version !== version) {
        writeFileSync(h.paramsFile, serializeParameterSet(params));
        await eventually(`decision service runs ${params.version}`, () => h.handle.params.current().version === params.version);
        version = params.version;
      }
      const prompt = tokens(s.blocks * BLOCK, 100 + i);
      const hashes = fleet.pools.efficient.prompt(prompt).local;
      if (s.heldEff > 0) store('efficient', hashes.subarray(0, Math.min(s.heldEff, s.blocks)));
      if (s.heldCap > 0) store('capable', hashes.subarray(0, Math.min(s.heldCap, s.blocks)));
      for (let j = 0; j < s.bookEff; j++) book('efficient', `bg-e-${booked++}`);
      for (let j = 0; j < s.bookCap; j++) book('capable', `bg-c-${booked++}`);
      const effR = fleet.pools.efficient.state.ledger.size;
      await eventually('the live indexers applied the same events', async () => {
        const e = await h.observeWorker('efficient', E, hashes);
        const c = await h.observeWorker('capable', C, hashes);
        const oe = fleet.pools.efficient.probe(fleet.pools.efficient.prompt(prompt), fleet.nowMs);
        const oc = fleet.pools.capable.probe(fleet.pools.capable.prompt(prompt), fleet.nowMs);
        return oe.kind === 'ok' && oc.kind === 'ok' && e?.K === oe.worker?.K && e?.R === oe.worker?.R && c?.K === oc.worker?.K && c?.R === oc.worker?.R;
      });
      const proposal = s.capable ? 'capable' : 'efficient';
      const requestId = `diff-${i}`;
      const live = await h.client.route({ requestId, sessionId: 'diff', stageProposal: proposal, prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });
      const offline = fleet.route({ requestId, sessionId: 'diff', tokens: prompt, osl: 4, proposal, params });
      expect(offline, `scenario ${i}`).not.toBeNull();
      const d = offline!;
      const label = `scenario ${i} ${JSON.stringify(s)}`;
      expect(live.modelRole, label).toBe(d.choice);
      expect(live.reason, label).toBe(replyReason(d.reason));
      expect(live.fallback, label).toBe(d.reason.startsWith('fallback_') ? d.reason : null);
      expect(live.workerId, label).toBe(d.choice === 'efficient' ? E : C);
      const which = s.variant === 'blind' ? 'blind' : s.variant === 'cache' ? 'cache' : null;
      if (which !== null) {
        const pe = d.predictions.efficient?.[which];
        const pc = d.predictions.capable?.[which];
        expect(live.predictions.efficientTtftMs, label).toBe(pe?.ok === true ? pe.ms : null);
        expect(live.predictions.capableTtftMs, label).toBe(pc?.ok === true ? pc.ms : null);
      }
      seen.add(d.reason);
      expect(fleet.pools.efficient.state.ledger.size).toBeGreaterThanOrEqual(effR);
    }
    // The scenarios exercise more than one outcome, or the comparison would prove little.
    expect(seen.size).toBeGreaterThanOrEqual(4);
    expect([...seen], 'reasons seen').toContain('overrode');
  });
});
