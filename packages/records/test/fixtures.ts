// Sample records shared by the tests: full-range u64 ids, nulls in every
// nullable position somewhere, and non-ASCII text.
import type { WorkerId } from '@vantage/types';
import type { CandidateObservation, DecisionRecord, FactAges, LifecycleEventInput } from '../src/index';

export const BIG_WORKER = 0xfedc_ba98_7654_3210n as WorkerId; // >= 2^63
export const MAX_WORKER = 0xffff_ffff_ffff_ffffn as WorkerId; // 2^64 - 1
export const EDGE_WORKER = 0x8000_0000_0000_0000n as WorkerId; // exactly 2^63

const noAges: FactAges = { selectionMs: null, overlapMs: null, bookingsMs: null, metricsMs: null, pendingMs: null };

export function observation(over: Partial<CandidateObservation> = {}): CandidateObservation {
  return {
    role: 'efficient',
    model: 'qwen3-8b',
    routingGroup: null,
    status: 'ok',
    error: null,
    workerId: BIG_WORKER,
    dpRank: 0,
    promptTokens: 100_000,
    overlapTokens: 90_000,
    bookedRequests: 4,
    prefillPressure: 2,
    bookedPrefillTokens: 16_000,
    prefillCapacityTokens: 8_000,
    hostOverlapTokens: 95_000,
    diskOverlapTokens: null,
    effectivePrefillTokens: 10_512.5,
    decodeBlocks: 1_200,
    kvCapacityBlocks: 40_000,
    pendingRequests: 0,
    pendingTokens: 0,
    ages: { selectionMs: 1.25, overlapMs: 3.5, bookingsMs: 0.75, metricsMs: 250, pendingMs: null },
    suspectReason: null,
    collectionDurationUs: 850,
    ...over,
  };
}

export function decision(over: Partial<DecisionRecord> = {}): DecisionRecord {
  return {
    recordId: 'd-0001',
    requestId: 'req-1',
    sessionId: 'sess-α',
    timestampMs: 1_732_000_000_000,
    parameterSetVersion: 'ps-2024-11-19.1',
    variant: 'cache_aware',
    stageProposal: { model: 'qwen3-8b', role: 'efficient' },
    finalChoice: { model: 'qwen3-235b', role: 'capable' },
    reason: 'overrode',
    detail: 'advantage 500ms > delta 200ms',
    couldAct: true,
    triggered: true,
    gate: {
      passed: true,
      capableSchedulable: true,
      observationsValid: true,
      collectionAgeMs: 3.5,
      maxAgeMs: 500,
      withinMaxAge: true,
      capableBookedRequests: 2,
      destinationLimit: 8,
      destinationBelowLimit: true,
      localInFlight: 1,
      localLimit: 16,
      localBelowLimit: true,
    },
    observations: [
      observation(),
      observation({ role: 'capable', model: 'qwen3-235b', workerId: MAX_WORKER, dpRank: 3, suspectReason: 'event gap on worker 7 — resync pending ✓', ages: noAges }),
    ],
    predictions: [
      { role: 'efficient', model: 'qwen3-8b', blindTtftMs: 1400.25, cacheTtftMs: 1400 },
      { role: 'capable', model: 'qwen3-235b', blindTtftMs: null, cacheTtftMs: 900 },
    ],
    advantageMs: 500,
    chosenWorkerId: MAX_WORKER,
    chosenDpRank: 3,
    endpoint: 'dyn://prod.capable.generate',
    observeDurationUs: 1_900,
    decisionDurationUs: 2_400,
    decisionInstanceId: 'decision-7f3a',
    background: false,
    ...over,
  };
}

/** A baseline decision: no probes, every nullable field null. */
export function baselineDecision(over: Partial<DecisionRecord> = {}): DecisionRecord {
  return decision({
    recordId: 'd-base',
    variant: 'baseline',
    finalChoice: { model: 'qwen3-8b', role: 'efficient' },
    reason: 'baseline',
    detail: null,
    couldAct: false,
    triggered: false,
    gate: null,
    observations: [],
    predictions: [],
    advantageMs: null,
    chosenWorkerId: null,
    chosenDpRank: null,
    endpoint: null,
    observeDurationUs: null,
    ...over,
  });
}

export function ev(kind: LifecycleEventInput['kind'], atMs: number, over: Partial<LifecycleEventInput> = {}): LifecycleEventInput {
  return { requestId: 'req-1', sessionId: 'sess-α', pool: 'qwen3-235b', kind, atMs, ...over };
}

/** JSON with bigints as decimal strings: the comparison form for independent decoders. */
export function toComparableJson(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString(10) : x)));
}
