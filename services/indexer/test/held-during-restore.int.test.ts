/**
 * `indexer.limits.heldDuringRestore` over real NATS: messages that arrive while a pool restores its
 * snapshot are held, in order, up to the cap; past it each is refused, counted once in
 * `vantage_indexer_limit_hits_total{limit="held_during_restore"}` and in the dropped counter. The
 * cap here (64) is above the writer queue's depth (16), so releasing the held messages has to wait
 * for room: none of them may be lost on the way. The restore is made slow by a large snapshot
 * (hundreds of thousands of blocks written by a first indexer), and the flood of bookings is sent
 * the moment the restarted indexer asks JetStream for its snapshot bucket.
 */
import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { sequenceHashes } from '@vantage/hashing';
import { freePort } from '@vantage/infra';
import { bookingsSubject } from '@vantage/protocol';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { afterAll, describe, expect, it } from 'vitest';
import { RefModel, diffReply, encodeBooking, kvPublisher, observe, publishRegistration, spawnIndexer, type Booking, type Capacity } from './helpers';

const BS = 16;
const CAP: Capacity = { totalKvBlocks: 1_000_000, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true };
const W1 = 0xa1b2_c3d4_e5f6_0718n as WorkerId;
/** Documents of DOC_BLOCKS blocks each, one stored event per document: DOCS × DOC_BLOCKS blocks in the snapshot. */
const DOCS = 120;
const DOC_BLOCKS = 2500;
const HELD = 64;
const QUEUE = 16;
const FLOOD = 3000;

interface Doc {
  readonly local: BigUint64Array;
  readonly sequence: BigUint64Array;
}

function makeDoc(): Doc {
  const local = new BigUint64Array(randomBytes(DOC_BLOCKS * 8).buffer);
  return { local, sequence: sequenceHashes(local) };
}

function stored(doc: Doc, eventId: bigint): KvEvent {
  return {
    workerId: W1,
    dpRank: 0,
    storageTier: 'device',
    eventId,
    data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: doc.sequence, tokensHashes: doc.local },
  };
}

