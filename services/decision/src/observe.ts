/**
 * One candidate's probe: the observe query to its pool's indexer and the
 * mapping of the answer into the shapes that need it. The mappings the offline
 * study shares (the rules' `CandidateReport`, records' `CandidateObservation`)
 * live in @vantage/decision-core; the route reply's view and the failed-query
 * mapping, which only this service needs, are here.
 */
import { plus, r3, round3, type MapOptions, type ProbeResult, type ProbeTarget } from '@vantage/decision-core';
import { candidateObservation, NO_WORKER_FACTS, type CandidateObservation as WireObservation } from '@vantage/protocol';
import type { VantageError } from '@vantage/runtime';

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
    const error =
      p.kind === 'ok'
        ? { code: 'no_worker', reason: `pool ${t.pool} offered no worker` }
        : {
            code:
              p.status === 'error' || p.code.startsWith('POOL_')
                ? p.code.toLowerCase()
                : p.status === 'timeout'
                  ? 'indexer_timeout'
                  : 'indexer_unavailable',
            reason: p.reason.slice(0, 1024),
          };
    const ages = { indexMs: null, loadMs: null, bookingMs: null, collectedMs: rttMs };
    const pending = p.kind === 'ok' ? p.reply.pending : null;
    return candidateObservation(t, queryDurationUs, null, NO_WORKER_FACTS, pending, ages, error);
  }
  const w = p.worker;
  const ages = {
    indexMs: r3(plus(w.ages.indexMs, rttMs)),
    loadMs: r3(plus(w.ages.loadMs, rttMs)),
    bookingMs: r3(plus(w.ages.bookingMs, rttMs)),
    collectedMs: rttMs,
  };
  return candidateObservation(t, queryDurationUs, w.workerId, w, p.reply.pending, ages, null);
}
