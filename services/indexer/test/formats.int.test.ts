/**
 * Differential test over a real nats-server: workers publish KV events in every
 * supported format (event-plane msgpack envelopes, legacy JSON on core NATS,
 * JSON RouterEvents in Dynamo's JetStream stream), plus registrations, bookings
 * and lifecycle on our subjects; the service's observe answers must equal a
 * brute-force model of the same traffic (and @vantage/prefix-index fed directly).
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { PrefixIndex } from '@vantage/prefix-index';
import { natsUrl, uniqueName, eventually } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { jetStreamKvStreamName, jetStreamKvSubject } from '@vantage/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EventGen,
  RefModel,
  diffReply,
  kvPublisher,
  makeDocs,
  observe,
  publishBooking,
  publishLifecycle,
  publishRegistration,
  rng,
  spawnIndexer,
  type Capacity,
  type IndexerChild,
  type KvFormat,
  type Publisher,
} from './helpers';

const BS = 16;
const FORMATS: KvFormat[] = ['event_plane', 'legacy_json', 'jetstream'];
// One worker id above 2^63 (must stay exact end to end) and one worker with two dp ranks.
const W = [18_446_744_073_709_551_557n, 7n, 9_007_199_254_740_993n, 42n] as WorkerId[];
const CAP: Capacity = { totalKvBlocks: 4096, maxNumBatchedTokens: 2048, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true };

describe('indexer: every KV event format against a reference', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const tag = uniqueName('fmt').replace(/-/g, '_');
  const pools = FORMATS.map((f) => ({ name: `${tag}_${f}`, ns: `${tag}_${f}`, comp: 'backend', format: f }));

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    const jsm = await jetstreamManager(nc);
    // Dynamo's workers create the durable stream; here the test plays the workers.
    const js = pools.find((p) => p.format === 'jetstream')!;
    await jsm.streams.add({ name: jetStreamKvStreamName(js.ns, js.comp), subjects: [jetStreamKvSubject(js.ns, js.comp)] });
    child = await spawnIndexer({
      natsUrl: natsUrl(),
      pools: pools.map((p) => ({ name: p.name, blockSize: BS, namespace: p.ns, component: p.comp, kvEvents: p.format })),
      env: { VANTAGE_INDEXER_DURABLE_NAME: uniqueName('dur') },
    });
  });

  afterAll(async () => {
    await child?.stop();
    const js = pools.find((p) => p.format === 'jetstream')!;
    await (await jetstreamManager(nc)).streams.delete(jetStreamKvStreamName(js.ns, js.comp)).catch(() => false);
    await nc?.close();
  });

  for (const [i, f] of FORMATS.entries()) {
    it(`${f}: K/host/disk per worker, R, P, suspect flags and Dynamo's choice match the reference`, async () => {
      const p = pools[i]!;
      const pubs: Publisher[] = [
        { workerId: W[0]!, dpRank: 0 },
        { workerId: W[1]!, dpRank: 0 },
        { workerId: W[1]!, dpRank: 1 },
        { workerId: W[2]!, dpRank: 0 },
        { workerId: W[3]!, dpRank: 0 },
      ];
      const docs = makeDocs(100 + i, BS, 4, 4, 6, 10);
      const gen = new EventGen(200 + i, docs, pubs);
      const ref = new RefModel(BS);
      const direct = new PrefixIndex(BS);
      const publish = kvPublisher(nc, f, p.ns, p.comp);
      let sent = 0;

      for (const w of W) {
        const cap = w === W[1] ? { ...CAP, dpSize: 2 } : w === W[3] ? { ...CAP, schedulable: false } : CAP;
        publishRegistration(nc, p.name, BS, w, cap);
        ref.register(w, cap);
        sent++;
      }
      const apply = async (ev: KvEvent): Promise<void> => {
        await publish(ev);
        ref.apply(ev);
        direct.apply(ev, 0);
        sent++;
      };
      for (const ev of gen.events(400)) await apply(ev);
      // A lost stretch on one publisher: the next event reveals the gap.
      gen.skip(pubs[3]!, 3n);
      await apply(gen.noop(pubs[3]!));

      // Bookings from the decision service; some reach first token, some end.
      const r = rng(300 + i);
      for (let b = 0; b < 40; b++) {
        const d = docs[r.int(docs.length)]!;
        const pub = pubs[r.int(pubs.length)]!;
        const booking = {
          requestId: `${p.name}-r${b}`,
          workerId: pub.workerId,
          dpRank: pub.dpRank,
          promptTokens: d.tokens.length - r.int(BS),
          overlapBlocks: r.int(6),
          sequenceHashes: d.sequence.slice(0, 4 + r.int(12)),
        };
        publishBooking(nc, p.name, booking);
        ref.book(booking);
        sent++;
        const k = r.int(3);
        if (k > 0) {
          const kind = k === 1 ? 'first_token' : 'done';
          publishLifecycle(nc, p.name, booking.requestId, kind);
          ref.lifecycle(booking.requestId, kind);
          sent++;
        }
      }
      await nc.flush();
      await eventually(
        `${sent} messages applied`,
        async () => (await child.metric('vantage_indexer_events_applied_total', { pool: p.name })) + (await child.metric('vantage_indexer_kv_duplicates_total', { pool: p.name })) >= sent,
        20_000,
      );

      const queries: { local: BigUint64Array; n: number }[] = [];
      for (const d of docs) {
        queries.push({ local: d.local, n: d.tokens.length });
        queries.push({ local: d.local.slice(0, 7), n: 7 * BS + 5 }); // a prefix, with a partial trailing block
      }
      queries.push({ local: BigUint64Array.of(1n, 2n, 3n), n: 3 * BS }); // nothing cached anywhere
      let compared = 0;
      for (const q of queries) {
        const reply = await observe(nc, p.name, q.local, q.n);
        expect(reply.pool).toBe(p.name);
        expect(diffReply(reply, ref.expect(q.local, q.n), BS)).toEqual([]);
        // The prefix index fed directly agrees on every overlap.
        for (const m of direct.match(q.local).workers) {
          const g = reply.workers.find((w) => w.workerId === m.workerId && w.dpRank === m.dpRank)!;
          expect([g.deviceOverlapBlocks, g.hostOverlapBlocks, g.diskOverlapBlocks, g.treeBlocks]).toEqual([m.deviceBlocks, m.hostBlocks, m.diskBlocks, m.treeSize]);
        }
        compared++;
      }
      expect(compared).toBe(queries.length);
      // The workload did exercise what it claims to.
      const last = ref.expect(docs[0]!.local, docs[0]!.tokens.length);
      expect(last.some((w) => w.suspect === 'event_gap')).toBe(true);
      expect(last.some((w) => w.R > 0)).toBe(true);
      const all = queries.flatMap((q) => ref.expect(q.local, q.n));
      expect(all.some((w) => w.device > 0 && w.host > w.device)).toBe(true);
      expect(await child.metric('vantage_indexer_messages_rejected_total', { pool: p.name })).toBe(0);
      // The index's own figures reach /metrics at the next housekeeping tick, equal to the index fed directly.
      const indexFigures = async (): Promise<number[]> =>
        Promise.all(['vantage_indexer_index_blocks', 'vantage_indexer_index_positions', 'vantage_indexer_index_room_positions'].map((n) => child.metric(n, { pool: p.name })));
      await eventually(
        'index metrics',
        async () => JSON.stringify(await indexFigures()) === JSON.stringify([direct.totalBlocks, direct.room.inTree, direct.room.positions]),
        10_000,
      );
      expect(await child.metric('vantage_indexer_index_bytes', { pool: p.name })).toBeGreaterThan(0);
      expect(await child.metric('vantage_indexer_index_compactions_total', { pool: p.name })).toBe(0);
    });
  }
});