describe('indexer: messages held while a snapshot is restored', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it('past heldDuringRestore each message is refused and counted; every held one is applied; the index equals the reference', async () => {
    const nc: NatsConnection = await connect({ servers: natsUrl() });
    cleanups.push(() => nc.close());
    const pool = uniqueName('held').replace(/-/g, '_');
    const bucket = uniqueName('snap');
    const jsm = await jetstreamManager(nc);
    cleanups.push(async () => (await jsm.streams.delete(`OBJ_${bucket}`)) as unknown);
    const pools = [{ name: pool, blockSize: BS, namespace: pool, kvEvents: 'event_plane' as const }];
    const env = {
      VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '3600000',
      VANTAGE_INDEXER_SNAPSHOT_BUCKET: bucket,
      VANTAGE_INDEXER_BOOKING_TTL_MS: '600000',
      VANTAGE_INDEXER_WORKER_TTL_MS: '600000',
      // One refusal line per (pool, source, reason) for the whole test: the counter counts the rest.
      VANTAGE_INDEXER_REJECTION_LOG_INTERVAL_MS: '600000',
    };

    // A first indexer builds a large index and writes its snapshot when stopped.
    const first = await spawnIndexer({ natsUrl: natsUrl(), pools, env });
    cleanups.push(() => first.stop());
    const docs = Array.from({ length: DOCS }, makeDoc);
    const ref = new RefModel(BS);
    publishRegistration(nc, pool, BS, W1, CAP, 600_000);
    ref.register(W1, CAP);
    const publish = kvPublisher(nc, 'event_plane', pool, 'backend');
    for (let i = 0; i < docs.length; i++) {
      const e = stored(docs[i]!, BigInt(i + 1));
      await publish(e);
      ref.apply(e);
      if (i % 10 === 9) await nc.flush();
    }
    await nc.flush();
    await eventually('every stored event applied', async () => (await first.metric('vantage_indexer_events_applied_total', { pool, kind: 'stored' })) === DOCS, 60_000, 100);
    const probes = [docs[0]!, docs[DOCS >> 1]!, docs[DOCS - 1]!];
    const differences = async (): Promise<string[]> => {
      const out: string[] = [];
      for (const d of probes) out.push(...diffReply(await observe(nc, pool, d.local, d.local.length * BS, 10_000), ref.expect(d.local, d.local.length * BS), BS));
      return out;
    };
    expect(await differences()).toEqual([]);
    expect(await first.stop()).toBe(0);
    const snapshotBytes = (await jsm.streams.info(`OBJ_${bucket}`)).state.bytes;
    expect(snapshotBytes).toBeGreaterThan(4 * 1024 * 1024);

    // The restarted indexer: the flood goes out when it first asks for the snapshot bucket, after its subscriptions are in place.
    const flood: Booking[] = Array.from({ length: FLOOD }, (_, i) => ({
      requestId: `flood-${i}`,
      workerId: W1,
      dpRank: 0,
      promptTokens: 8 * BS,
      overlapBlocks: 2,
      sequenceHashes: docs[0]!.sequence.slice(0, 4),
    }));
    const tap = nc.subscribe('$JS.API.>');
    cleanups.push(async () => tap.unsubscribe());
    let floodSentAt = 0;
    const flooding = (async () => {
      for await (const m of tap) {
        if (!m.subject.includes(`OBJ_${bucket}`)) continue;
        for (const b of flood) nc.publish(bookingsSubject(pool), encodeBooking(pool, b));
        await nc.flush();
        floodSentAt = Date.now();
        tap.unsubscribe();
        break;
      }
    })();
    // The ops server answers from the start (unhealthy until the pools are up): polled through the restore.
    const opsPort = await freePort();
    const opsAnswers: number[] = [];
    let restoring = true;
    const polling = (async () => {
      while (restoring) {
        const r = await fetch(`http://127.0.0.1:${opsPort}/healthz`).catch(() => null);
        if (r) opsAnswers.push(r.status);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    const second = await spawnIndexer({
      natsUrl: natsUrl(),
      pools,
      env: { ...env, VANTAGE_HTTP_PORT: String(opsPort), VANTAGE_INDEXER_QUEUE_DEPTH: String(QUEUE), VANTAGE_INDEXER_LIMITS_HELD_DURING_RESTORE: String(HELD), VANTAGE_INDEXER_APPLY_BATCH: '8' },
      startTimeoutMs: 60_000,
    });
    cleanups.push(() => second.stop());
    const startedAt = Date.now();
    restoring = false;
    await polling;
    await flooding;
    expect(floodSentAt).toBeGreaterThan(0);

    // Observe answers as soon as the service is up, and within the usual time.
    const t0 = Date.now();
    await observe(nc, pool, docs[0]!.local, DOC_BLOCKS * BS, 2_000);
    const observeMs = Date.now() - t0;
    expect(observeMs).toBeLessThan(2_000);

    // Every booking is accounted for: received = accepted + dropped, none rejected.
    const m = (name: string, labels: Record<string, string> = {}): Promise<number> => second.metric(name, { pool, ...labels });
    await eventually('every booking received', async () => (await m('vantage_indexer_messages_received_total', { source: 'bookings' })) === FLOOD, 30_000, 50);
    const accepted = await m('vantage_indexer_messages_accepted_total', { source: 'bookings' });
    const dropped = await m('vantage_indexer_messages_dropped_total', { source: 'bookings' });
    const refusedAtCap = await m('vantage_indexer_limit_hits_total', { limit: 'held_during_restore' });
    expect(await m('vantage_indexer_messages_rejected_total', { source: 'bookings' })).toBe(0);
    expect(accepted + dropped).toBe(FLOOD);
    // The whole flood was at the server before the restore ended (the indexer reads its socket in order),
    // so the first HELD were held and every later one refused at the cap, each counted once.
    const restored = second.lines.find((l) => l['msg'] === 'snapshot restored; its facts carry their original ages')!;
    expect(floodSentAt).toBeLessThanOrEqual(Date.parse(String(restored['time'])));
    expect(accepted).toBe(HELD);
    expect(refusedAtCap).toBe(FLOOD - HELD);
    expect(dropped).toBe(refusedAtCap);
    // Every accepted booking was applied (none lost between the held list and the writer queue).
    await eventually('every accepted booking applied', async () => (await m('vantage_indexer_events_applied_total', { kind: 'book_booked' })) === accepted, 30_000, 50);
    expect(await m('vantage_indexer_limit_hits_total', { limit: 'held_during_restore' })).toBe(refusedAtCap);

    // The index after the restore equals the reference: the first indexer's blocks, plus the accepted bookings
    // (identical but for their request ids, so which ones were refused does not change the answer).
    for (const b of flood.slice(0, accepted)) ref.book(b);
    expect(await differences()).toEqual([]);
    const reply = await observe(nc, pool, docs[0]!.local, DOC_BLOCKS * BS);
    expect(reply.workers.find((w) => w.workerId === W1)?.R).toBe(accepted);
    expect(reply.snapshotRestoredAtMs).not.toBeNull();

    // The ops server answered during the restore (503 until started), and the refusals were logged rate-limited.
    expect(opsAnswers.length).toBeGreaterThan(0);
    expect(opsAnswers.every((s) => s === 503 || s === 200)).toBe(true);
    const refusalLines = second.lines.filter((l) => l['msg'] === 'message refused' && l['limit'] === 'held_during_restore');
    expect(refusalLines).toHaveLength(1);
    console.log(`held-during-restore: snapshot ${snapshotBytes} bytes; flood ${FLOOD}; accepted ${accepted}, refused at the cap ${refusedAtCap}, dropped ${dropped}; observe ${observeMs} ms after start (${startedAt - floodSentAt} ms after the flood)`);
    expect(await second.stop()).toBe(0);
  });
});
