/**
 * Restarts over real NATS: the indexer killed with -9 mid-stream and started
 * again (JetStream mode: nothing lost; core NATS: the workers that published
 * meanwhile are flagged suspect until a `cleared` repairs them), and the
 * nats-server itself restarted under a running indexer.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { natsUrl, ownNats, uniqueName, eventually } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { jetStreamKvStreamName, jetStreamKvSubject } from '@vantage/wire';
import { afterAll, describe, expect, it } from 'vitest';
import {
  EventGen,
  RefModel,
  diffReply,
  kvPublisher,
  makeDocs,
  observe,
  spawnIndexer,
  type Doc,
  type IndexerChild,
  type Publisher,
} from './helpers';

const BS = 16;
const PUBS: Publisher[] = [11n, 12n, 13n, 14n].map((w) => ({ workerId: w as WorkerId, dpRank: 0 }));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function applied(child: IndexerChild, pool: string): Promise<number> {
  return (await child.metric('vantage_indexer_events_applied_total', { pool })) + (await child.metric('vantage_indexer_kv_duplicates_total', { pool }));
}

/** Differences between the service's answers and the reference over every document. */
async function differences(nc: NatsConnection, pool: string, docs: Doc[], ref: RefModel): Promise<string[]> {
  const out: string[] = [];
  for (const d of docs) out.push(...diffReply(await observe(nc, pool, d.local, d.tokens.length), ref.expect(d.local, d.tokens.length), BS));
  return out;
}

