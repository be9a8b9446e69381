/**
 * Hostile publishers through a real nats-server against the indexer as its own process: the
 * `dpSize` 4294967295 registration, 100,000 random worker ids, 100,000 bookings that are never
 * released, and oversized and deeply nested messages on every subscribed subject. Throughout, the
 * service answers observe within the usual time, its memory levels off under its limits, its
 * counters account for every message (received = accepted + rejected + dropped; accepted messages
 * refused by a limit counted per limit), and its answers for the well-behaved workers equal a
 * reference fed only their traffic.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { bookingsSubject, lifecycleSubject, observeSubject, workersSubject } from '@vantage/protocol';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { activeSequencesSubject, encodeEventPlaneMessage, kvEventsSubject, kvMetricsSubject } from '@vantage/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventGen, RefModel, diffReply, encodeBooking, kvPublisher, makeDocs, observe, publishBooking, publishRegistration, rng, spawnIndexer, sumMetric, type IndexerChild } from './helpers';

const BS = 16;
const FLOOD = 100_000;
const te = new TextEncoder();

describe('indexer: hostile publishers', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const pool = uniqueName('hostile').replace(/-/g, '_');
  const ns = pool;

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({
      natsUrl: natsUrl(),
      pools: [{ name: pool, blockSize: BS, namespace: ns }],
      // Hostile workers must not expire during the test (the limits, not the TTL, bound them here).
      env: { VANTAGE_INDEXER_WORKER_TTL_MS: '600000', VANTAGE_LOG_LEVEL: 'info' },
    });
  });
  afterAll(async () => {
    await child?.stop();
    await nc?.close();
  });

  it('keeps answering, bounded, with every message accounted for and good answers unchanged', { timeout: 240_000 }, async () => {
    const ref = new RefModel(BS);
    const cap = { totalKvBlocks: 4096, maxNumBatchedTokens: 2048, maxNumSeqs: 64, dpStartRank: 0, schedulable: true };
    const good = [{ id: 21n, dp: 2 }, { id: 22n, dp: 1 }];
    for (const g of good) {
      publishRegistration(nc, pool, BS, g.id, { ...cap, dpSize: g.dp });
      ref.register(g.id, { ...cap, dpSize: g.dp });
    }
    const docs = makeDocs(3, BS, 2, 3, 4, 6);
    const pubs = [{ workerId: 21n as WorkerId, dpRank: 0 }, { workerId: 21n as WorkerId, dpRank: 1 }, { workerId: 22n as WorkerId, dpRank: 0 }];
    const publish = kvPublisher(nc, 'event_plane', ns, 'backend');
    for (const e of new EventGen(5, docs, pubs).events(120)) {
      await publish(e);
      ref.apply(e);
    }
    const goodBookings = [0, 1, 2].map((i) => ({ requestId: `good-${i}`, workerId: 21n, dpRank: i % 2, promptTokens: 64, overlapBlocks: 1, sequenceHashes: docs[i]!.sequence.subarray(0, 3) }));
    for (const b of goodBookings) {
      publishBooking(nc, pool, b);
      ref.book(b);
    }
    await nc.flush();

    const check = async (phase: string): Promise<number> => {
      let worst = 0;
      let diffs: string[] = [];
      for (const d of docs) {
        const t0 = performance.now();
        const reply = await observe(nc, pool, d.local, d.tokens.length, 2_000);
        worst = Math.max(worst, performance.now() - t0);
        const mine = { ...reply, workers: reply.workers.filter((w) => good.some((g) => g.id === BigInt(w.workerId))) };
        // Dynamo's choice may name an unregistered hostile publisher (its KV events are its own): only the good workers' facts are compared.
        diffs.push(...diffReply(mine, ref.expect(d.local, d.tokens.length), BS).filter((x) => !x.startsWith('dynamoChoice')));
      }
      expect(diffs, phase).toEqual([]);
      return worst;
    };
    await eventually('good traffic applied', async () => (await child.metric('vantage_indexer_messages_accepted_total', { pool })) >= 2 + 120 + 3, 10_000);
    await check('before the flood');

    const received = async (): Promise<number> => child.metric('vantage_indexer_messages_received_total', { pool });
    let sent = 2 + 120 + 3;
    const latencies: number[] = [];
    /** Publishes in chunks, waiting for the service to take each (no slow-consumer loss), observing between chunks. */
    const flood = async (n: number, make: (i: number) => [string, Uint8Array]): Promise<void> => {
      for (let i = 0; i < n; ) {
        const end = Math.min(n, i + 5_000);
        for (; i < end; i++) nc.publish(...make(i));
        sent += end - (end - (end % 5_000 || 5_000));
        await nc.flush();
        const target = sent;
        await eventually('flood chunk received', async () => (await received()) >= target, 30_000, 50);
        const t0 = performance.now();
        await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length, 2_000);
        latencies.push(performance.now() - t0);
      }
    };

    // 1. The wedge: dpSize 4294967295.
    publishRegistration(nc, pool, BS, 66n, { ...cap, dpSize: 4294967295 });
    sent++;

    // 2. Random worker ids (KV events), 3. bookings never released; then as much again of both past the
    // limits (all refused), to see memory level off.
    const r = rng(99);
    const randomId = (): bigint => (BigInt(Math.floor(r.next() * 2 ** 32)) << 32n) | BigInt(Math.floor(r.next() * 2 ** 32)) | 1n << 40n;
    const kvSubject = kvEventsSubject(ns, 'backend');
    const kvEvent = (): [string, Uint8Array] => {
      const w = randomId();
      const ev: KvEvent = { workerId: w as WorkerId, dpRank: 0, storageTier: 'device', eventId: 1n, data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: BigUint64Array.of(w), tokensHashes: BigUint64Array.of(w ^ 7n) } };
      return [kvSubject, encodeEventPlaneMessage({ publisherId: w, sequence: 0n, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event: ev })];
    };
    const hostileBooking = (i: number): [string, Uint8Array] => [
      bookingsSubject(pool),
      encodeBooking(pool, { requestId: `evil-${i}`, workerId: randomId(), dpRank: i % 4, promptTokens: 4096, overlapBlocks: 0, sequenceHashes: BigUint64Array.of(BigInt(i) + 1n, BigInt(i) + 2n) }),
    ];
    const rss: number[] = [];
    const EXTRA = 20_000;
    await flood(FLOOD, () => kvEvent());
    await flood(FLOOD, (i) => hostileBooking(i));
    // Let housekeeping run and the collector settle before reading memory.
    await new Promise((res) => setTimeout(res, 1_500));
    rss.push(await child.metric('process_resident_memory_bytes'));
    await flood(EXTRA, () => kvEvent());
    await flood(EXTRA, (i) => hostileBooking(FLOOD + i));
    await new Promise((res) => setTimeout(res, 1_500));
    rss.push(await child.metric('process_resident_memory_bytes'));

    // 4. Oversized and deeply nested messages on every subscribed subject.
    const huge = te.encode(`{"v":1,"requestId":"${'x'.repeat(900_000)}"}`);
    const nestedJson = te.encode('['.repeat(200_000) + ']'.repeat(200_000));
    const nestedObj = te.encode('{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000));
    const nestedMsgpack = new Uint8Array(200_001).fill(0x91);
    nestedMsgpack[200_000] = 0xc0;
    const bigMsgpack = new Uint8Array(900_005);
    bigMsgpack.set([0xc6, 0x00, 0x0d, 0xbb, 0xa0]); // bin32 of 900,000 bytes
    const subjects = [kvSubject, kvMetricsSubject(ns), activeSequencesSubject(ns, 'backend'), bookingsSubject(pool), lifecycleSubject(pool), workersSubject(pool)];
    const bad = [huge, nestedJson, nestedObj, nestedMsgpack, bigMsgpack];
    for (const s of subjects) {
      for (const b of bad) nc.publish(s, b);
      await nc.flush();
    }
    sent += subjects.length * bad.length;
    // The observe endpoint itself: an error reply for each, never silence.
    for (const b of bad) {
      const m = await nc.request(observeSubject(pool), b, { timeout: 5_000 });
      expect(m.headers?.get('Vantage-Error-Code')).toBe('BAD_REQUEST');
    }
    const target = sent;
    await eventually('everything received', async () => (await received()) >= target, 30_000, 100);
    await eventually('writer idle', async () => (await child.metric('vantage_indexer_queue_depth', { pool })) === 0, 10_000, 100);
    await new Promise((res) => setTimeout(res, 300));

    const worstAfter = await check('after the flood');
    const text = await child.metricsText();
    const m = (name: string, labels: Record<string, string> = {}): number => sumMetric(text, name, { pool, ...labels });
    const rec = m('vantage_indexer_messages_received_total');
    const acc = m('vantage_indexer_messages_accepted_total');
    const rej = m('vantage_indexer_messages_rejected_total');
    const drop = m('vantage_indexer_messages_dropped_total');
    const hit = (limit: string): number => m('vantage_indexer_limit_hits_total', { limit });
    console.log(
      `[hostile] received ${rec} (sent ${sent}), accepted ${acc}, rejected ${rej}, dropped ${drop}; limit hits: dp_ranks_per_worker ${hit('dp_ranks_per_worker')}, workers_per_pool ${hit('workers_per_pool')}, ranks_per_pool ${hit('ranks_per_pool')}, bookings_per_pool ${hit('bookings_per_pool')}, bookings_per_rank ${hit('bookings_per_rank')}; ` +
        `workers ${m('vantage_indexer_workers')}, bookings ${m('vantage_indexer_bookings')}; RSS after the flood and after ${2 * EXTRA} more ${rss.map((x) => Math.round(x / 2 ** 20)).join(', ')} MiB; observe during the flood max ${Math.max(...latencies).toFixed(1)} ms (${latencies.length} probes), after ${worstAfter.toFixed(1)} ms; log lines 'message rejected'/'refused' ${child.lines.filter((l) => l['msg'] === 'message rejected' || l['msg'] === 'message refused').length}`,
    );
    expect(rec).toBe(sent);
    expect(rec).toBe(acc + rej + drop);
    expect(drop).toBe(0);
    // Each oversized or nested message is rejected at decode.
    expect(rej).toBe(subjects.length * bad.length);
    // The limits: the dpSize registration; ranks past 1,024 (3 good + 1,021 hostile admitted; workers, 1,024, are
    // not reached first); bookings past 65,536.
    expect(hit('dp_ranks_per_worker')).toBe(1);
    expect(hit('ranks_per_pool')).toBe(FLOOD + EXTRA - (1024 - 3));
    expect(hit('workers_per_pool')).toBe(0);
    expect(hit('bookings_per_pool')).toBe(FLOOD + EXTRA - (65_536 - goodBookings.length));
    expect(m('vantage_indexer_bookings')).toBe(65_536);
    // Accepted messages are applied or refused by a limit, nothing else.
    const applied = m('vantage_indexer_events_applied_total');
    const hits = m('vantage_indexer_limit_hits_total');
    expect(applied + hits).toBe(acc);
    // Memory levels off: the extra flood (all refused) adds little.
    expect(rss[1]!).toBeLessThan(rss[0]! * 1.1 + 32 * 2 ** 20);
    expect(Math.max(...latencies)).toBeLessThan(1_000);
    expect(child.proc.exitCode).toBeNull();
    // Rate-limited: a few lines per (source, reason), not one per message.
    expect(child.lines.filter((l) => l['msg'] === 'message rejected' || l['msg'] === 'message refused').length).toBeLessThan(200);
  });
});
