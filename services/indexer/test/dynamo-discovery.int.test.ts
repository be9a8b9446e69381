/**
 * The indexer on Dynamo 1.6.1's shapes with file discovery, over a real nats-server, with the test
 * playing Dynamo's workers so every fault can be injected: discovery entries written, broken,
 * replaced and deleted in the directory; envelopes carrying batches of RouterEvents, load reports
 * before any KV event, forward-pass metrics, an envelope whose publisher id belongs to another
 * worker, a batch with one malformed event, and a subject prefix that only discovery names.
 * (dynamo-live.int.test.ts runs the same against Dynamo's own processes.)
 */
import { mkdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyToFilePath } from '@vantage/discovery/test/file-layout';
import { localBlockHashes, sequenceHashes } from '@vantage/hashing';
import { INFRA_DIR } from '@vantage/infra';
import { observeReplyCodec, observeRequestCodec, observeSubject, type ObserveReply } from '@vantage/protocol';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { encodeEnvelope, endpointSubjectPrefix, prefixedSubject, type ForwardPassMetrics } from '@vantage/wire';
import { encodeActiveLoad, encodeEventPlaneMessage, encodeRouterEventMsgpack } from '@vantage/wire/test/encode';
import { spawnIndexer, type IndexerChild } from './helpers';

const BS = 16;
const W1 = 18329147160771148149n as WorkerId; // above 2^63: exact from the card's JSON number
const W2 = 9007199254740993n as WorkerId; // 2^53 + 1: a JS number would round it
const W3 = 77n as WorkerId;
const P1 = 5297450100681880n; // W1's kv-events publisher (v1/event_sources)
const P2 = 7745431287137597n; // W2 rank 1's