describe('indexer restarts', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it('JetStream mode: kill -9 mid-stream, restart from the snapshot, converge with no event lost', async () => {
    const nc = await connect({ servers: natsUrl() });
    cleanups.push(() => nc.close());
    const pool = uniqueName('jsk').replace(/-/g, '_');
    const ns = pool;
    const stream = jetStreamKvStreamName(ns, 'backend');
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [jetStreamKvSubject(ns, 'backend')] });
    cleanups.push(() => jsm.streams.delete(stream));
    const env = {
      VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '150',
      VANTAGE_INDEXER_SNAPSHOT_BUCKET: uniqueName('snap'),
      VANTAGE_INDEXER_DURABLE_NAME: uniqueName('dur'),
    };
    cleanups.push(async () => (await jsm.streams.delete(`OBJ_${env.VANTAGE_INDEXER_SNAPSHOT_BUCKET}`)) as unknown);
    const pools = [{ name: pool, blockSize: BS, namespace: ns, kvEvents: 'jetstream' as const }];
    const first = await spawnIndexer({ natsUrl: natsUrl(), pools, env });
    cleanups.push(() => first.stop());

    const docs = makeDocs(7, BS, 3, 4, 4, 12);
    const events = new EventGen(8, docs, PUBS).events(1500);
    const ref = new RefModel(BS);
    for (const e of events) ref.apply(e);
    const publish = kvPublisher(nc, 'jetstream', ns, 'backend');
    // The workers keep publishing (paced) while the indexer dies and comes back.
    const publishing = (async () => {
      for (let i = 0; i < events.length; i++) {
        await publish(events[i]!);
        if (i % 50 === 49) await sleep(15);
      }
    })();

    await eventually(
      'a snapshot written after some events applied',
      async () => (await applied(first, pool)) >= 300 && (await first.metric('vantage_indexer_snapshots_total', { pool, outcome: 'written' })) >= 1,
      20_000,
    );
    const appliedBeforeKill = await applied(first, pool);
    await first.kill9();
    expect(appliedBeforeKill).toBeLessThan(events.length); // really mid-stream

    const second = await spawnIndexer({ natsUrl: natsUrl(), pools, env });
    cleanups.push(() => second.stop());
    const restored = await second.waitLog((l) => l['msg'] === 'snapshot restored; its facts carry their original ages');
    expect(restored['publishers']).toBeGreaterThan(0);
    const consuming = await second.waitLog((l) => l['msg'] === 'consuming KV events from JetStream');
    expect(consuming['fromSeq']).toBeGreaterThan(1); // resumed after the snapshot, not replayed from the start
    await publishing;

    let diffs: string[] = ['not compared yet'];
    await eventually('restarted index equals the reference', async () => (diffs = await differences(nc, pool, docs, ref)).length === 0, 20_000, 100).catch(
      () => expect(diffs).toEqual([]),
    );
    const reply = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    expect(reply.snapshotRestoredAtMs).not.toBeNull();
    expect(reply.workers.every((w) => w.suspect === null)).toBe(true); // no gap: nothing was lost
    expect(await second.metric('vantage_indexer_kv_gaps_total', { pool })).toBe(0);
    await second.stop();
  });

  it('core NATS: kill -9, events published while down are lost, those workers are suspect until cleared', async () => {
    const nc = await connect({ servers: natsUrl() });
    cleanups.push(() => nc.close());
    const pool = uniqueName('cnk').replace(/-/g, '_');
    const env = { VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '150', VANTAGE_INDEXER_SNAPSHOT_BUCKET: uniqueName('snap') };
    const jsm = await jetstreamManager(nc);
    cleanups.push(async () => (await jsm.streams.delete(`OBJ_${env.VANTAGE_INDEXER_SNAPSHOT_BUCKET}`)) as unknown);
    const pools = [{ name: pool, blockSize: BS, namespace: pool, kvEvents: 'event_plane' as const }];
    const first = await spawnIndexer({ natsUrl: natsUrl(), pools, env });
    cleanups.push(() => first.stop());

    const docs = makeDocs(17, BS, 3, 4, 4, 12);
    const gen = new EventGen(18, docs, PUBS);
    const truth = new RefModel(BS);
    const publish = kvPublisher(nc, 'event_plane', pool, 'backend');
    const send = async (e: KvEvent): Promise<void> => {
      await publish(e);
      truth.apply(e);
    };
    const phase1 = gen.events(600);
    for (const e of phase1) await send(e);
    await nc.flush();
    await eventually('phase 1 applied', async () => (await applied(first, pool)) >= phase1.length);
    const snaps = await first.metric('vantage_indexer_snapshots_total', { pool, outcome: 'written' });
    await eventually('a snapshot covering phase 1', async () => (await first.metric('vantage_indexer_snapshots_total', { pool, outcome: 'written' })) > snaps);
    expect(await differences(nc, pool, docs, truth)).toEqual([]);
    await first.kill9();

    // While the indexer is down, two of the four workers publish: on core NATS those events are gone.
    const affected = PUBS.slice(0, 2);
    for (const p of affected) {
      for (const d of docs.slice(0, 3)) {
        const e = gen.store(p, d, 'device') ?? gen.remove(p, d, 'device');
        if (e) await send(e);
      }
    }
    await nc.flush();

    const second = await spawnIndexer({ natsUrl: natsUrl(), pools, env });
    cleanups.push(() => second.stop());
    // Every worker publishes again; the affected ones' ids jump.
    for (const p of PUBS) await send(gen.noop(p));
    await nc.flush();
    await eventually('post-restart events applied', async () => (await applied(second, pool)) >= PUBS.length);
    const reply = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    expect(reply.snapshotRestoredAtMs).not.toBeNull();
    for (const w of reply.workers) {
      const isAffected = affected.some((p) => p.workerId === w.workerId);
      expect(w.suspect?.reason ?? null, `worker ${w.workerId}`).toBe(isAffected ? 'event_gap' : null);
    }
    expect(await second.metric('vantage_indexer_kv_missed_events_total', { pool })).toBeGreaterThan(0);
    // Unaffected workers are exact already.
    const unaffected = (diffs: string[]): string[] => diffs.filter((d) => !affected.some((p) => d.startsWith(`${p.workerId}:`)) && !d.startsWith('dynamoChoice'));
    expect(unaffected(await differences(nc, pool, docs, truth))).toEqual([]);

    // The affected workers resynchronise: `cleared`, then store what they hold again.
    for (const p of affected) {
      await send(gen.cleared(p));
      for (const d of docs) {
        const e = gen.store(p, d, 'device');
        if (e) await send(e);
      }
    }
    await nc.flush();
    let diffs: string[] = [];
    await eventually('repaired', async () => (diffs = await differences(nc, pool, docs, truth)).length === 0, 10_000, 100).catch(() => expect(diffs).toEqual([]));
    const after = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    expect(after.workers.every((w) => w.suspect === null)).toBe(true);
    await second.stop();
  });

  it('nats-server restart: the indexer reconnects and recovers; ages grow while no events arrive', async () => {
    const n = await ownNats();
    cleanups.push(n.cleanup);
    const opts = { servers: n.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 };
    const nc = await connect(opts);
    cleanups.push(() => nc.close());
    const pool = uniqueName('nrs').replace(/-/g, '_');
    const child = await spawnIndexer({ natsUrl: n.url, pools: [{ name: pool, blockSize: BS, namespace: pool }] });
    cleanups.push(() => child.stop());

    const docs = makeDocs(27, BS, 2, 3, 4, 8);
    const gen = new EventGen(28, docs, PUBS);
    const truth = new RefModel(BS);
    const publish = kvPublisher(nc, 'event_plane', pool, 'backend');
    const send = async (e: KvEvent): Promise<void> => {
      await publish(e);
      truth.apply(e);
    };
    for (const e of gen.events(300)) await send(e);
    await nc.flush();
    await eventually('events applied', async () => (await applied(child, pool)) >= 300);
    expect(await differences(nc, pool, docs, truth)).toEqual([]);
    const before = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    const age0 = Math.max(...before.workers.map((w) => w.ages.indexMs ?? 0));

    const downMs = 1_500;
    await n.kill9();
    await sleep(downMs);
    await n.start();

    // The indexer comes back by itself (same process) and answers again.
    let reply = before;
    await eventually(
      'observe answered after the restart',
      async () => {
        try {
          reply = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length, 1_000);
          return true;
        } catch {
          return false;
        }
      },
      30_000,
      200,
    );
    expect(child.proc.exitCode).toBeNull();
    const ageAfter = (r: typeof reply, w: bigint): number => r.workers.find((x) => x.workerId === w)!.ages.indexMs!;
    for (const p of PUBS) expect(ageAfter(reply, p.workerId)).toBeGreaterThanOrEqual(ageAfter(before, p.workerId) + downMs);
    await sleep(300);
    const later = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    for (const p of PUBS) expect(ageAfter(later, p.workerId)).toBeGreaterThanOrEqual(ageAfter(reply, p.workerId) + 250);
    expect(age0).toBeLessThan(ageAfter(later, PUBS[0]!.workerId));
    // The index is intact (nothing was published meanwhile), and new events flow again.
    expect(await differences(nc, pool, docs, truth)).toEqual([]);
    for (const p of PUBS) {
      const e = gen.store(p, docs[1]!, 'device') ?? gen.noop(p);
      await send(e);
    }
    await nc.flush();
    let diffs: string[] = [];
    await eventually('new events applied after reconnect', async () => (diffs = await differences(nc, pool, docs, truth)).length === 0, 10_000, 100).catch(() =>
      expect(diffs).toEqual([]),
    );
    const fresh = await observe(nc, pool, docs[0]!.local, docs[0]!.tokens.length);
    for (const p of PUBS) expect(ageAfter(fresh, p.workerId)).toBeLessThan(1_000);
    expect(await child.metric('vantage_indexer_kv_gaps_total', { pool })).toBe(0);
    expect(await child.stop()).toBe(0);
  });
});
