import type { WorkerId } from '@vantage/types';
import type { BookingLedger } from './ledger';
import type { BookOutcome, PrefillOutcome, ReleaseOutcome } from './types';

/**
 * Domain form of Dynamo's `ActiveSequenceEvent` (router replica sync, topic
 * `active_sequences_events`), which is how another router's bookings become
 * visible. Wire shape (lib/kv-router protocols), both generations:
 *
 *   { request_id, worker: { worker_id: u64, dp_rank: u32 }, router_id: u64, lora_name: string|null,
 *     data: {"AddRequest": { token_sequence: [u64]|null,
 *                            isl: usize, overlap: u32,                                   (older)
 *                            track_prefill_tokens: bool (default true),                  (newer)
 *                            expected_output_tokens: u32|null,
 *                            prefill_load_hint: { initial_effective_prefill_tokens, expected_prefill_duration }|null }}
 *         | "Free" | "MarkPrefillCompleted" }
 *
 * The wire decoder maps into this type; this module maps it onto the ledger.
 */
export interface ActiveSequenceInput {
  readonly requestId: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  /** Publisher identity (router id, or worker id for worker-origin completion marks). */
  readonly routerId: bigint;
  readonly loraName: string | null;
  readonly data: ActiveSequenceData;
}

export type ActiveSequenceData =
  | {
      readonly kind: 'add_request';
      /** Sequence hashes of the prompt's blocks; null when the router does not track blocks. */
      readonly tokenSequence: BigUint64Array | null;
      /** Prompt tokens, present in older releases. */
      readonly isl?: number | null;
      /** Device overlap blocks at selection, present in older releases. */
      readonly overlap?: number | null;
      /** False when the publishing router does not count this request's prefill (default true). */
      readonly trackPrefillTokens?: boolean;
      readonly expectedOutputTokens: number | null;
      readonly prefillLoadHint: {
        readonly initialEffectivePrefillTokens: number;
        readonly expectedPrefillDurationMs: number | null;
      } | null;
    }
  | { readonly kind: 'free' }
  | { readonly kind: 'mark_prefill_completed' };

type ActiveSequenceOutcome =
  | { readonly kind: 'add_request'; readonly outcome: BookOutcome }
  | { readonly kind: 'free'; readonly outcome: ReleaseOutcome }
  | { readonly kind: 'mark_prefill_completed'; readonly outcome: PrefillOutcome };

/**
 * Apply one of Dynamo's active-sequence events to the ledger.
 *
 * Prefill tokens follow the publishing router's own accounting: nothing when it
 * does not track prefill for the request, else its `initial_effective_prefill_tokens`
 * hint, else (older releases) `max(0, isl - overlap * blockSize)` computed by the
 * ledger. A newer event with neither hint nor isl carries no prefill figure; it
 * is booked with 0 rather than an invented one. `Free` cannot say why the
 * stream ended, so it releases as `completed`.
 */
export function applyActiveSequenceEvent(ledger: BookingLedger, ev: ActiveSequenceInput, nowMs: number): ActiveSequenceOutcome {
  const d = ev.data;
  switch (d.kind) {
    case 'add_request': {
      let prefillTokens: number | undefined;
      if (d.trackPrefillTokens === false) prefillTokens = 0;
      else if (d.prefillLoadHint !== null) prefillTokens = d.prefillLoadHint.initialEffectivePrefillTokens;
      else if (d.isl == null) prefillTokens = 0;
      const outcome = ledger.book({
        requestId: ev.requestId,
        workerId: ev.workerId,
        dpRank: ev.dpRank,
        promptTokens: d.isl ?? 0,
        overlapBlocks: d.overlap ?? 0,
        sequenceHashes: d.tokenSequence ?? EMPTY,
        expectedOutputTokens: d.expectedOutputTokens,
        ...(prefillTokens === undefined ? {} : { prefillTokens }),
        source: 'dynamo_router',
        nowMs,
      });
      return { kind: 'add_request', outcome };
    }
    case 'free':
      return { kind: 'free', outcome: ledger.release(ev.requestId, 'completed', nowMs) };
    case 'mark_prefill_completed':
      return { kind: 'mark_prefill_completed', outcome: ledger.markPrefillComplete(ev.requestId, nowMs) };
  }
}

const EMPTY = new BigUint64Array(0);
