/**
 * @vantage/records: Avro schemas (from `schemas/avro/`), single-object
 * framing, record types and builders for decision and outcome records.
 */
export type {
  Open,
  Role,
  Variant,
  DecisionReason,
  ObservationStatus,
  OutcomeStatus,
  JoinClosedBy,
  SourcePart,
  ModelChoice,
  GateChecks,
  FactAges,
  CandidateObservation,
  CandidatePrediction,
  DecisionRecord,
  JoinInfo,
  SourcePosition,
  OutcomeRecordV1,
  OutcomeRecord,
} from './types';
export { ROLES, VARIANTS, DECISION_REASONS, OBSERVATION_STATUSES, OUTCOME_STATUSES, JOIN_CLOSED_BY, SOURCE_PARTS } from './types';

export { crc64Avro, crc64AvroOfString, fingerprintBytesLE, fingerprintHex } from './fingerprint';
export { U64Type, U64_LOGICAL_TYPE } from './u64';

export type { RecordSchema } from './schemas';
export {
  AVRO_SCHEMA_DIR,
  SINGLE_OBJECT_MARKER,
  SINGLE_OBJECT_HEADER_LENGTH,
  defineRecordSchema,
  DECISION_RECORD_V1,
  OUTCOME_RECORD_V1,
  OUTCOME_RECORD_V2,
  DECISION_RECORD_CURRENT,
  OUTCOME_RECORD_CURRENT,
  DECISION_RECORD_VERSIONS,
  OUTCOME_RECORD_VERSIONS,
} from './schemas';

export type { RecordRejectionCode, RecordRejection, RecordDecoded, DecodeResult } from './framing';
export { encodeSingleObject, decodeSingleObject, invalidPaths, RecordEncodeError, SchemaRegistry } from './framing';
export { DECISION_REGISTRY, OUTCOME_REGISTRY } from './registries';

export type { LifecycleKind, LifecycleUsage, LifecycleEventInput, JoinOptions } from './outcome';
export { joinOutcome } from './outcome';

export type { JsonScalar, JsonRow } from './json';
export { toJsonRow, decisionToJsonRow, outcomeToJsonRow, DECISION_CSV_COLUMNS, OUTCOME_CSV_COLUMNS, csvHeader, toCsvLine } from './json';

export type { RowProblem, LineObject, JsonRowsRead } from './rows';
export { readJsonRows, asRowObject } from './rows';
