/**
 * @vantage/records: Avro schemas (from `schemas/avro/`), single-object
 * framing, record types and builders for decision and outcome records.
 */
export type {
  Variant,
  DecisionReason,
  SourcePart,
  GateChecks,
  FactAges,
  CandidateObservation,
  CandidatePrediction,
  DecisionRecord,
  OutcomeRecordV1,
  OutcomeRecord,
} from './types';
export { VARIANTS, DECISION_REASONS } from './types';

export type { RecordSchema } from './schemas';
export { DECISION_RECORD_CURRENT, OUTCOME_RECORD_CURRENT } from './schemas';

export type { RecordRejectionCode, DecodeResult } from './framing';
export { encodeSingleObject, decodeSingleObject, RecordEncodeError, SchemaRegistry, DECISION_REGISTRY, OUTCOME_REGISTRY } from './framing';

export type { LifecycleEventInput } from './outcome';
export { joinOutcome } from './outcome';

export type { JsonRow } from './json';
export { toJsonRow, outcomeToJsonRow, DECISION_CSV_COLUMNS, OUTCOME_CSV_COLUMNS, csvHeader, toCsvLine } from './json';

export type { RowProblem } from './rows';
export { readJsonRows, asRowObject } from './rows';
