/**
 * The observe reply built from a pool observation (`PoolState.observe`), as the
 * indexer answers it, without any transport.
 */
import type { PoolObservation } from '@vantage/observation';
import type { ObserveReply, WorkerObservation as WireWorker } from '@vantage/protocol';

/** What the reply carries besides the observation itself. */
interface ReplyMeta {
  readonly nowMs: number;
  readonly queryDurationUs: number;
  readonly restoredAtMs: number | null;
  /** `choice`: list only the worker Dynamo's cost chose (pending work and the choice are still reported). */
  readonly workers?: 'all' | 'choice';
}

const age = (now: number, t: number | null | undefined): number | null => (t === null || t === undefined ? null : Math.max(0, now - t));

/**
 * The observe reply (schemas/protocol/observe-reply.v1.json) of a pool observation, as an object:
 * what the indexer encodes (its fast encoders write the same content, a test compares them) and what
 * the offline study hands the decision path for its simulated pools.
 */
export function observeReplyOf(o: PoolObservation, meta: ReplyMeta): ObserveReply {
  const now = meta.nowMs;
  let workers: WireWorker[];
  if (meta.workers !== 'choice') workers = o.workers.map((w, i) => workerOf(w, o.costs[i], now));
  else workers = o.chosenIndex < 0 ? [] : [workerOf(o.workers[o.chosenIndex]!, o.costs[o.chosenIndex], now)];
  return {
    pool: o.pool,
    blockSize: o.blockSize,
    queryDurationUs: Math.round(meta.queryDurationUs),
    atMs: now,
    workers,
    pending: o.pending,
    dynamoChoice: dynamoChoiceOf(o),
    snapshotRestoredAtMs: meta.restoredAtMs,
  };
}

/** One worker of the reply, from its observation and Dynamo's cost of it. */
function workerOf(w: PoolObservation['workers'][number], c: number | null | undefined, now: number): WireWorker {
  const m = w.match;
  return {
    workerId: w.workerId,
    dpRank: w.dpRank,
    // An unregistered worker has no advertised capacity; Dynamo would not route to it either.
    schedulable: w.schedulable === true,
    deviceOverlapBlocks: m?.deviceBlocks ?? 0,
    K: m?.deviceTokens ?? 0,
    hostOverlapBlocks: m ? m.hostBlocks : null,
    diskOverlapBlocks: m ? m.diskBlocks : null,
    anyTierOverlapBlocks: m ? m.anyBlocks : null,
    R: w.load.requests,
    trackedPrefillTokens: w.load.trackedPrefillTokens,
    P: w.load.prefillPressure,
    maxNumBatchedTokens: w.capacity ? w.capacity.maxNumBatchedTokens : null,
    effectivePrefillTokens: w.effectivePrefillTokens,
    newBlocks: w.newRequestBlocks,
    activeBlocks: w.load.activeBlocks,
    totalKvBlocks: w.load.totalKvBlocks,
    treeBlocks: m?.treeSize ?? 0,
    reported: w.report ? { activeDecodeBlocks: w.report.activeDecodeBlocks, activePrefillTokens: w.report.activePrefillTokens, kvUsedBlocks: w.report.kvUsedBlocks } : null,
    suspect: w.suspect ? { reason: w.suspect.reason, sinceMs: w.suspect.sinceMs } : null,
    ages: { indexMs: age(now, w.lastEventMs), loadMs: age(now, w.report?.atMs), bookingMs: age(now, w.load.lastChangeMs) },
    dynamoCost: c === undefined || c === null || !Number.isFinite(c) ? null : c,
    // Dynamo 1.6.1's forward-pass report: present only when the worker sent one (additive field).
    ...(w.forwardPass === null
      ? {}
      : {
          forwardPass: {
            scheduledRequests: w.forwardPass.scheduledRequests,
            scheduledPrefillTokens: w.forwardPass.scheduledPrefillTokens,
            scheduledDecodeKvTokens: w.forwardPass.scheduledDecodeKvTokens,
            queuedRequests: w.forwardPass.queuedRequests,
            queuedPrefillTokens: w.forwardPass.queuedPrefillTokens,
            wallTimeS: Number.isFinite(w.forwardPass.wallTimeS) ? w.forwardPass.wallTimeS : 0,
            ageMs: Math.max(0, now - w.forwardPass.atMs),
          },
        }),
    ...(w.recoveredAtMs === null ? {} : { recoveredAtMs: w.recoveredAtMs }),
  };
}

/**
 * The worker Dynamo's cost chose, with that cost. The policy's params are the chosen score's own
 * terms record, not a copy: every caller encodes it before the next selection.
 */
function dynamoChoiceOf(o: PoolObservation): ObserveReply['dynamoChoice'] {
  const chosen = o.selection.chosen;
  const cost = o.chosenIndex >= 0 ? o.costs[o.chosenIndex] : null;
  if (!chosen || cost === null || cost === undefined) return null;
  const s = o.selection.scores[chosen.index];
  return { workerId: chosen.workerId, dpRank: chosen.dpRank, cost, policy: { name: policyName(o.selection.reason), params: s ? s.terms : {} } };
}

/** `kv_router:<reason>`, one string per reason (the reply's writer then finds its bytes by identity). */
const policyNames = new Map<string, string>();
function policyName(reason: string): string {
  let name = policyNames.get(reason);
  if (name === undefined) policyNames.set(reason, (name = `kv_router:${reason}`));
  return name;
}

