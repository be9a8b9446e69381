// A decision service starting with a local pool in JetStream mode replays the stream before it routes
// from that pool: routes meanwhile fall back and say why (`pool_replaying`), never reading a
// half-replayed state; once replayed, they see every event.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import type { RouteReply } from '@vantage/protocol';
import { natsUrl } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { jetStreamKvStreamName, jetStreamKvSubject } from '@vantage/wire';
import { encodeRouterEventJson } from '@vantage/wire/test/encode';
import { BLOCK, Harness, parameterSet, tokens } from './harness';

describe('local pool restore: JetStream replay', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-restore-'));
  const h = new Harness(join(dir, 'params.json'), { source: 'local', decisionEnv: { VANTAGE_DECISION_POOLS_EFFICIENT_KV_EVENTS: 'jetstream' } });
  const E = 61n as WorkerId;
  afterAll(async () => {
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('falls back with pool_replaying until the stream is replayed, then routes on the whole state', { timeout: 120_000 }, async () => {
    // The efficient pool's stream, filled before the service starts: many events of one worker, the last storing the prompt.
    const nc = await connect({ servers: natsUrl() });
    const ns = `${h.ns}e`;
    const stream = jetStreamKvStreamName(ns, 'backend');
    const subject = jetStreamKvSubject(ns, 'backend');
    await (await jetstreamManager(nc)).streams.add({ name: stream, subjects: [subject] });
    const js = jetstream(nc);
    const prompt = tokens(8 * BLOCK, 11);
    const N = 20_000;
    let acks: Promise<unknown>[] = [];
    for (let i = 1; i <= N; i++) {
      const hashes = i === N ? null : BigUint64Array.of(BigInt(i) * 7919n + 1n);
      const ev: KvEvent = {
        workerId: E,
        dpRank: 0,
        storageTier: 'device',
        eventId: BigInt(i),
        data: hashes === null ? { kind: 'cleared' } : { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: hashes, tokensHashes: hashes },
      };
      acks.push(js.publish(subject, encodeRouterEventJson(ev)));
      if (acks.length === 1000) {
        await Promise.all(acks);
        acks = [];
      }
    }
    await Promise.all(acks);
    await nc.close();

    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b' }));
    const route = (id: string): Promise<RouteReply> => h.client.route({ requestId: id, sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });
    const first = await route('during-replay');
    const ingest = h.handle.pools.get('efficient')!;
    console.log(`[restore] first route: ${first.fallback ?? first.reason} (${first.observations.efficient?.error?.code ?? 'no error'}); stream at ${JSON.stringify(ingest.readiness())}`);
    expect(first).toMatchObject({ reason: 'fallback', fallback: 'fallback_indexer_unavailable' });
    expect(first.observations.efficient!.error).toMatchObject({ code: 'pool_replaying' });
    expect(first.observations.efficient!.error!.reason).toMatch(/replaying JetStream to sequence 20000/);
    // Replayed: the pool holds what the whole stream says (its last event cleared the worker).
    let after: RouteReply | null = null;
    for (let i = 0; i < 400 && after === null; i++) {
      await new Promise((r) => setTimeout(r, 50));
      if (ingest.readiness().ready) after = await route('after-replay');
    }
    expect(after).not.toBeNull();
    expect(after!.observations.efficient?.error?.code).not.toBe('pool_replaying');
    expect(ingest.state.index.stats().totalBlocks).toBe(0);
  });
});
