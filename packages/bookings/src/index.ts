export {
  BookingLedger,
  type RankRef,
} from './ledger';
export {
  applyActiveSequenceEvent,
  type ActiveSequenceInput,
} from './active-sequence';
export {
  RELEASE_REASONS,
  type BookInput,
  type ReleaseReason,
  type WorkerCapacity,
  type WorkerLoad,
  type WorkerLoadRecord,
} from './types';
