/**
 * One candidate's probe: the observe query to its pool's indexer and the
 * mapping of the answer into the shapes that need it. The mappings the offline
 * study shares (the rules' `CandidateReport`, records' `CandidateObservation`)
 * live in @vantage/decision-core; the route reply's view and the failed-query
 * mapping, which only this service needs, are here.
 */
import { plus, r3, round3, type MapOptions, type ProbeResult, type ProbeTarget } from '@vantage/decision-core';
import type { CandidateObservation as WireObservation } from '@vantage/protocol';
import type { VantageError } from '@vantage/runtime';

export {
  decodeObserveReply,
  suspicionsOf,
  toCandidateReport,
  toRecordObservation,
  type MapOptions,
  type ProbeResult,
  type ProbeTarget,
} from '@vantage/decision-core';

export function failedProbe(e: VantageError, rttUs: number): ProbeResult {
  const status = e.code === 'NATS_TIMEOUT' || e.code === 'DEADLINE_EXCEEDED' ? 'timeout' : e.code === 'NATS_NO_RESPONDERS' || e.code === 'NATS_REQUEST_FAILED' ? 'unavailable' : 'error';
  return { kind: 'failed', status, code: e.code, reason: e.message, rttUs };
}

/**
 * The route reply's view of one probe. Fact ages are the indexer's (relative
 * to its reply) plus the whole round trip, i.e. how old each fact is at
 * decision time; `collectedMs` is the collection age alone.
 */
export function toWireObservation(t: ProbeTarget, p: ProbeResult, o: MapOptions): WireObservation {
  const rttMs = round3(o.collectionAgeMs);
  const queryDurationUs = Math.round(p.rttUs);
  if (p.kind === 'failed' || p.worker === null || p.reply.dynamoChoice === null) {
    return {
      model: t.model,
      pool: t.pool,
      promptTokens: t.promptTokens,
      queryDurationUs,
      workerId: null,
      dpRank: null,
      schedulable: null,
      K: null,
      R: null,
      P: null,
      effectivePrefillTokens: null,
      hostOverlapBlocks: null,
      diskOverlapBlocks: null,
      activeBlocks: null,
      totalKvBlocks: null,
      pending: p.kind === 'ok' ? p.reply.pending : null,
      ages: { indexMs: null, loadMs: null, bookingMs: null, collectedMs: rttMs },
      error:
        p.kind === 'failed'
          ? { code: p.status === 'error' || p.code.startsWith('POOL_') ? p.code.toLowerCase() : p.status === 'timeout' ? 'indexer_timeout' : 'indexer_unavailable', reason: p.reason.slice(0, 1024) }
          : { code: 'no_worker', reason: `pool ${t.pool} offered no worker` },
    };
  }
  const w = p.worker;
  return {
    model: t.model,
    pool: t.pool,
    promptTokens: t.promptTokens,
    queryDurationUs,
    workerId: w.workerId,
    dpRank: w.dpRank,
    schedulable: w.schedulable,
    K: w.K,
    R: w.R,
    P: w.P,
    effectivePrefillTokens: w.effectivePrefillTokens,
    hostOverlapBlocks: w.hostOverlapBlocks,
    diskOverlapBlocks: w.diskOverlapBlocks,
    activeBlocks: w.activeBlocks,
    totalKvBlocks: w.totalKvBlocks,
    pending: p.reply.pending,
    ages: { indexMs: r3(plus(w.ages.indexMs, rttMs)), loadMs: r3(plus(w.ages.loadMs, rttMs)), bookingMs: r3(plus(w.ages.bookingMs, rttMs)), collectedMs: rttMs },
    error: null,
  };
}

