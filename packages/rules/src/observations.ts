import type { WorkerId } from '@vantage/types';

/**
 * What the decision service collects from the indexer of one candidate model (seed 000, "The
 * observations"), in the shape the rules consume. The four statuses of `Observed<T>` and what the
 * gate does with each: README.md, "Inputs". `stale` exists because a fresh answer does not prove
 * the worker's own events are current (seed 000).
 */
export type Observed<T> =
  | { readonly status: 'ok'; readonly value: T; readonly ageMs: number }
  | { readonly status: 'stale'; readonly value: T; readonly ageMs: number; readonly cause?: string }
  | { readonly status: 'invalid'; readonly ageMs?: number; readonly cause: string }
  | { readonly status: 'missing'; readonly cause?: string };

/** Convenience constructors (used by adapters and tests). */
export const observed = {
  ok<T>(value: T, ageMs: number): Observed<T> {
    return { status: 'ok', value, ageMs };
  },
  stale<T>(value: T, ageMs: number, cause?: string): Observed<T> {
    return cause === undefined ? { status: 'stale', value, ageMs } : { status: 'stale', value, ageMs, cause };
  },
  invalid<T>(cause: string, ageMs?: number): Observed<T> {
    return ageMs === undefined ? { status: 'invalid', cause } : { status: 'invalid', cause, ageMs };
  },
  missing<T>(cause?: string): Observed<T> {
    return cause === undefined ? { status: 'missing' } : { status: 'missing', cause };
  },
} as const;

/** Which facts an index suspicion undermines: K (`prefix`), or R and P (`load`); README.md, "Inputs". */
export type SuspicionScope = 'prefix' | 'load';

export interface IndexSuspicion {
  readonly scope: SuspicionScope;
  /** Stable short code from the indexer, e.g. `event_gap`, `unknown_parent`, `bookings_expired`. */
  readonly code: string;
}

/** The worker placement Dynamo's own selection would choose for this prompt. */
export interface Placement {
  readonly workerId: WorkerId;
  readonly dpRank: number;
}

/** One candidate model's observation, for the worker/rank Dynamo would pick. */
export interface CandidateObservation {
  /** Model (pool) name; must match the parameter set's model for this role. */
  readonly model: string;
  /** The selected worker and rank; null when the pool had no worker to offer. */
  readonly placement: Placement | null;
  /** Whether that worker can take a request now (registered, not draining). */
  readonly schedulable: Observed<boolean>;
  /** N: prompt tokens after this model's chat template and tokenizer. */
  readonly promptTokens: Observed<number>;
  /** K: reusable device-tier (GPU) prefix tokens on the selected worker/rank. */
  readonly reusablePrefixTokens: Observed<number>;
  /** R: outstanding requests booked against the worker/rank, executing ones included. */
  readonly bookedRequests: Observed<number>;
  /**
   * P: tracked cache-adjusted prefill tokens / the worker's advertised
   * `max_num_batched_tokens`. `missing` when the capacity is not advertised:
   * an unknown capacity stays unknown rather than becoming a guess.
   */
  readonly prefillPressure: Observed<number>;
  /** Index suspicions about this worker, empty when the index vouches for it. */
  readonly suspicions: readonly IndexSuspicion[];
}

/**
 * One candidate's report: either the indexer answered, or it did not (timeout,
 * no responder). The decision service builds `unavailable` itself; keeping it
 * distinct from "answered with missing values" lets analysis separate an
 * outage from a worker the index knows nothing about.
 */
export type CandidateReport =
  | { readonly kind: 'observed'; readonly observation: CandidateObservation }
  | { readonly kind: 'unavailable'; readonly cause: string };

export type Role = 'efficient' | 'capable';

/** The names the decision uses for inputs, in reasons and records. */
export type InputName = 'schedulable' | 'N' | 'K' | 'R' | 'P' | 'model';

/** Everything one decision reads besides the parameter set. */
export interface DecisionInput {
  /** Stage's proposal. */
  readonly proposal: Role;
  readonly efficient: CandidateReport;
  readonly capable: CandidateReport;
  /**
   * Calls this process currently has in flight to the capable pool: local,
   * temporary accounting for the local limit, not decision history.
   */
  readonly localCapableInFlight: number;
}
