import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RouteError, type RouteArgs } from '@vantage/gateway-client';
import { decodeSingleObject, DECISION_REGISTRY, type DecisionRecord } from '@vantage/records';
import { serializeParameterSet } from '@vantage/rules';
import { eventually, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { BLOCK, Harness, parameterSet, POOL_SOURCES, tokens } from './harness';

const E1 = 11n as WorkerId;
const C1 = ((1n << 64n) - 7n) as WorkerId; // full-range u64 survives every hop

describe.each(POOL_SOURCES)('decision service over real NATS with two indexers (%s pools)', (source) => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-decision-'));
  const h = new Harness(join(dir, 'params.json'), { source });
  /** R as the indexer has it and, with local pools, as the decision service itself has it. */
  const rIs = async (role: 'efficient' | 'capable', w: WorkerId, n: number): Promise<boolean> =>
    (await h.observeWorker(role, w, hashes))?.R === n && (source === 'remote' || h.localWorker(role, w, hashes)?.R === n);
  const prompt = tokens(40 * BLOCK, 1);
  let hashes: BigUint64Array;
  let seq = 0;
  const rid = (): string => `${uniqueName('req')}-${++seq}`;
  const args = (over: Partial<RouteArgs> = {}): RouteArgs => ({
    requestId: rid(),
    sessionId: 'sess-1',
    stageProposal: 'efficient',
    prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } },
    ...over,
  });
  const routed: string[] = [];
  const route = async (over: Partial<RouteArgs> = {}) => {
    const a = args(over);
    routed.push(a.requestId);
    return h.client.route(a);
  };
  let v1: string;

  beforeAll(async () => {
    const p = parameterSet({ effModel: 'model-8b', capModel: 'model-70b', provenance: { test: 'v1' } });
    v1 = p.version;
    await h.start(p);
    hashes = h.client.hashPrompt('efficient', prompt);
    await h.seedWorkers(E1, C1, hashes, 30); // efficient worker holds 30 of 40 blocks
  });
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps efficient on a quiet worker, reserves it (R and P in the indexer) and releases on done', async () => {
    const a = args();
    routed.push(a.requestId);
    const r = await h.client.route(a);
    expect(r).toMatchObject({ reason: 'kept', fallback: null, modelRole: 'efficient', model: 'model-8b', pool: h.effPool, workerId: E1, dpRank: 0, variant: 'request_count', parameterVersion: v1 });
    expect(r.endpoint).toBe(`http://efficient-${E1}.local:8000`);
    expect(r.observations.efficient).toMatchObject({ workerId: E1, K: 30 * BLOCK, R: 0, promptTokens: 40 * BLOCK, error: null });
    expect(r.observations.capable).toMatchObject({ workerId: C1, K: 0, R: 0 });
    expect(r.observations.efficient!.ages.collectedMs).toBeGreaterThan(0);
    expect(r.queryDurationUs).toBeGreaterThan(0);
    expect(r.decisionDurationUs).toBeGreaterThanOrEqual(r.queryDurationUs);
    await eventually('reservation visible in efficient R and P', async () => {
      const w = await h.observeWorker('efficient', E1, hashes);
      return w?.R === 1 && (w.P ?? 0) > 0;
    });
    // A local pool booked it at once, and the booking's echo from the subject was not counted again.
    if (source === 'local') expect(h.localWorker('efficient', E1, hashes)).toMatchObject({ R: 1 });
    expect(h.handle.inFlight.count('model-8b')).toBe(1);
    const pl = { requestId: a.requestId, sessionId: a.sessionId, pool: r.pool!, workerId: r.workerId, dpRank: r.dpRank };
    h.client.firstToken(pl);
    h.client.done(pl, { inputTokens: 640, outputTokens: 10, cachedTokens: 480 });
    await eventually('reservation released after done', () => rIs('efficient', E1, 0));
    await eventually('local in-flight released', () => h.handle.inFlight.count('model-8b') === 0);
  });

  it('holds the local in-flight count past first_token until done, cancelled or failed', async () => {
    const held = args();
    const marker = args();
    routed.push(held.requestId, marker.requestId);
    const a = await h.client.route(held);
    const b = await h.client.route(marker);
    expect(h.handle.inFlight.count('model-8b')).toBe(2);
    const pa = { requestId: held.requestId, sessionId: held.sessionId, pool: a.pool!, workerId: a.workerId, dpRank: a.dpRank };
    const pb = { requestId: marker.requestId, sessionId: marker.sessionId, pool: b.pool!, workerId: b.workerId, dpRank: b.dpRank };
    h.client.firstToken(pa);
    // Same subject, same connection: once the later event is applied, the first_token before it has been too.
    h.client.failed(pb, { code: 'TEST_MARKER', message: null });
    await eventually('marker released on failed', () => !h.handle.inFlight.has(marker.requestId));
    expect(h.handle.inFlight.has(held.requestId)).toBe(true);
    expect(h.handle.inFlight.count('model-8b')).toBe(1);
    h.client.done(pa, { inputTokens: 640, outputTokens: 10, cachedTokens: 480 });
    await eventually('held request released on done', () => h.handle.inFlight.count('model-8b') === 0);
    await eventually('reservations released', () => rIs('efficient', E1, 0));
  });

  it('token ids and block hashes give the same observation', async () => {
    const byIds = await route({ sendTokenIds: true });
    const byHashes = await route();
    expect(byIds.observations.efficient!.K).toBe(byHashes.observations.efficient!.K);
    expect(byIds.workerId).toBe(byHashes.workerId);
    for (const r of [byIds, byHashes]) h.client.cancelled({ requestId: r.requestId, sessionId: 'sess-1', pool: r.pool!, workerId: r.workerId, dpRank: r.dpRank });
    await eventually('released', () => rIs('efficient', E1, 0));
  });

  it('a busy efficient worker leads to capable under the count rule; cancellation releases the capable reservation', async () => {
    for (let i = 0; i < 3; i++) h.book('efficient', E1, `bg-busy-${i}`);
    await eventually('efficient R = 3', () => rIs('efficient', E1, 3));
    const r = await route();
    expect(r).toMatchObject({ reason: 'overrode', fallback: null, modelRole: 'capable', model: 'model-70b', pool: h.capPool, workerId: C1 });
    expect(r.observations.efficient!.R).toBe(3);
    await eventually('capable reservation visible', () => rIs('capable', C1, 1));
    expect(h.handle.inFlight.count('model-70b')).toBe(1);
    h.client.cancelled({ requestId: r.requestId, sessionId: 'sess-1', pool: h.capPool, workerId: r.workerId, dpRank: r.dpRank });
    await eventually('capable reservation released on cancel', () => rIs('capable', C1, 0));
    await eventually('local capable in-flight released', () => h.handle.inFlight.count('model-70b') === 0);
  });

  it('a full destination leads to a fallback and keeps efficient', async () => {
    for (let i = 0; i < 6; i++) h.book('capable', C1, `bg-full-${i}`);
    await eventually('capable R = 6', () => rIs('capable', C1, 6));
    const r = await route();
    expect(r).toMatchObject({ reason: 'fallback', fallback: 'fallback_destination_limit', modelRole: 'efficient', workerId: E1 });
    expect(r.detail).toContain('limit 6');
    for (let i = 0; i < 6; i++) h.client.done({ requestId: `bg-full-${i}`, sessionId: 'bg', pool: h.capPool, workerId: C1, dpRank: 0 });
    h.client.cancelled({ requestId: r.requestId, sessionId: 'sess-1', pool: h.effPool, workerId: E1, dpRank: 0 });
    await eventually('capable R back to 0', () => rIs('capable', C1, 0));
  });

  it('capable proposals are never reconsidered', async () => {
    const r = await route({ stageProposal: 'capable' });
    expect(r).toMatchObject({ reason: 'kept', modelRole: 'capable', workerId: C1 });
    h.client.done({ requestId: r.requestId, sessionId: 'sess-1', pool: h.capPool, workerId: C1, dpRank: 0 });
  });

  it('a reload changes the version in replies; a stale observation falls back; a bad file is refused and the previous set stays', async () => {
    const stale = parameterSet({ effModel: 'model-8b', capModel: 'model-70b', gate: { maxAgeMs: 0.001, destinationLimit: 6, localLimit: 50 }, provenance: { test: 'v2' } });
    expect(stale.version).not.toBe(v1);
    writeFileSync(h.paramsFile, serializeParameterSet(stale));
    await eventually('new version active', () => h.handle.params.current().version === stale.version, 5000);
    const r = await route();
    expect(r).toMatchObject({ parameterVersion: stale.version, reason: 'fallback', fallback: 'fallback_stale_observation', modelRole: 'efficient' });
    h.client.done({ requestId: r.requestId, sessionId: 'sess-1', pool: h.effPool, workerId: E1, dpRank: 0 });

    writeFileSync(h.paramsFile, '{"schema": "vantage.parameter-set", "schemaVersion": 1, "variant": "count"}\n');
    await eventually('refusal logged', () => h.logged('parameter set refused').length > 0, 5000);
    expect(h.logged('parameter set refused')[0]).toMatchObject({ level: 'error', activeVersion: stale.version });
    const again = await route();
    expect(again.parameterVersion).toBe(stale.version);
    h.client.done({ requestId: again.requestId, sessionId: 'sess-1', pool: h.effPool, workerId: E1, dpRank: 0 });
  });

  it('typed errors: bad request in headers, no responders apart from service errors', async () => {
    const bad = h.client.route(args({ prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } }, requestId: '' }));
    await expect(bad).rejects.toMatchObject({ name: 'RouteError', kind: 'service', code: 'BAD_REQUEST', retryable: false });
    const raw = await h.nc.request(h.routeSubject, new TextEncoder().encode('{"v":1}'), { timeout: 2000 });
    expect(raw.headers?.get('Vantage-Error-Code')).toBe('BAD_REQUEST');
    expect(raw.headers?.get('Nats-Service-Error-Code')).toBe('400');
    const { GatewayClient } = await import('@vantage/gateway-client');
    const nobody = new GatewayClient({ nc: h.nc, routeSubject: `${uniqueName('none')}.route`, routeTimeoutMs: 2000, pools: { efficient: { model: 'a', pool: 'a', blockSize: BLOCK }, capable: { model: 'b', pool: 'b', blockSize: BLOCK } } });
    const e = await nobody.route(args()).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RouteError);
    expect(e).toMatchObject({ kind: 'no_responders', code: 'NATS_NO_RESPONDERS', retryable: true });
  });

  it('an indexer that is down leads to fallback_indexer_unavailable, not an error', async () => {
    const ok = parameterSet({ effModel: 'model-8b', capModel: 'model-70b', provenance: { test: 'v3' } });
    writeFileSync(h.paramsFile, serializeParameterSet(ok));
    await eventually('v3 active', () => h.handle.params.current().version === ok.version, 5000);
    await h.indexers.capable.svc.stop('simulated outage');
    const r = await route();
    if (source === 'remote') {
      expect(r).toMatchObject({ reason: 'fallback', fallback: 'fallback_indexer_unavailable', modelRole: 'efficient', workerId: E1, parameterVersion: ok.version });
      expect(r.observations.capable).toMatchObject({ workerId: null, error: { code: 'indexer_unavailable' } });
    } else {
      // A local pool does not ask the indexer: its outage changes nothing for routing (the three
      // background bookings on E1 still stand, so the count rule sends this one to capable).
      expect(r).toMatchObject({ reason: 'overrode', fallback: null, modelRole: 'capable', workerId: C1, parameterVersion: ok.version });
      expect(r.observations.capable).toMatchObject({ workerId: C1, error: null });
    }
    h.client.done({ requestId: r.requestId, sessionId: 'sess-1', pool: r.pool!, workerId: r.workerId, dpRank: 0 });
  });

  it('every route left one decision record in JetStream that decodes with @vantage/records', async () => {
    const jsm = await jetstreamManager(h.nc);
    await eventually('all records acked', () => h.handle.publisher!.depth === 0 && h.handle.publisher!.published >= routed.length, 10_000);
    const info = await jsm.streams.info(h.recordsStream);
    const js = jetstream(h.nc);
    const records: DecisionRecord[] = [];
    for (let s = 1; s <= info.state.last_seq; s++) {
      const m = await jsm.streams.getMessage(h.recordsStream, { seq: s });
      const d = decodeSingleObject(m!.data, DECISION_REGISTRY);
      if (!d.ok) throw new Error(`${d.code}: ${d.reason}`);
      records.push(d.value as DecisionRecord);
    }
    void js;
    expect(records.map((r) => r.requestId).sort()).toEqual([...routed].sort());
    const by = new Map(records.map((r) => [r.requestId, r]));
    const overrode = records.find((r) => r.reason === 'overrode')!;
    expect(overrode).toMatchObject({ variant: 'request_count', stageProposal: { role: 'efficient', model: 'model-8b' }, finalChoice: { role: 'capable', model: 'model-70b' }, chosenWorkerId: C1, couldAct: true, triggered: true });
    expect(overrode.gate).toMatchObject({ passed: true, capableSchedulable: true, destinationLimit: 6, capableBookedRequests: 0 });
    expect(overrode.observations.map((o) => [o.role, o.status, o.workerId])).toEqual([
      ['efficient', 'ok', E1],
      ['capable', 'ok', C1],
    ]);
    expect(overrode.observations[0]).toMatchObject({ bookedRequests: 3, overlapTokens: 30 * BLOCK, promptTokens: 40 * BLOCK, prefillCapacityTokens: 2048 });
    expect(overrode.predictions.map((p) => p.role)).toEqual(['efficient', 'capable']);
    expect(overrode.predictions[0]!.cacheTtftMs).toBeGreaterThan(0);
    expect(overrode.observeDurationUs).toBeGreaterThan(0);
    expect(overrode.decisionDurationUs).toBeGreaterThanOrEqual(overrode.observeDurationUs!);
    const stale = records.find((r) => r.reason === 'fallback_observations_stale')!;
    expect(stale.detail).toMatch(/^fallback_stale_observation: /);
    expect(stale.parameterSetVersion).not.toBe(v1);
    const down = records.find((r) => r.reason === 'fallback_observe_failed');
    if (source === 'remote') expect(down!.observations.find((o) => o.role === 'capable')).toMatchObject({ status: 'unavailable', workerId: null });
    else expect(down).toBeUndefined();
    expect(records.filter((r) => r.parameterSetVersion === v1).length).toBeGreaterThan(3);
    expect(by.size).toBe(records.length);
  });
});
