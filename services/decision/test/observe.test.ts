import { describe, expect, it } from 'vitest';
import { observeReplyCodec, type ObserveReply, type WorkerObservation } from '@vantage/protocol';
import type { WorkerId } from '@vantage/types';
import { decodeObserveReply, RECORD_REASON, RECORD_VARIANT, replyReason, toCandidateReport, toRecordObservation, type ProbeResult, type ProbeTarget } from '@vantage/decision-core';
import { InFlight } from '../src/inflight';
import { toWireObservation } from '../src/observe';
import { REASONS, VARIANTS } from '@vantage/rules';
import { DECISION_REASONS, VARIANTS as RECORD_VARIANTS } from '@vantage/records';

const W = ((1n << 64n) - 1n) as WorkerId;
function worker(id: WorkerId, over: Partial<WorkerObservation> = {}): WorkerObservation {
  return {
    workerId: id, dpRank: 0, schedulable: true, deviceOverlapBlocks: 3, K: 48, hostOverlapBlocks: 4, diskOverlapBlocks: 4, anyTierOverlapBlocks: 4,
    R: 2, trackedPrefillTokens: 100, P: 0.05, maxNumBatchedTokens: 2048, effectivePrefillTokens: 16, newBlocks: 1, activeBlocks: 7, totalKvBlocks: 4096,
    treeBlocks: 3, reported: null, suspect: null, ages: { indexMs: 10, loadMs: null, bookingMs: 5 }, dynamoCost: 1.5, ...over,
  };
}
function reply(over: Partial<ObserveReply> = {}, workers = [worker(5n as WorkerId), worker(W)]): ObserveReply {
  return { pool: 'eff', blockSize: 16, queryDurationUs: 40, atMs: 1_700_000_000_000, workers, pending: { requests: 1, tokens: 10 }, dynamoChoice: { workerId: W, dpRank: 0, cost: 1.5, policy: { name: 'kv_router:min', params: {} } }, snapshotRestoredAtMs: null, ...over };
}
const target: ProbeTarget = { role: 'efficient', model: 'm', pool: 'eff', blockSize: 16, promptTokens: 64 };
const opts = { collectionAgeMs: 1.5, nowMs: 1_700_000_000_000, restoredLoadSuspectMs: 60_000 };

describe('observe reply mapping', () => {
  it('decodes only the chosen worker, exactly (u64 kept)', () => {
    const r = decodeObserveReply(observeReplyCodec.encode(reply()));
    expect(r.ok && r.worker?.workerId).toBe(W);
    expect(r.ok && r.reply.workers.length).toBe(1);
  });
  it('rejects malformed replies with a code instead of throwing', () => {
    expect(decodeObserveReply(new TextEncoder().encode('nope'))).toMatchObject({ ok: false, code: 'malformed_json' });
    expect(decodeObserveReply(new TextEncoder().encode('{"v":1}'))).toMatchObject({ ok: false, code: 'schema_violation' });
  });
  it('maps the chosen worker to the rules: collection age, P missing without capacity, suspect flags', () => {
    const d = decodeObserveReply(observeReplyCodec.encode(reply({}, [worker(W, { P: null, suspect: { reason: 'event_gap', sinceMs: 1 } })])));
    if (!d.ok) throw new Error('decode');
    const p: ProbeResult = { kind: 'ok', reply: d.reply, worker: d.worker, rttUs: 1500 };
    const rep = toCandidateReport(target, p, opts);
    if (rep.kind !== 'observed') throw new Error('expected observed');
    const o = rep.observation;
    expect(o.placement).toEqual({ workerId: W, dpRank: 0 });
    expect(o.bookedRequests).toEqual({ status: 'ok', value: 2, ageMs: 1.5 });
    expect(o.reusablePrefixTokens).toEqual({ status: 'ok', value: 48, ageMs: 1.5 });
    expect(o.prefillPressure.status).toBe('missing');
    expect(o.suspicions).toEqual([{ scope: 'prefix', code: 'event_gap' }]);
    expect(toWireObservation(target, p, opts).ages).toEqual({ indexMs: 11.5, loadMs: null, bookingMs: 6.5, collectedMs: 1.5 });
    expect(toRecordObservation(target, p, opts)).toMatchObject({ status: 'ok', workerId: W, overlapTokens: 48, hostOverlapTokens: 64, suspectReason: 'prefix:event_gap', prefillCapacityTokens: 2048 });
  });
  it('a recent snapshot restore is a load suspicion; a block-size mismatch makes K invalid', () => {
    const p: ProbeResult = { kind: 'ok', reply: reply({ snapshotRestoredAtMs: opts.nowMs - 1000, blockSize: 32 }), worker: worker(W), rttUs: 100 };
    const rep = toCandidateReport(target, p, opts);
    if (rep.kind !== 'observed') throw new Error('expected observed');
    expect(rep.observation.suspicions).toEqual([{ scope: 'load', code: 'restored_bookings_unknown' }]);
    expect(rep.observation.reusablePrefixTokens.status).toBe('invalid');
  });
  it('an empty pool is observed with missing values; a failed probe is unavailable', () => {
    const empty: ProbeResult = { kind: 'ok', reply: reply({ dynamoChoice: null, workers: [] }), worker: null, rttUs: 100 };
    const rep = toCandidateReport(target, empty, opts);
    expect(rep.kind === 'observed' && rep.observation.placement).toBeNull();
    expect(toRecordObservation(target, empty, opts).status).toBe('no_worker');
    const failed: ProbeResult = { kind: 'failed', status: 'unavailable', code: 'NATS_NO_RESPONDERS', reason: 'no responders', rttUs: 80 };
    expect(toCandidateReport(target, failed, opts)).toEqual({ kind: 'unavailable', cause: 'NATS_NO_RESPONDERS: no responders' });
    expect(toWireObservation(target, failed, opts).error).toEqual({ code: 'indexer_unavailable', reason: 'no responders' });
    expect(toRecordObservation(target, failed, opts)).toMatchObject({ status: 'unavailable', workerId: null });
  });
});

describe('vocabularies', () => {
  it('maps every rules reason and variant to a documented record value', () => {
    for (const r of REASONS) expect(DECISION_REASONS).toContain(RECORD_REASON[r]);
    for (const v of VARIANTS) expect(RECORD_VARIANTS).toContain(RECORD_VARIANT[v]);
    expect(replyReason('overrode')).toBe('overrode');
    expect(replyReason('fallback_local_limit')).toBe('fallback');
    expect(replyReason('kept_no_trigger')).toBe('kept');
  });
});

describe('local in-flight accounting', () => {
  it('counts per model, releases once, expires after the timeout', () => {
    const seen: [string, number][] = [];
    const f = new InFlight(1000, (m, n) => seen.push([m, n]));
    f.add('a', 'cap', 'p', 0);
    f.add('b', 'cap', 'p', 500);
    f.add('c', 'eff', 'q', 0);
    expect(f.count('cap')).toBe(2);
    expect(f.release('a')).toBe(true);
    expect(f.release('a')).toBe(false);
    expect(f.expire(1200).map((e) => e.model)).toEqual(['eff']);
    expect(f.count('cap')).toBe(1);
    expect(f.expire(1500).length).toBe(1);
    expect(f.count('cap')).toBe(0);
    expect(seen.at(-1)).toEqual(['cap', 0]);
  });
  it('a retried route with the same request id replaces its reservation', () => {
    const f = new InFlight(1000);
    f.add('a', 'cap', 'p', 0);
    f.add('a', 'eff', 'q', 0);
    expect([f.count('cap'), f.count('eff'), f.size]).toEqual([0, 1, 1]);
  });
});