describe('indexer: Dynamo 1.6.1 wire and file discovery, faults injected', () => {
  const ns = uniqueName('dd').replace(/-/g, '');
  const pool = `${ns}_pool`;
  const dir = join(INFRA_DIR, 'test', `${ns}-kv`);
  const prefix = endpointSubjectPrefix(ns, 'backend', 'generate');
  let nc: NatsConnection;
  let indexer: IndexerChild;
  let seq = 0n;
  let w1Event = 0n;
  const envelope = (topic: string, publisherId: bigint, payload: Uint8Array): Uint8Array =>
    encodeEnvelope({ topic, publisherId, sequence: seq++, publishedAtMs: BigInt(Date.now()), payload });

  const put = (key: string, doc: unknown): void => {
    const path = keyToFilePath(dir, key);
    mkdirSync(join(path, '..'), { recursive: true });
    // Bare JSON numbers for u64s, as Dynamo writes them.
    writeFileSync(path, JSON.stringify(doc, (_k, v: unknown) => (typeof v === 'bigint' ? `@@${v}@@` : v)).replace(/"@@(\d+)@@"/g, '$1'));
  };
  const card = (id: bigint, o: { blockSize?: number; dpSize?: number; totalKvBlocks?: number } = {}): void => {
    put(`v1/mdc/${ns}/backend/generate/${id.toString(16)}`, {
      type: 'Model',
      namespace: ns,
      component: 'backend',
      endpoint: 'generate',
      instance_id: id,
      card_json: {
        display_name: 'mock',
        kv_cache_block_size: o.blockSize ?? BS,
        runtime_config: { total_kv_blocks: o.totalKvBlocks ?? 512, max_num_seqs: 64, max_num_batched_tokens: 2048, data_parallel_start_rank: 0, data_parallel_size: o.dpSize ?? 1, enable_local_indexer: true },
      },
    });
    put(`v1/instances/${ns}/backend/generate/${id.toString(16)}`, {
      type: 'Endpoint',
      namespace: ns,
      component: 'backend',
      endpoint: 'generate',
      instance_id: id,
      transport: { tcp: `127.0.0.1:1/${id.toString(16)}/${ns}/backend/generate` },
      request_plane_codec: 'msgpack',
    });
  };
  const scope = { kind: 'endpoint', endpoint: { namespace: ns, component: 'backend', name: 'generate' } };
  const channel = (topic: string, publisher: bigint, subjectPrefix: string): void =>
    put(`v1/event_channels/namespace/${ns}/component/backend/endpoint/generate/topic/${topic}/${publisher.toString(16)}`, {
      type: 'EventChannel',
      scope,
      topic,
      instance_id: publisher,
      transport: { kind: 'Nats', config: { subject_prefix: subjectPrefix } },
    });
  const source = (publisher: bigint, worker: bigint, dpRank: number): void =>
    put(`v1/event_sources/namespace/${ns}/component/backend/endpoint/generate/topic/kv-events/${publisher.toString(16)}`, {
      type: 'EventSource',
      scope,
      topic: 'kv-events',
      publisher_id: publisher,
      metadata: { worker: { worker_id: worker, dp_rank: dpRank }, publisher_id: publisher, recovery_target: null },
    });

  const tokens = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + seed * 104_729) % 30_000));
  const stored = (worker: WorkerId, dpRank: number, eventId: bigint, toks: number[], from: number, to: number): KvEvent => {
    const local = localBlockHashes(Uint32Array.from(toks), BS, null);
    const seqs = sequenceHashes(local);
    return {
      workerId: worker,
      dpRank,
      storageTier: 'device',
      eventId,
      data: { kind: 'stored', parentHash: from === 0 ? null : (seqs[from - 1]! as ExternalHash), startPosition: null, blockHashes: seqs.slice(from, to), tokensHashes: local.slice(from, to) },
    };
  };
  const publishBatch = (subject: string, publisherId: bigint, events: KvEvent[]): void =>
    nc.publish(subject, encodeEventPlaneMessage({ publisherId, sequence: seq++, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_events', events }));

  const observeTokens = async (toks: number[]): Promise<ObserveReply> => {
    const m = await nc.request(
      observeSubject(pool),
      observeRequestCodec.encode({ requestId: null, prompt: { kind: 'token_ids', tokenIds: Uint32Array.from(toks), loraName: null }, promptTokens: toks.length, replyEncoding: 'json' }),
      { timeout: 5_000 },
    );
    const r = observeReplyCodec.decode(m.data);
    if (!r.ok) throw new Error(r.reason);
    return r.value;
  };
  const row = (r: ObserveReply, w: bigint, dp = 0) => r.workers.find((x) => x.workerId === w && x.dpRank === dp);

  beforeAll(async () => {
    mkdirSync(dir, { recursive: true });
    card(W1);
    card(W2, { dpSize: 2 });
    channel('kv-events', P1, prefix);
    source(P1, W1, 0);
    source(P2, W2, 1);
    nc = await connect({ servers: natsUrl() });
    indexer = await spawnIndexer({
      natsUrl: natsUrl(),
      // Only the namespace and the discovery directory; block size 16 comes from the cards (the default is 64).
      pools: [{ name: pool, namespace: ns, discovery: { backend: 'file', dir, pollMs: 30 } }],
      // A short TTL: a worker listed in discovery must still never expire.
      env: { VANTAGE_INDEXER_WORKER_TTL_MS: '1000' },
    });
  });

  afterAll(async () => {
    await indexer?.stop();
    await nc?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists discovered workers and ranks with their cards, before they publish anything', async () => {
    const r = await observeTokens(tokens(40, 1));
    expect(r.blockSize).toBe(BS);
    expect(r.workers.map((w) => [w.workerId, w.dpRank])).toEqual([
      [W2, 0],
      [W2, 1],
      [W1, 0],
    ]);
    for (const w of r.workers) {
      expect(w).toMatchObject({ schedulable: true, maxNumBatchedTokens: 2048, totalKvBlocks: 512, P: 0 });
    }
  });

  it('keeps a load report that arrives before any KV event; applies batches; checks publishers', async () => {
    const load = encodeActiveLoad({ workerId: W1, dpRank: 0, activeDecodeBlocks: null, activePrefillTokens: null, schedulerLoadScope: null, kvUsedBlocks: 7 }, { generation: 'kv_used_blocks' });
    nc.publish(prefixedSubject(prefix, 'kv_metrics'), envelope('kv_metrics', 812271302725067n, load));
    const t = tokens(80, 2); // 5 blocks
    publishBatch(prefixedSubject(prefix, 'kv-events'), P1, [stored(W1, 0, ++w1Event, t, 0, 3), stored(W1, 0, ++w1Event, t, 3, 5)]);
    // Rank 1 of W2 through its own publisher.
    publishBatch(prefixedSubject(prefix, 'kv-events'), P2, [stored(W2, 1, 1n, t, 0, 2)]);
    await eventually('both applied', async () => {
      const r = await observeTokens(t);
      return row(r, W1)?.deviceOverlapBlocks === 5 && row(r, W2, 1)?.deviceOverlapBlocks === 2;
    });
    const r = await observeTokens(t);
    expect(row(r, W1)?.reported).toEqual({ activeDecodeBlocks: null, activePrefillTokens: null, kvUsedBlocks: 7 });
    expect(await indexer.metric('vantage_indexer_events_applied_total', { pool, kind: 'load_foreign_ignored' })).toBe(0);

    // W1's publisher claiming W2's blocks: refused whole, nothing of it applied.
    const t2 = tokens(48, 3);
    publishBatch(prefixedSubject(prefix, 'kv-events'), P1, [stored(W2, 0, 1n, t2, 0, 3)]);
    // A batch whose second event is malformed: refused whole (the first event is not applied either).
    const good = encodeRouterEventMsgpack(stored(W2, 0, 1n, t2, 0, 1));
    // msgpack by hand: fixarray(2) [ good event, fixmap(1) { "worker_id": "not-an-id" } ]
    const str9 = (x: string): number[] => [0xa9, ...Buffer.from(x)];
    const batch = Uint8Array.from([0x92, ...good, 0x81, ...str9('worker_id'), ...str9('not-an-id')]);
    nc.publish(prefixedSubject(prefix, 'kv-events'), envelope('kv-events', 99n, batch));
    await eventually('both refused', async () => (await indexer.metric('vantage_indexer_messages_rejected_total', { pool, source: 'kv_events' })) === 2);
    expect(await indexer.metric('vantage_indexer_messages_rejected_total', { pool, reason: 'publisher_mismatch' })).toBe(1);
    expect(await indexer.metric('vantage_indexer_messages_rejected_total', { pool, reason: 'wrong_type' })).toBe(1);
    expect(row(await observeTokens(t2), W2)?.deviceOverlapBlocks).toBe(0);
    // The rejection was logged with its reason.
    await indexer.waitLog((l) => l['msg'] === 'message rejected' && l['reason'] === 'publisher_mismatch');
  });

  it('forward-pass metrics show in the answer; a listed worker never expires for being quiet', async () => {
    const fp: ForwardPassMetrics = {
      version: 1,
      workerId: W2,
      dpRank: 1,
      counterId: 3n,
      wallTime: 0.004,
      scheduled: { prefillRequests: 1, prefillTokens: 500, prefillLengthVariance: 0, prefillKvTokens: 0, decodeRequests: 2, decodeKvTokens: 300, decodeKvTokensVariance: 1 },
      queued: { prefillRequests: 4, prefillTokens: 2000, prefillLengthVariance: 3, prefillKvTokens: 0, decodeRequests: 0, decodeKvTokens: 0, decodeKvTokensVariance: 0 },
    };
    nc.publish(prefixedSubject(prefix, 'forward-pass-metrics'), encodeEventPlaneMessage({ publisherId: 5n, sequence: 0n, publishedAtMs: 1n }, { kind: 'forward_pass', metrics: fp }));
    await eventually('forward pass seen', async () => row(await observeTokens([1, 2]), W2, 1)?.forwardPass != null);
    expect(row(await observeTokens([1, 2]), W2, 1)?.forwardPass).toMatchObject({ scheduledRequests: 3, scheduledPrefillTokens: 500, scheduledDecodeKvTokens: 300, queuedRequests: 4, queuedPrefillTokens: 2000, wallTimeS: 0.004 });
    await new Promise((r) => setTimeout(r, 1_800)); // beyond the 1000 ms worker TTL, with housekeeping every 100 ms
    const r = await observeTokens([1, 2]);
    expect(r.workers.map((w) => w.workerId)).toEqual(expect.arrayContaining([W1, W2]));
    expect(row(r, W1)).toBeDefined();
  });

  it('learns a subject prefix from discovery and applies events published under it', async () => {
    const custom = `custom.${ns}.events`;
    channel('kv-events', 123n, custom);
    const t = tokens(32, 4);
    await eventually(
      'events on the discovered prefix applied',
      async () => {
        publishBatch(prefixedSubject(custom, 'kv-events'), 123n, [stored(W1, 0, ++w1Event, t, 0, 2)]);
        return row(await observeTokens(t), W1)?.deviceOverlapBlocks === 2;
      },
      10_000,
      200,
    );
  });

  it('a broken card keeps the last good one; a deleted card removes the worker; new workers join; a card of another block size is refused', async () => {
    writeFileSync(keyToFilePath(dir, `v1/mdc/${ns}/backend/generate/${W1.toString(16)}`), '{"type":"Model","namespace":');
    await eventually('the broken card counted', async () => (await indexer.metric('vantage_indexer_messages_rejected_total', { pool, source: 'discovery' })) >= 1, 10_000);
    expect(row(await observeTokens([1]), W1)).toBeDefined();

    unlinkSync(keyToFilePath(dir, `v1/mdc/${ns}/backend/generate/${W2.toString(16)}`));
    await eventually('W2 left', async () => (await observeTokens([1])).workers.every((w) => w.workerId !== W2));

    card(W3);
    await eventually('W3 joined', async () => row(await observeTokens([1]), W3)?.maxNumBatchedTokens === 2048);

    card(55n, { blockSize: 64 });
    await eventually('the mismatched card refused', async () => (await indexer.metric('vantage_indexer_messages_rejected_total', { pool, reason: 'block_size_mismatch' })) === 1);
    expect(row(await observeTokens([1]), 55n)).toBeUndefined();
    // W1, W3 and the refused one are what discovery lists (the gauge follows at housekeeping).
    await eventually('the discovery gauge', async () => (await indexer.metric('vantage_indexer_discovery_workers', { pool })) === 3);
  });
});
