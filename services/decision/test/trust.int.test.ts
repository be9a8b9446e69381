/**
 * The decision service's trust checks and bounded tables over real NATS (issue 25, items 5 and 6):
 * a registration's endpoint is handed to the gateway only when it passes the scheme, host and port
 * checks and the allow-list; a lifecycle event naming another pool does not release a reservation;
 * the in-flight table, full, releases its oldest reservation early; every message is counted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lifecycleEventCodec, lifecycleSubject, workerRegistrationCodec, workersSubject } from '@vantage/protocol';
import type { RouteArgs } from '@vantage/gateway-client';
import { eventually, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { BLOCK, Harness, parameterSet, tokens } from './harness';

function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

describe('decision: endpoints, pools of lifecycle events, in-flight bound', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-decision-trust-'));
  // The harness's workers register `http://{role}-{id}.local:8000`: allowed by the list below.
  const h = new Harness(join(dir, 'p.json'), { decisionEnv: { VANTAGE_DECISION_ENDPOINTS_ALLOW: '["*.local:8000"]', VANTAGE_DECISION_IN_FLIGHT_MAX_ENTRIES: '3', VANTAGE_DECISION_REJECTION_LOG_INTERVAL_MS: '0' } });
  const prompt = tokens(8 * BLOCK, 9);
  const E = 301n as WorkerId;
  let seq = 0;
  const args = (): RouteArgs => ({ requestId: `${uniqueName('req')}-${++seq}`, sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });
  const reg = (endpoint: string, pool = h.effPool): void =>
    h.nc.publish(
      workersSubject(h.effPool),
      workerRegistrationCodec.encode({ kind: 'heartbeat', pool, workerId: E, atMs: Date.now(), capacity: { blockSize: BLOCK, totalKvBlocks: 4096, maxNumBatchedTokens: 2048, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true }, ttlMs: 60_000, endpoint, model: null }),
    );
  const text = (): Promise<string> => h.decision.ctx.registry.metrics();
  const done = (requestId: string, pool: string): Uint8Array => lifecycleEventCodec.encode({ requestId, sessionId: 's', pool, kind: 'done', atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null });
  /** A route whose request then completes (its booking released), so the rule keeps choosing the efficient worker. */
  const routeOnce = async (): Promise<string | null> => {
    const a = args();
    const r = await h.client.route(a);
    const pool = r.pool ?? h.effPool;
    h.nc.publish(lifecycleSubject(pool), done(a.requestId, pool));
    await h.nc.flush();
    return r.workerId === E ? r.endpoint : `not the efficient worker: ${String(r.workerId)}`;
  };

  beforeAll(async () => {
    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b' }));
    await h.seedWorkers(E, 302n as WorkerId, h.client.hashPrompt('efficient', prompt), 6);
  });
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('hands over only endpoints that pass the checks and the allow-list', async () => {
    expect(await routeOnce()).toBe(`http://efficient-${E}.local:8000`);
    for (const [bad, reason] of [
      ['http://evil.example:8000', 'endpoint_not_allowed'],
      ['file:///etc/passwd', 'endpoint_scheme'],
      ['http://u:p@efficient.local:8000', 'endpoint_invalid'],
    ] as const) {
      reg(bad);
      await h.nc.flush();
      await eventually(`${reason} counted`, async () => metric(await text(), 'vantage_decision_messages_rejected_total', { source: 'workers', reason }) >= 1);
      // The refused endpoint replaces nothing: the worker's old one is dropped as well.
      expect(await routeOnce()).toBeNull();
      reg(`http://efficient-${E}.local:8000`);
      await h.nc.flush();
      await eventually('good endpoint back', async () => (await routeOnce()) === `http://efficient-${E}.local:8000`);
    }
    // A registration naming another pool on this pool's subject: refused, endpoint kept.
    reg('http://other.local:8000', `${h.effPool}x`);
    await h.nc.flush();
    await eventually('pool mismatch counted', async () => metric(await text(), 'vantage_decision_messages_rejected_total', { source: 'workers', reason: 'pool_mismatch' }) === 1);
    expect(await routeOnce()).toBe(`http://efficient-${E}.local:8000`);
  });

  it('does not release a reservation for a lifecycle event of another pool; a full table releases its oldest', async () => {
    const inFlight = h.handle.inFlight;
    const a = args();
    const r = await h.client.route(a);
    expect(inFlight.has(a.requestId)).toBe(true);
    const pool = r.pool ?? h.effPool;
    const otherPool = pool === h.effPool ? h.capPool : h.effPool;
    h.nc.publish(lifecycleSubject(pool), done(a.requestId, otherPool));
    await h.nc.flush();
    await eventually('lifecycle pool mismatch counted', async () => metric(await text(), 'vantage_decision_messages_rejected_total', { source: 'lifecycle', reason: 'pool_mismatch' }) === 1);
    expect(inFlight.has(a.requestId)).toBe(true);
    h.nc.publish(lifecycleSubject(pool), done(a.requestId, pool));
    await h.nc.flush();
    await eventually('released by its own pool', () => !inFlight.has(a.requestId));

    // Bound of 3: the fourth reservation releases the oldest early, counted.
    const before = metric(await text(), 'vantage_decision_limit_hits_total', { limit: 'in_flight_entries' });
    const sizeBefore = inFlight.size;
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const x = args();
      ids.push(x.requestId);
      await h.client.route(x);
    }
    expect(inFlight.size).toBe(3);
    expect(inFlight.has(ids[0]!)).toBe(false);
    expect(ids.slice(1).every((id) => inFlight.has(id))).toBe(true);
    expect(metric(await text(), 'vantage_decision_limit_hits_total', { limit: 'in_flight_entries' })).toBe(before + Math.max(0, sizeBefore + 4 - 3));
    const t = await text();
    expect(metric(t, 'vantage_decision_messages_received_total')).toBe(metric(t, 'vantage_decision_messages_accepted_total') + metric(t, 'vantage_decision_messages_rejected_total'));
  });
});
