/**
 * Booked work and the pool's membership over real NATS: leaked bookings expire
 * and are counted, Dynamo routers' replica-sync events show in R and P, worker
 * registration and deregistration, load reports in every accepted form, and
 * NATS service discovery.
 */
import { connect, createInbox, type NatsConnection } from '@nats-io/transport-node';
import { bookingsSubject, observeSubject } from '@vantage/protocol';
import { natsUrl, uniqueName, eventually } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { activeSequencesSubject, kvMetricsSubject, type ActiveSequenceEvent } from '@vantage/wire';
import { encodeActiveLoad, encodeActiveSequenceEvent, encodeEventPlaneMessage } from '@vantage/wire/test/encode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EventGen,
  encodeBooking,
  kvPublisher,
  makeDocs,
  observe,
  publishDeregistration,
  publishRegistration,
  spawnIndexer,
  type Capacity,
  type IndexerChild,
} from './helpers';

const BS = 16;
const CAP: Capacity = { totalKvBlocks: 1000, maxNumBatchedTokens: 1000, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true };
const PROMPT = BigUint64Array.of(101n, 102n, 103n, 104n);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('indexer: bookings, router sync, registrations, load, discovery', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('bk').replace(/-/g, '_');
  // Long enough that all 10,000 are live together even on a loaded machine.
  const TTL = 6_000;

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({
      natsUrl: natsUrl(),
      pools: [{ name: pool, blockSize: BS, namespace: pool }],
      env: { VANTAGE_INDEXER_BOOKING_TTL_MS: String(TTL), VANTAGE_INDEXER_HOUSEKEEPING_MS: '100' },
    });
  });
  afterAll(async () => {
    expect(await child?.stop()).toBe(0);
    await nc?.close();
  });

  const sumOver = async (f: (w: { R: number; P: number | null; trackedPrefillTokens: number }) => number): Promise<number> =>
    (await observe(nc, pool, PROMPT, PROMPT.length * BS)).workers.reduce((a, w) => a + f(w), 0);

  it('10,000 bookings whose lifecycle never arrives expire, are counted as leaks, and R and P return to zero', async () => {
    const workers = [1001n, 1002n];
    for (const w of workers) publishRegistration(nc, pool, BS, w, CAP);
    const N = 10_000;
    const t0 = Date.now();
    for (let i = 0; i < N; i++) {
      nc.publish(
        bookingsSubject(pool),
        encodeBooking(pool, {
          requestId: `leak-${i}`,
          workerId: workers[i % 2]!,
          dpRank: 0,
          promptTokens: 64,
          overlapBlocks: 1,
          sequenceHashes: BigUint64Array.of(BigInt(i) * 4n + 1n, BigInt(i) * 4n + 2n),
        }),
      );
      if (i % 1000 === 999) await nc.flush();
    }
    await nc.flush();
    await eventually('all bookings live', async () => (await sumOver((w) => w.R)) === N, 10_000, 50).catch(async (e: unknown) => {
      const t = await child.metricsText();
      throw new Error(`${String(e)}; R=${await sumOver((w) => w.R)}\n${t.split('\n').filter((l) => l.includes(pool)).join('\n')}`);
    });
    expect(Date.now() - t0).toBeLessThan(TTL); // R was seen whole before any could expire
    const peak = await observe(nc, pool, PROMPT, PROMPT.length * BS);
    for (const w of peak.workers) {
      expect(w.R).toBe(N / 2);
      expect(w.trackedPrefillTokens).toBe((N / 2) * (64 - BS));
      expect(w.P).toBeCloseTo(((N / 2) * (64 - BS)) / CAP.maxNumBatchedTokens, 9);
      expect(w.activeBlocks).toBe(N); // 2 distinct blocks per booking
    }
    expect(await child.metric('vantage_indexer_booking_leaks_total', { pool })).toBe(0);

    await eventually('every booking expired as a leak', async () => (await child.metric('vantage_indexer_booking_leaks_total', { pool })) === N, TTL + 10_000, 100);
    const after = await observe(nc, pool, PROMPT, PROMPT.length * BS);
    for (const w of after.workers) {
      expect([w.R, w.P, w.trackedPrefillTokens, w.activeBlocks]).toEqual([0, 0, 0, 0]);
    }
    await eventually('bookings gauge at zero', async () => (await child.metric('vantage_indexer_bookings', { pool })) === 0);
    await sleep(300);
    expect(await child.metric('vantage_indexer_booking_leaks_total', { pool })).toBe(N); // counted exactly once
    for (const w of workers) publishDeregistration(nc, pool, w);
    await nc.flush();
    await eventually('deregistered', async () => (await observe(nc, pool, PROMPT, 64)).workers.length === 0);
  });

  it("Dynamo routers' replica-sync events (enveloped and bare) show up in R and P", async () => {
    const w = 2001n as WorkerId;
    publishRegistration(nc, pool, BS, w, CAP);
    const subject = activeSequencesSubject(pool, 'backend');
    const add = (requestId: string, prefill: number): ActiveSequenceEvent => ({
      requestId,
      workerId: w,
      dpRank: 0,
      routerId: 77n,
      loraName: null,
      data: {
        kind: 'add_request',
        tokenSequence: BigUint64Array.of(BigInt(prefill), BigInt(prefill) + 1n),
        trackPrefillTokens: true,
        expectedOutputTokens: 10,
        prefillLoadHint: { initialEffectivePrefillTokens: prefill, expectedPrefillDuration: null },
      },
    });
    let seq = 0n;
    const env = (events: ActiveSequenceEvent[]): Uint8Array =>
      encodeEventPlaneMessage({ publisherId: 9n, sequence: seq++, publishedAtMs: BigInt(Date.now()) }, { kind: 'active_sequences', events });
    nc.publish(subject, env([add('d1', 300)])); // event-plane envelope, batch of one
    nc.publish(subject, encodeActiveSequenceEvent(add('d2', 200))); // bare msgpack (older releases)
    await nc.flush();
    const mine = async (): Promise<{ R: number; P: number | null; trackedPrefillTokens: number }> => {
      const r = await observe(nc, pool, PROMPT, PROMPT.length * BS);
      return r.workers.find((x) => x.workerId === w) ?? { R: -1, P: null, trackedPrefillTokens: -1 };
    };
    await eventually('both router bookings counted', async () => (await mine()).R === 2);
    expect(await mine()).toMatchObject({ R: 2, trackedPrefillTokens: 500, P: 0.5 });

    const mark: ActiveSequenceEvent = { ...add('d1', 0), data: { kind: 'mark_prefill_completed' } };
    nc.publish(subject, env([mark]));
    await eventually('prefill of d1 complete', async () => (await mine()).trackedPrefillTokens === 200);
    expect(await mine()).toMatchObject({ R: 2, P: 0.2 });

    nc.publish(subject, env([{ ...add('d1', 0), data: { kind: 'free' } }, { ...add('d2', 0), data: { kind: 'free' } }]));
    await eventually('both freed', async () => (await mine()).R === 0);
    expect(await mine()).toMatchObject({ R: 0, P: 0, trackedPrefillTokens: 0 });
    expect(await child.metric('vantage_indexer_events_applied_total', { pool, kind: 'dynamo_sequence' })).toBe(5);
    publishDeregistration(nc, pool, w);
  });

  it('worker registration and deregistration via vantage.v1.workers.{pool}', async () => {
    const a = 3001n;
    const b = 18_446_744_073_709_551_000n; // above 2^63
    publishRegistration(nc, pool, BS, a, { ...CAP, dpSize: 2, totalKvBlocks: 777 });
    publishRegistration(nc, pool, BS, b, { ...CAP, schedulable: false });
    // Worker a also holds the prompt in its cache.
    const docs = makeDocs(5, BS, 1, 1, 2, 2);
    const gen = new EventGen(6, docs, [{ workerId: a as WorkerId, dpRank: 1 }]);
    await kvPublisher(nc, 'event_plane', pool, 'backend')(gen.store({ workerId: a as WorkerId, dpRank: 1 }, docs[0]!, 'device', 4)!);
    await nc.flush();
    const doc = docs[0]!;
    const mine = <T extends { workerId: bigint }>(ws: readonly T[]): T[] => ws.filter((x) => x.workerId === a || x.workerId === b);
    const keys = async (): Promise<string[]> => mine((await observe(nc, pool, doc.local, doc.tokens.length)).workers).map((x) => `${x.workerId}:${x.dpRank}`);
    await eventually('registered', async () => (await keys()).length === 3);
    const r = await observe(nc, pool, doc.local, doc.tokens.length);
    expect(mine(r.workers).map((x) => [String(x.workerId), x.dpRank, x.schedulable, x.totalKvBlocks, x.K])).toEqual([
      ['3001', 0, true, 777, 0],
      ['3001', 1, true, 777, 4 * BS],
      [String(b), 0, false, 1000, 0],
    ]);
    expect(r.dynamoChoice).toMatchObject({ workerId: a, dpRank: 1 }); // b is not schedulable, a:1 holds the prefix

    publishDeregistration(nc, pool, a);
    await nc.flush();
    await eventually('a removed', async () => (await keys()).join() === `${b}:0`);
    const after = await observe(nc, pool, doc.local, doc.tokens.length);
    // b may never be chosen; when it is the only worker left there is no choice at all.
    expect(after.dynamoChoice?.workerId).not.toBe(b);
    if (after.workers.length === 1) expect(after.dynamoChoice).toBeNull();
    expect(await child.metric('vantage_indexer_events_applied_total', { pool, kind: 'deregister' })).toBeGreaterThanOrEqual(1);
    publishDeregistration(nc, pool, b);
    await nc.flush();
    await eventually('b removed', async () => (await keys()).length === 0);
  });

  it('load reports: event-plane envelope, bare msgpack and bare JSON ActiveLoad; other pools\' workers ignored', async () => {
    const subject = kvMetricsSubject(pool);
    const load = (w: bigint, used: number) => ({ workerId: w as WorkerId, dpRank: 0, activeDecodeBlocks: null, activePrefillTokens: null, schedulerLoadScope: null, kvUsedBlocks: used });
    // kv_metrics is namespace-wide: only this pool's workers (registered here) count.
    const cap = { totalKvBlocks: 1000, maxNumBatchedTokens: 8192, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true };
    for (const w of [4001n, 4002n, 4003n]) publishRegistration(nc, pool, BS, w, cap);
    await nc.flush();
    nc.publish(subject, encodeActiveLoad(load(4999n, 99))); // a worker of another pool
    nc.publish(subject, encodeEventPlaneMessage({ publisherId: 3n, sequence: 0n, publishedAtMs: BigInt(Date.now()) }, { kind: 'active_load', load: load(4001n, 11) }));
    nc.publish(subject, encodeActiveLoad(load(4002n, 22)));
    nc.publish(subject, encodeActiveLoad(load(4003n, 33), { format: 'json' }));
    await nc.flush();
    const reported = async (): Promise<Record<string, number | null>> => {
      const r = await observe(nc, pool, PROMPT, 64);
      return Object.fromEntries(r.workers.filter((w) => w.reported !== null).map((w) => [String(w.workerId), w.reported!.kvUsedBlocks]));
    };
    await eventually('three load reports applied', async () => Object.keys(await reported()).length >= 3, 5_000).catch(() => undefined);
    expect(await reported()).toEqual({ '4001': 11, '4002': 22, '4003': 33 });
    expect(await child.metric('vantage_indexer_messages_rejected_total', { pool, source: 'kv_metrics' })).toBe(0);
    expect(await child.metric('vantage_indexer_events_applied_total', { pool, kind: 'load_foreign_ignored' })).toBe(1);
    for (const w of [4001n, 4002n, 4003n]) publishDeregistration(nc, pool, w);
  });

  it('answers NATS service discovery: $SRV.PING, $SRV.INFO and $SRV.STATS for vantage-indexer', async () => {
    for (let i = 0; i < 3; i++) await observe(nc, pool, PROMPT, 64);
    // Other indexers may share the broker: keep the one serving this pool.
    const collect = async (subject: string): Promise<Record<string, unknown>[]> => {
      const inbox = createInbox();
      const got: Record<string, unknown>[] = [];
      const sub = nc.subscribe(inbox, { callback: (_e, m) => void got.push(m.json<Record<string, unknown>>()) });
      nc.publish(subject, new Uint8Array(0), { reply: inbox });
      await sleep(500);
      sub.unsubscribe();
      return got;
    };
    const pings = (await collect('$SRV.PING.vantage-indexer')).filter((p) => (p['metadata'] as Record<string, string>)['pools']?.split(',').includes(pool));
    expect(pings).toHaveLength(1);
    const ping = pings[0]!;
    expect(ping).toMatchObject({ name: 'vantage-indexer', type: 'io.nats.micro.v1.ping_response', version: '0.1.0' });
    const id = String(ping['id']);

    const info = (await nc.request(`$SRV.INFO.vantage-indexer.${id}`, new Uint8Array(0), { timeout: 2_000 })).json<Record<string, unknown>>();
    expect(info['type']).toBe('io.nats.micro.v1.info_response');
    const endpoints = info['endpoints'] as { name: string; subject: string; queue_group: string; metadata: Record<string, string> }[];
    expect(endpoints).toEqual([
      expect.objectContaining({ name: `observe-${pool}`, subject: observeSubject(pool), queue_group: `vantage-indexer-${pool}`, metadata: { pool, blockSize: String(BS) } }),
    ]);

    const stats = (await nc.request(`$SRV.STATS.vantage-indexer.${id}`, new Uint8Array(0), { timeout: 2_000 })).json<Record<string, unknown>>();
    expect(stats['type']).toBe('io.nats.micro.v1.stats_response');
    const ep = (stats['endpoints'] as { name: string; num_requests: number; num_errors: number }[])[0]!;
    expect(ep.name).toBe(`observe-${pool}`);
    expect(ep.num_requests).toBeGreaterThanOrEqual(3);
  });
});
