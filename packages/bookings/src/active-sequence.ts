import type { WorkerId } from '@vantage/types';
import type { BookingLedger } from './ledger';
import type { BookOutcome, PrefillOutcome, ReleaseOutcome } from './types';

/**
 * Dynamo's `ActiveSequenceEvent` (router replica sync), how another router's bookings become
 * visible; `@vantage/wire`'s decoded event is one (its wire layout is documented there).
 */
export interface ActiveSequenceInput {
  readonly requestId: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Publisher identity (router id, or worker id for worker-origin completion marks). */
  readonly routerId: bigint;
  readonly loraName: string | null;
  readonly data:
    | {
        readonly kind: 'add_request';
        /** Sequence hashes of the prompt's blocks; null when the router does not track blocks. */
        readonly tokenSequence: BigUint64Array | null;
        /** False when the publishing router does not count this request's prefill. */
        readonly trackPrefillTokens: boolean;
        readonly expectedOutputTokens: number | null;
        readonly prefillLoadHint: { readonly initialEffectivePrefillTokens: number } | null;
      }
    | { readonly kind: 'free' }
    | { readonly kind: 'mark_prefill_completed' };
}

/**
 * Apply one of Dynamo's active-sequence events to the ledger. Prefill tokens follow the publishing
 * router's own accounting: its `initial_effective_prefill_tokens` hint, else nothing (it does not
 * track prefill for the request, or sent no figure: booked with 0 rather than an invented one).
 * `Free` cannot say why the stream ended, so it releases as `completed`. Returns the ledger's outcome.
 */
export function applyActiveSequenceEvent(ledger: BookingLedger, ev: ActiveSequenceInput, nowMs: number): BookOutcome | ReleaseOutcome | PrefillOutcome {
  const d = ev.data;
  switch (d.kind) {
    case 'add_request':
      return ledger.book({
        requestId: ev.requestId,
        workerId: ev.workerId,
        dpRank: ev.dpRank,
        promptTokens: 0,
        overlapBlocks: 0,
        sequenceHashes: d.tokenSequence ?? EMPTY,
        expectedOutputTokens: d.expectedOutputTokens,
        prefillTokens: d.trackPrefillTokens && d.prefillLoadHint !== null ? d.prefillLoadHint.initialEffectivePrefillTokens : 0,
        source: 'dynamo_router',
        nowMs,
      });
    case 'free':
      return ledger.release(ev.requestId, 'completed', nowMs);
    case 'mark_prefill_completed':
      return ledger.markPrefillComplete(ev.requestId, nowMs);
  }
}

const EMPTY = new BigUint64Array(0);
