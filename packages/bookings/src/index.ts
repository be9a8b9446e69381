export {
  BookingLedger,
  DEFAULT_BOOKING_TTL_MS,
  DEFAULT_TOMBSTONE_CAPACITY,
  validateWorkerCapacity,
  type BookingLedgerOptions,
  type RankRef,
} from './ledger';
export {
  applyActiveSequenceEvent,
  type ActiveSequenceData,
  type ActiveSequenceInput,
  type ActiveSequenceOutcome,
} from './active-sequence';
export {
  RELEASE_REASONS,
  type BookInput,
  type BookOutcome,
  type BookingCounters,
  type BookingSource,
  type BookingView,
  type PrefillOutcome,
  type ReleaseOutcome,
  type ReleaseReason,
  type SetWorkerOutcome,
  type WorkerCapacity,
  type WorkerLoad,
  type WorkerLoadRecord,
} from './types';
