/**
 * Broker-level fuzz (issue 25): 200,000+ generated messages, from a fixed fast-check seed, on every
 * subject the indexer, decision and outcome services subscribe to, through a real nats-server (and
 * the outcome service's JetStream streams into a real Kafka broker): random bytes, mutated valid
 * messages, and valid shapes with out-of-range values, with valid traffic around them.
 *
 * Checked: no service crashes (all three run in this process: an uncaught exception fails the
 * test); every message is accounted for by the services' own counters (indexers and decision:
 * received = accepted + rejected + dropped, and received = what was published; outcome: every
 * message taken, each decision either copied or dead-lettered); the valid traffic is unaffected
 * (routes answered, the good workers' facts as published, and the outcome topic holds exactly one
 * record per valid request id).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { bookingEventCodec, bookingsSubject, lifecycleEventCodec, lifecycleSubject, observeRequestCodec, observeSubject, workerRegistrationCodec, workersSubject } from '@vantage/protocol';
import { encodeSingleObject, DECISION_RECORD_CURRENT } from '@vantage/records';
import { eventually, kafkaBrokers, natsUrl } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { activeSequencesSubject, encodeEventPlaneMessage, kvEventsSubject, kvMetricsSubject } from '@vantage/wire';
import { afterAll, describe, expect, it } from 'vitest';
// A cross-service test: it drives each service through that service's own test harness (not part
// of the packages' public entry points), rather than a second copy of them here.
// eslint-disable-next-line import-x/no-relative-packages
import { BLOCK, Harness, parameterSet, tokens } from '../../services/decision/test/harness';
// eslint-disable-next-line import-x/no-relative-packages
import { decision, decodeOutcomes, inProcess, lifecycle, names, Publisher, readTopic, serviceEnv } from '../../services/outcome/test/helpers';

const SEED = 2_5_2026;
const te = new TextEncoder();

function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** Values that are out of range for some field of every message we speak. */
const BAD = [-1, 2 ** 64, 1e308, 1.5, '', 'x'.repeat(5000), null, [], {}, true, '18446744073709551616', '-1', 4294967296, { $ref: '#' }];

type Mut = [number, number, 0 | 1 | 2];
function mutate(b: Uint8Array, muts: Mut[]): Uint8Array {
  let out = Array.from(b);
  for (const [at, v, kind] of muts) {
    const i = out.length === 0 ? 0 : at % out.length;
    if (kind === 0) out[i] = (out[i] ?? 0) ^ (v | 1);
    else if (kind === 1) out.splice(i, 0, v);
    else out.splice(i, 1);
  }
  if (out.length > 4096) out = out.slice(0, 4096);
  return Uint8Array.from(out);
}

function outOfRange(o: Record<string, unknown>, key: number, value: unknown): Uint8Array {
  const keys = Object.keys(o);
  const k = keys[key % keys.length]!;
  return te.encode(JSON.stringify({ ...o, [k]: value }));
}

/** Random bytes, mutations of the valid seeds, and the JSON seeds with one field out of range. */
function messages(seeds: Uint8Array[], jsonSeeds: Record<string, unknown>[], n: number, seed: number): Uint8Array[] {
  const arbs: fc.Arbitrary<Uint8Array>[] = [
    fc.uint8Array({ maxLength: 300 }),
    fc.tuple(fc.nat(seeds.length - 1), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }), fc.constantFrom<0 | 1 | 2>(0, 1, 2)), { minLength: 1, maxLength: 4 })).map(([i, m]) => mutate(seeds[i]!, m)),
  ];
  if (jsonSeeds.length > 0) arbs.push(fc.tuple(fc.nat(jsonSeeds.length - 1), fc.nat(), fc.constantFrom(...BAD)).map(([i, k, v]) => outOfRange(jsonSeeds[i]!, k, v)));
  return fc.sample(fc.oneof(...arbs), { seed, numRuns: n });
}

