/**
 * Malformed messages on every subject the indexer subscribes to are counted
 * (vantage_indexer_messages_rejected_total{source,reason}), logged and ignored;
 * malformed observe requests get an error reply (Vantage-Error-Code: BAD_REQUEST);
 * valid traffic before and after is applied and answered correctly.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { bookingsSubject, encodeObserveRequestBinary, lifecycleSubject, observeSubject, workersSubject } from '@vantage/protocol';
import { natsUrl, uniqueName, eventually } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import {
  activeSequencesSubject,
  encodeEnvelope,
  jetStreamKvStreamName,
  jetStreamKvSubject,
  kvEventsSubject,
  kvMetricsSubject,
  legacyKvEventsSubject,
} from '@vantage/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventGen, RefModel, diffReply, encodeBooking, kvPublisher, makeDocs, observe, spawnIndexer, sumMetric, type IndexerChild, type KvFormat } from './helpers';

const BS = 16;
const te = new TextEncoder();
const GARBAGE = Uint8Array.of(0xc1, 0xff, 0x00); // 0xc1 is never valid msgpack, and it is not JSON
const EMPTY_MAP = Uint8Array.of(0x80); // msgpack {}: well-formed, wrong shape

describe('indexer: malformed input', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  const tag = uniqueName('bad').replace(/-/g, '_');
  const P: Record<KvFormat, string> = { event_plane: `${tag}_ep`, legacy_json: `${tag}_lj`, jetstream: `${tag}_js` };

  beforeAll(async () => {
    nc = await connect({ servers: natsUrl() });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: jetStreamKvStreamName(P.jetstream, 'backend'), subjects: [jetStreamKvSubject(P.jetstream, 'backend')] });
    child = await spawnIndexer({
      natsUrl: natsUrl(),
      pools: (Object.keys(P) as KvFormat[]).map((f) => ({ name: P[f], blockSize: BS, namespace: P[f], kvEvents: f })),
      // Every rejection logged (no rate limit), so the lines can be counted against the counters.
      env: { VANTAGE_INDEXER_DURABLE_NAME: uniqueName('dur') },
    });
  });
  afterAll(async () => {
    await child?.stop();
    await (await jetstreamManager(nc)).streams.delete(jetStreamKvStreamName(P.jetstream, 'backend')).catch(() => false);
    await nc?.close();
  });

  it('counts, logs and ignores malformed messages on every subscribed subject, and keeps answering', async () => {
    const validBooking = new TextDecoder().decode(
      encodeBooking(P.event_plane, { requestId: 'b', workerId: 5n, dpRank: 0, promptTokens: 32, overlapBlocks: 0, sequenceHashes: BigUint64Array.of(1n, 2n) }),
    );
    const badEnvelope = encodeEnvelope({ topic: 'kv-events', publisherId: 1n, sequence: 0n, publishedAtMs: 1n, payload: EMPTY_MAP });
    // [pool, source label, subject, payloads]
    const cases: [string, string, string, Uint8Array[]][] = [
      [P.event_plane, 'kv_events', kvEventsSubject(P.event_plane, 'backend'), [GARBAGE, EMPTY_MAP, badEnvelope, te.encode('{"worker_id":1}')]],
      [P.event_plane, 'kv_metrics', kvMetricsSubject(P.event_plane), [GARBAGE, EMPTY_MAP, te.encode('{"dp_rank":0}')]],
      [P.event_plane, 'active_sequences', activeSequencesSubject(P.event_plane, 'backend'), [GARBAGE, EMPTY_MAP, te.encode('[1,2]')]],
      [P.legacy_json, 'kv_events', legacyKvEventsSubject(P.legacy_json, 'backend'), [GARBAGE, te.encode('not json'), te.encode('{"worker_id":1,"event":{}}')]],
      [P.event_plane, 'bookings', bookingsSubject(P.event_plane), [GARBAGE, te.encode('{"v":1}'), te.encode(validBooking.replace('"workerId":"5"', '"workerId":"99999999999999999999"'))]],
      [P.event_plane, 'lifecycle', lifecycleSubject(P.event_plane), [te.encode('nope'), te.encode('{"v":2,"requestId":"x"}'), te.encode('{"v":1,"requestId":"x","kind":"exploded"}')]],
      [P.event_plane, 'workers', workersSubject(P.event_plane), [te.encode(''), te.encode('{"v":1,"kind":"register","workerId":"1"}')]],
    ];

    // Valid traffic first, to prove it still applies around the garbage.
    const docs = makeDocs(1, BS, 2, 2, 3, 5);
    const pubs = [{ workerId: 21n as WorkerId, dpRank: 0 }, { workerId: 22n as WorkerId, dpRank: 0 }];
    const refs = new Map<string, RefModel>();
    const sendValid = async (f: KvFormat, n: number, seed: number): Promise<void> => {
      const ref = refs.get(f) ?? new RefModel(BS);
      refs.set(f, ref);
      const publish = kvPublisher(nc, f, P[f], 'backend');
      for (const e of new EventGen(seed, docs, pubs).events(n)) {
        await publish(e);
        ref.apply(e);
      }
    };
    const formats = Object.keys(P) as KvFormat[];
    for (const [i, f] of formats.entries()) await sendValid(f, 40, 10 + i);

    const js = jetstream(nc);
    const jsBad = [GARBAGE, te.encode('not json'), te.encode('{}')];
    for (const b of jsBad) await js.publish(jetStreamKvSubject(P.jetstream, 'backend'), b);
    for (const [, , subject, payloads] of cases) for (const b of payloads) nc.publish(subject, b);
    await nc.flush();

    // Malformed observe requests: an error reply, never silence. Binary ones too: cut short, and with an unknown flag.
    const bin = encodeObserveRequestBinary({ requestId: null, prompt: { kind: 'local_hashes', localHashes: BigUint64Array.of(1n, 2n), loraName: null }, promptTokens: 128 });
    const binBadFlags = Buffer.from(bin);
    binBadFlags.writeUInt32LE(0x40, 4);
    const badObserve = [bin.subarray(0, bin.length - 3), binBadFlags, GARBAGE, te.encode('{}'), te.encode('{"v":1,"prompt":{"localHashes":["1"]},"promptTokens":-5}'), te.encode('{"v":1,"prompt":{"localHashes":["18446744073709551616"]},"promptTokens":16}'), new Uint8Array(0)];
    for (const bad of badObserve) {
      const m = await nc.request(observeSubject(P.event_plane), bad, { timeout: 5_000 });
      expect(m.headers?.get('Vantage-Error-Code')).toBe('BAD_REQUEST');
      expect(m.headers?.get('Nats-Service-Error-Code')).toBe('400');
      expect(m.data.length).toBe(0);
    }

    // Valid traffic after the garbage (the JetStream position moved past the bad messages).
    for (const [i, f] of formats.entries()) {
      // Continue each publisher's ids where the first batch stopped: same generator seed, more events.
      const ref = new RefModel(BS);
      const publish = kvPublisher(nc, f, P[f], 'backend');
      const all = new EventGen(10 + i, docs, pubs).events(80);
      for (const e of all) ref.apply(e);
      for (const e of all.slice(40)) await publish(e);
      refs.set(f, ref);
    }
    await nc.flush();

    const expected = new Map<string, number>();
    for (const [pool, source, , payloads] of cases) expected.set(`${pool}/${source}`, (expected.get(`${pool}/${source}`) ?? 0) + payloads.length);
    expected.set(`${P.jetstream}/kv_events_js`, jsBad.length);
    await eventually(
      'every rejection counted',
      async () => {
        for (const [k, n] of expected) {
          const [pool, source] = k.split('/') as [string, string];
          if ((await child.metric('vantage_indexer_messages_rejected_total', { pool, source })) < n) return false;
        }
        return true;
      },
      10_000,
    );
    const text = await child.metricsText();
    let total = 0;
    for (const [k, n] of expected) {
      const [pool, source] = k.split('/') as [string, string];
      expect(sumMetric(text, 'vantage_indexer_messages_rejected_total', { pool, source }), k).toBe(n);
      total += n;
    }
    // Logged with source and reason, rate-limited: at least one line for every pool and source that
    // rejected something, at most one per (pool, source, reason) in these few seconds.
    const sourcesOf = (): Set<string> => new Set(child.lines.filter((l) => l['msg'] === 'message rejected').map((l) => `${String(l['pool'])}/${String(l['source'])}`));
    await eventually('rejections logged', () => [...expected.keys()].every((k) => sourcesOf().has(k)));
    const logged = child.lines.filter((l) => l['msg'] === 'message rejected');
    expect(logged.length).toBeLessThanOrEqual(total);
    expect(new Set(logged.map((l) => `${String(l['pool'])}/${String(l['source'])}/${String(l['reason'])}`)).size).toBe(logged.length);
    expect(logged.every((l) => typeof l['reason'] === 'string' && typeof l['source'] === 'string' && typeof l['detail'] === 'string')).toBe(true);
    expect(new Set(logged.map((l) => l['source']))).toEqual(new Set(['kv_events', 'kv_metrics', 'active_sequences', 'bookings', 'lifecycle', 'workers', 'kv_events_js']));

    // Still answering, and correctly, in every pool.
    for (const f of formats) {
      let diffs: string[] = [];
      await eventually(
        `${f} answers match`,
        async () => {
          diffs = [];
          for (const d of docs) diffs.push(...diffReply(await observe(nc, P[f], d.local, d.tokens.length), refs.get(f)!.expect(d.local, d.tokens.length), BS));
          return diffs.length === 0;
        },
        10_000,
        100,
      ).catch(() => expect(diffs).toEqual([]));
    }
    expect(child.proc.exitCode).toBeNull();
    expect(await child.metric('vantage_indexer_observe_seconds_count', { pool: P.event_plane, outcome: 'bad_request' })).toBe(badObserve.length);
  });
});
