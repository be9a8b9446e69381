/**
 * TypeScript shapes of the records, field for field with the Avro schemas in
 * `schemas/avro/` (a test checks that every schema field appears here and
 * round-trips). u64 ids are `WorkerId` bigints; `long` fields are JS numbers
 * within ±(2^53 - 2), avsc's exact-long bound; `null` is Avro's null branch.
 * Enumerations are string-coded and their values documented in the README
 * ("String-coded enumerations"): writers are typed against the known values,
 * readers get `Open<Known>` and keep a default branch.
 */
import type { WorkerId } from '@vantage/types';

/** A documented value, or one added by a newer writer. `string & {}` keeps editor completion for the known ones. */
export type Open<Known extends string> = Known | (string & {});

export const ROLES = ['efficient', 'capable'] as const;
export type Role = (typeof ROLES)[number];

export const VARIANTS = ['baseline', 'request_count', 'count_prefill', 'cache_blind', 'cache_aware'] as const;
export type Variant = (typeof VARIANTS)[number];

export const DECISION_REASONS = [
  'baseline',
  'stage_capable',
  'kept',
  'overrode',
  'fallback_observe_failed',
  'fallback_destination_unschedulable',
  'fallback_observations_invalid',
  'fallback_observations_stale',
  'fallback_destination_limit',
  'fallback_local_limit',
  'fallback_prediction_invalid',
] as const;
export type DecisionReason = (typeof DECISION_REASONS)[number];

export type ObservationStatus = 'ok' | 'timeout' | 'error' | 'unavailable' | 'no_worker';

export type OutcomeStatus = 'completed' | 'cancelled' | 'failed' | 'timeout' | 'incomplete';
export type JoinClosedBy = 'complete' | 'deadline';
export type SourcePart = 'decision' | 'first_token' | 'done' | 'cancelled' | 'failed' | 'usage';

export interface ModelChoice {
  model: string;
  role: Open<Role>;
}

export interface GateChecks {
  passed: boolean;
  capableSchedulable: boolean | null;
  observationsValid: boolean | null;
  collectionAgeMs: number | null;
  maxAgeMs: number | null;
  withinMaxAge: boolean | null;
  capableBookedRequests: number | null;
  destinationLimit: number | null;
  destinationBelowLimit: boolean | null;
  localInFlight: number | null;
  localLimit: number | null;
  localBelowLimit: boolean | null;
}

export interface FactAges {
  selectionMs: number | null;
  overlapMs: number | null;
  bookingsMs: number | null;
  metricsMs: number | null;
  pendingMs: number | null;
}

export interface CandidateObservation {
  role: Open<Role>;
  model: string;
  routingGroup: string | null;
  status: Open<ObservationStatus>;
  error: string | null;
  workerId: WorkerId | null;
  dpRank: number | null;
  /** N */
  promptTokens: number | null;
  /** K */
  overlapTokens: number | null;
  /** R */
  bookedRequests: number | null;
  /** P */
  prefillPressure: number | null;
  bookedPrefillTokens: number | null;
  prefillCapacityTokens: number | null;
  hostOverlapTokens: number | null;
  diskOverlapTokens: number | null;
  effectivePrefillTokens: number | null;
  decodeBlocks: number | null;
  kvCapacityBlocks: number | null;
  pendingRequests: number | null;
  pendingTokens: number | null;
  ages: FactAges;
  suspectReason: string | null;
  collectionDurationUs: number | null;
}

export interface CandidatePrediction {
  role: Open<Role>;
  model: string;
  blindTtftMs: number | null;
  cacheTtftMs: number | null;
}

/** `ai.vantage.records.DecisionRecord` v1. */
export interface DecisionRecord {
  recordId: string;
  requestId: string;
  sessionId: string;
  /** Unix epoch ms (`timestamp-millis`). */
  timestampMs: number;
  parameterSetVersion: string;
  variant: Open<Variant>;
  stageProposal: ModelChoice;
  finalChoice: ModelChoice;
  reason: Open<DecisionReason>;
  detail: string | null;
  couldAct: boolean;
  triggered: boolean;
  gate: GateChecks | null;
  observations: CandidateObservation[];
  predictions: CandidatePrediction[];
  advantageMs: number | null;
  chosenWorkerId: WorkerId | null;
  chosenDpRank: number | null;
  endpoint: string | null;
  observeDurationUs: number | null;
  decisionDurationUs: number;
  decisionInstanceId: string;
  background: boolean;
}

export interface JoinInfo {
  hasDecision: boolean;
  hasFirstToken: boolean;
  hasTerminal: boolean;
  hasUsage: boolean;
  eventCount: number;
  duplicateEvents: number;
  ignoredEvents: number;
  closedBy: Open<JoinClosedBy>;
  joinLatencyMs: number | null;
}

export interface SourcePosition {
  stream: string;
  /** JetStream stream sequence (u64 in NATS, but far below 2^53 in any real stream). */
  sequence: number;
  part: Open<SourcePart>;
}

/** `ai.vantage.records.OutcomeRecord` v1. */
export interface OutcomeRecordV1 {
  requestId: string;
  sessionId: string | null;
  decision: DecisionRecord | null;
  arrivalMs: number | null;
  firstTokenMs: number | null;
  endMs: number | null;
  ttftMs: number | null;
  latencyMs: number | null;
  status: Open<OutcomeStatus>;
  error: string | null;
  inputTokens: number | null;
  outputTokens: number | null;
  cachedTokens: number | null;
  uncachedInputTokens: number | null;
  routingOverheadUs: number | null;
  background: boolean;
  join: JoinInfo;
  sources: SourcePosition[];
}

/** `ai.vantage.records.OutcomeRecord` v2 (current): v1 plus `servedPool`. */
export interface OutcomeRecord extends OutcomeRecordV1 {
  servedPool: string | null;
}