describe('fuzz: every subscribed subject of the indexer, decision and outcome services', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-fuzz-'));
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it('200,000 messages: no crash, every message accounted for, valid traffic unaffected', { timeout: 300_000 }, async () => {
    const started = Date.now();
    // ---- services: two indexers and the decision service (the decision tests' harness), the outcome service.
    const h = new Harness(join(dir, 'params.json'), { decisionEnv: { VANTAGE_DECISION_REJECTION_LOG_INTERVAL_MS: '10000' } });
    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b' }));
    cleanups.push(() => h.stop());
    const prompt = tokens(8 * BLOCK, 5);
    const local = h.client.hashPrompt('efficient', prompt);
    const GOOD_E = 501n as WorkerId;
    const GOOD_C = 502n as WorkerId;
    await h.seedWorkers(GOOD_E, GOOD_C, local, 5);

    const n = names('fuzz');
    const { svc: outcomeSvc } = await inProcess(serviceEnv(n, natsUrl(), kafkaBrokers().join(','), { VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1000', VANTAGE_LOG_LEVEL: 'error' }));
    cleanups.push(async () => void (await outcomeSvc.stop('test done')));
    const pub = await Publisher.open(natsUrl(), n);
    cleanups.push(() => pub.close());

    // ---- seeds (a worker id, request ids and session ids no valid message uses).
    const FW = 9_999n as WorkerId;
    const kv: KvEvent = { workerId: FW, dpRank: 0, storageTier: 'device', eventId: 1n, data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: BigUint64Array.of(1n, 2n), tokensHashes: BigUint64Array.of(3n, 4n) } };
    const envelope = encodeEventPlaneMessage({ publisherId: FW, sequence: 0n, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event: kv });
    const json = (b: Uint8Array): Record<string, unknown> => JSON.parse(new TextDecoder().decode(b)) as Record<string, unknown>;
    const pools = [h.effPool, h.capPool];
    const nsOf = (pool: string): string => `${h.ns}${pool === h.effPool ? 'e' : 'c'}`;
    const poolSeeds = (pool: string): { booking: Uint8Array; life: Uint8Array; reg: Uint8Array } => ({
      booking: bookingEventCodec.encode({ requestId: 'fz-b', sessionId: 'fz', pool, workerId: FW, dpRank: 0, promptTokens: 64, overlapBlocks: 0, sequenceHashes: BigUint64Array.of(5n), localHashes: null, expectedOutputTokens: null, prefillTokens: null, atMs: Date.now() }),
      life: lifecycleEventCodec.encode({ requestId: 'fz-l', sessionId: 'fz', pool, kind: 'done', atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null }),
      reg: workerRegistrationCodec.encode({ kind: 'register', pool, workerId: FW, atMs: Date.now(), capacity: { blockSize: BLOCK, totalKvBlocks: 64, maxNumBatchedTokens: 512, maxNumSeqs: 8, dpStartRank: 0, dpSize: 1, schedulable: false }, ttlMs: 60_000, endpoint: 'http://fz.local:1', model: null }),
    });

    // ---- the plan: [subject, messages] per subscribed subject.
    const PER_CORE_SUBJECT = 12_500; // 12 core subjects (6 per pool): 150,000 messages
    const plan: { subject: string; msgs: Uint8Array[]; to: 'indexer' | 'both' }[] = [];
    let s = SEED;
    for (const pool of pools) {
      const ps = poolSeeds(pool);
      const ns = nsOf(pool);
      plan.push({ subject: kvEventsSubject(ns, 'backend'), msgs: messages([envelope], [], PER_CORE_SUBJECT, s++), to: 'indexer' });
      plan.push({ subject: kvMetricsSubject(ns), msgs: messages([envelope], [], PER_CORE_SUBJECT, s++), to: 'indexer' });
      plan.push({ subject: activeSequencesSubject(ns, 'backend'), msgs: messages([envelope], [], PER_CORE_SUBJECT, s++), to: 'indexer' });
      plan.push({ subject: bookingsSubject(pool), msgs: messages([ps.booking], [json(ps.booking)], PER_CORE_SUBJECT, s++), to: 'indexer' });
      // The decision service subscribes to these two as well.
      plan.push({ subject: lifecycleSubject(pool), msgs: messages([ps.life], [json(ps.life)], PER_CORE_SUBJECT, s++), to: 'both' });
      plan.push({ subject: workersSubject(pool), msgs: messages([ps.reg], [json(ps.reg)], PER_CORE_SUBJECT, s++), to: 'both' });
    }
    // Request-reply subjects: observe (each indexer) and route (the decision service).
    const obsSeed = observeRequestCodec.encode({ requestId: 'fz', prompt: { kind: 'local_hashes', localHashes: local, loraName: null }, promptTokens: prompt.length });
    const routeSeed = te.encode(JSON.stringify({ v: 1, requestId: 'fz-r', sessionId: 'fz', stageProposal: 'efficient', candidates: { efficient: { model: 'model-8b', prompt: { localHashes: ['1'] }, promptTokens: 16 }, capable: { model: 'model-70b', prompt: { localHashes: ['1'] }, promptTokens: 16 } } }));
    const observeMsgs = messages([obsSeed], [json(obsSeed)], 1_000, s++);
    const routeMsgs = messages([routeSeed], [json(routeSeed)], 1_000, s++);
    // The outcome service's two streams.
    const decSeed = encodeSingleObject(DECISION_RECORD_CURRENT, decision(0, 'fz'));
    const lifeSeed = lifecycle(decision(0, 'fz'), 'done', 100);
    const decFuzz = messages([decSeed], [], 24_000, s++);
    const lifeFuzz = messages([lifeSeed], [json(lifeSeed)], 24_000, s++);
    const total = plan.reduce((a, p) => a + p.msgs.length, 0) + observeMsgs.length + routeMsgs.length + decFuzz.length + lifeFuzz.length;
    expect(total).toBeGreaterThanOrEqual(200_000);
    const generatedMs = Date.now() - started;

    // ---- valid traffic around the fuzz.
    const valid = Array.from({ length: 300 }, (_, i) => decision(i, 'valid'));
    let routesOk = 0;
    // Answered without an error. Which worker is chosen is not asserted: the fuzz's valid-shaped messages
    // register and feed a worker of their own, which Dynamo's cost may then rightly prefer.
    const route = async (): Promise<void> => {
      const r = await h.client.route({ requestId: `route-${routesOk}`, sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });
      if (r.modelRole === 'efficient' || r.modelRole === 'capable') routesOk++;
    };

    // ---- publish, in chunks the services take before the next (no slow-consumer loss at the server).
    const regs = { eff: h.indexers.efficient.svc.ctx.registry, cap: h.indexers.capable.svc.ctx.registry, dec: h.decision.ctx.registry };
    const received = async (): Promise<number> => metric(await regs.eff.metrics(), 'vantage_indexer_messages_received_total') + metric(await regs.cap.metrics(), 'vantage_indexer_messages_received_total');
    // What the seeding already sent; the decision service's own bookings (one per route it answers) come on top.
    const before = { indexers: await received(), decision: metric(await regs.dec.metrics(), 'vantage_decision_messages_received_total') };
    let indexerSent = 0;
    let decisionSent = 0;
    const CHUNK = 2_500;
    for (let off = 0; off < PER_CORE_SUBJECT; off += CHUNK) {
      for (const p of plan) {
        for (const m of p.msgs.slice(off, off + CHUNK)) h.nc.publish(p.subject, m);
        indexerSent += Math.min(CHUNK, p.msgs.length - off);
        if (p.to === 'both') decisionSent += Math.min(CHUNK, p.msgs.length - off);
      }
      // The good workers renew their registrations, as real workers do (else they lapse after their TTL).
      h.register('efficient', GOOD_E);
      h.register('capable', GOOD_C);
      indexerSent += 2;
      decisionSent += 2;
      await h.nc.flush();
      const want = indexerSent;
      await eventually('indexers took the chunk', async () => (await received()) >= want, 60_000, 50);
      await route();
    }
    // Observe and route requests: every one answered (an error reply for a bad one), none unanswered.
    let replies = 0;
    const ask = async (subject: string, msgs: Uint8Array[]): Promise<void> => {
      for (let i = 0; i < msgs.length; i += 100) {
        await Promise.all(msgs.slice(i, i + 100).map((m) => h.nc.request(subject, m, { timeout: 10_000 }).then(() => void replies++)));
      }
    };
    await ask(observeSubject(h.effPool), observeMsgs);
    await ask(h.routeSubject, routeMsgs);
    // The outcome streams: fuzz interleaved with the valid requests.
    const outcomeFuzzStart = Date.now();
    for (let i = 0; i < valid.length; i++) {
      const batch: Promise<void>[] = [pub.request(valid[i]!)];
      for (let j = i * 80; j < (i + 1) * 80 && j < decFuzz.length; j++) {
        // A message id of its own: identical generated bytes must not be deduplicated by the stream.
        batch.push(pub.js.publish(n.decisionsSubject, decFuzz[j]!, { msgID: `fz-d-${j}` }).then(() => {}), pub.js.publish(`${n.lifecyclePrefix}.small`, lifeFuzz[j]!, { msgID: `fz-l-${j}` }).then(() => {}));
      }
      await Promise.all(batch);
    }
    const outcomePublishMs = Date.now() - outcomeFuzzStart;
    await route();

    // ---- accounting.
    const streamMsgs = decFuzz.length + lifeFuzz.length + 3 * valid.length;
    let taken = 0;
    await eventually('outcome took every message', async () => (taken = metric(await outcomeSvc.ctx.registry.metrics(), 'vantage_outcome_records_in_total')) >= streamMsgs, 120_000, 250).catch((e: unknown) => {
      throw new Error(`${String(e)}: ${taken} of ${streamMsgs}`);
    });
    const outcomeTakenMs = Date.now() - outcomeFuzzStart;
    let outs: ReturnType<typeof decodeOutcomes> = [];
    const validIds = new Set(valid.map((d) => d.requestId));
    await eventually('every valid outcome written', async () => {
      outs = decodeOutcomes(await readTopic(kafkaBrokers().join(','), n.topics.outcomes).catch(() => []));
      return outs.filter((o) => validIds.has(o.requestId)).length >= valid.length;
    }, 120_000, 500);

    const eff = await regs.eff.metrics();
    const cap = await regs.cap.metrics();
    const dec = await regs.dec.metrics();
    const out = await outcomeSvc.ctx.registry.metrics();
    const both = (name: string): number => metric(eff, name) + metric(cap, name);
    const idx = { received: both('vantage_indexer_messages_received_total'), accepted: both('vantage_indexer_messages_accepted_total'), rejected: both('vantage_indexer_messages_rejected_total'), dropped: both('vantage_indexer_messages_dropped_total') };
    const bookings = metric(dec, 'vantage_decision_bookings_total');
    const dcs = { received: metric(dec, 'vantage_decision_messages_received_total'), accepted: metric(dec, 'vantage_decision_messages_accepted_total'), rejected: metric(dec, 'vantage_decision_messages_rejected_total') };
    const o = {
      inDecisions: metric(out, 'vantage_outcome_records_in_total', { kind: 'decision' }),
      inLifecycle: metric(out, 'vantage_outcome_records_in_total', { kind: 'lifecycle' }),
      decisionsCopied: metric(out, 'vantage_outcome_records_out_total', { kind: 'decision' }),
      deadLetters: metric(out, 'vantage_outcome_dead_letters_total'),
      decisionDeadLetters: ['RECORD_BAD_MARKER', 'RECORD_TRUNCATED', 'RECORD_UNKNOWN_FINGERPRINT', 'RECORD_TRAILING_BYTES', 'RECORD_MALFORMED', 'DECISION_INVALID'].reduce((a, r) => a + metric(out, 'vantage_outcome_dead_letters_total', { reason: r }), 0),
    };
    const perValid = new Map<string, number>();
    for (const r of outs) perValid.set(r.requestId, (perValid.get(r.requestId) ?? 0) + 1);
    console.log(
      `[fuzz] ${total} generated messages (seed ${SEED}, generated in ${generatedMs} ms); indexers ${JSON.stringify(idx)} of ${before.indexers} + ${indexerSent} published + ${bookings} bookings of routes; decision ${JSON.stringify(dcs)} of ${before.decision} + ${decisionSent}; ` +
        `${replies} of ${observeMsgs.length + routeMsgs.length} requests answered; outcome ${JSON.stringify(o)} of ${streamMsgs} (published in ${outcomePublishMs} ms, all taken after ${outcomeTakenMs} ms), ${outs.length} outcome records; ` +
        `valid routes ${routesOk}; whole test ${Date.now() - started} ms`,
    );
    // Indexers and decision: every message received, and each one accepted, rejected or dropped.
    expect(idx.received).toBe(before.indexers + indexerSent + bookings);
    expect(idx.accepted + idx.rejected + idx.dropped).toBe(idx.received);
    expect(dcs.received).toBe(before.decision + decisionSent);
    expect(dcs.accepted + dcs.rejected).toBe(dcs.received);
    expect(replies).toBe(observeMsgs.length + routeMsgs.length);
    // Outcome: every message taken; each decision copied or dead-lettered.
    expect(o.inDecisions + o.inLifecycle).toBe(streamMsgs);
    expect(o.decisionsCopied + o.decisionDeadLetters).toBe(o.inDecisions);
    // Valid traffic unaffected: exactly one outcome per valid request id, no id written twice, routes to the good workers.
    for (const id of validIds) expect(perValid.get(id), id).toBe(1);
    expect([...perValid.values()].every((c) => c === 1)).toBe(true);
    expect(routesOk).toBe(Math.ceil(PER_CORE_SUBJECT / CHUNK) + 1);
    const w = await h.observeWorker('efficient', GOOD_E, local);
    expect(w?.K).toBe(5 * BLOCK);
    expect(Date.now() - started).toBeLessThan(240_000);
  });
});
