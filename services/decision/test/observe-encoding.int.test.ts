/**
 * `observeRequestEncoding`: the decision service's observe queries as JSON (for indexers older than
 * the binary request) reach real indexers and give the same route as the default binary queries
 * (decision.int.test.ts runs the binary ones throughout).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isObserveRequestBinary, observeSubject } from '@vantage/protocol';
import { eventually } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { BLOCK, Harness, parameterSet, tokens } from './harness';

const E1 = 21n as WorkerId;
const C1 = ((1n << 64n) - 9n) as WorkerId;

describe.each(['json', 'binary'] as const)('decision service with %s observe queries', (encoding) => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-decision-enc-'));
  const h = new Harness(join(dir, 'params.json'), { observeRequestEncoding: encoding });
  const prompt = tokens(24 * BLOCK, 3);
  let hashes: BigUint64Array;

  beforeAll(async () => {
    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b', provenance: { test: encoding } }));
    hashes = h.client.hashPrompt('efficient', prompt);
    await h.seedWorkers(E1, C1, hashes, 20);
  });
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('routes with both candidates observed (token ids and block hashes), its queries in that encoding', async () => {
    // A plain subscriber beside the indexers' queue group sees a copy of every query.
    const seen: Uint8Array[] = [];
    const spies = [h.effPool, h.capPool].map((pool) => h.nc.subscribe(observeSubject(pool), { callback: (_e, m) => void seen.push(m.data) }));
    await h.nc.flush();
    for (const sendTokenIds of [true, false]) {
      const r = await h.client.route({ requestId: `enc-${encoding}-${sendTokenIds}`, sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } }, sendTokenIds });
      expect(r).toMatchObject({ reason: 'kept', fallback: null, modelRole: 'efficient', workerId: E1, dpRank: 0 });
      expect(r.observations.efficient).toMatchObject({ workerId: E1, K: 20 * BLOCK, promptTokens: 24 * BLOCK, error: null });
      expect(r.observations.capable).toMatchObject({ workerId: C1, K: 0, error: null });
      h.client.cancelled({ requestId: r.requestId, sessionId: 's', pool: r.pool!, workerId: r.workerId, dpRank: r.dpRank });
    }
    await eventually('the spies saw both routes\' queries', () => seen.length >= 4);
    for (const s of spies) s.unsubscribe();
    expect(seen.map((d) => (isObserveRequestBinary(d) ? 'binary' : d[0] === 0x7b ? 'json' : 'other'))).toEqual(seen.map(() => encoding));
  });
});
