/**
 * The schemas this build ships, loaded from `schemas/avro/*.avsc`, the single
 * source of truth other languages read too (one self-contained file per fingerprint).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import avro from 'avsc';
import { crc64AvroOfString, fingerprintBytesLE, fingerprintHex } from './fingerprint';
import { AVSC_OPTIONS } from './u64';
import type { DecisionRecord, OutcomeRecord, OutcomeRecordV1 } from './types';

/** Directory holding the `.avsc` files (repository `schemas/avro/`). */
export const AVRO_SCHEMA_DIR = fileURLToPath(new URL('../../../schemas/avro/', import.meta.url));

/** Single-object encoding marker (Avro spec): 0xC3 0x01. */
export const SINGLE_OBJECT_MARKER = Object.freeze([0xc3, 0x01] as const);
/** Marker (2) + little-endian CRC-64-AVRO fingerprint (8). */
export const SINGLE_OBJECT_HEADER_LENGTH = 10;

/**
 * One shipped schema version. `T` is the TypeScript shape its values have,
 * which lets `encodeSingleObject` type-check what is written.
 */
export interface RecordSchema<T> {
  /** Avro full name, e.g. `ai.vantage.records.OutcomeRecord`. */
  readonly fullName: string;
  readonly version: number;
  /** File name under `schemas/avro/`. */
  readonly file: string;
  /** The schema JSON as written in the file (docs and defaults included). */
  readonly json: unknown;
  readonly type: avro.Type;
  /** Parsing Canonical Form: what the fingerprint is taken over. */
  readonly canonicalForm: string;
  /** CRC-64-AVRO of the canonical form, unsigned. */
  readonly fingerprint: bigint;
  /** Little-endian hex of the fingerprint (fastavro's and Avro tooling's notation). */
  readonly fingerprintHex: string;
  /** The 10 header bytes every single-object message of this version starts with. */
  readonly header: Buffer;
  /** Phantom: never set, only carries `T`. */
  readonly __value?: T;
}

/** Read a schema file, parse it with this package's logical types and derive its identity. */
function load<T>(file: string, version: number): RecordSchema<T> {
  const json: unknown = JSON.parse(readFileSync(AVRO_SCHEMA_DIR + file, 'utf8'));
  const type = avro.Type.forSchema(json as avro.Schema, { ...AVSC_OPTIONS });
  // avsc's default `schema()` export is the Avro Parsing Canonical Form
  // (full names, only name/type/fields/symbols/items/values/size, spec key
  // order, no whitespace); the independent test checks it against fastavro.
  const canonicalForm = JSON.stringify(type.schema());
  const fingerprint = crc64AvroOfString(canonicalForm);
  const header = Buffer.concat([Buffer.from(SINGLE_OBJECT_MARKER), fingerprintBytesLE(fingerprint)]);
  const fullName = (type as avro.Type & { name?: string }).name ?? type.typeName;
  return Object.freeze({ fullName, version, file, json, type, canonicalForm, fingerprint, fingerprintHex: fingerprintHex(fingerprint), header });
}

export const DECISION_RECORD_V1 = load<DecisionRecord>('decision-record.v1.avsc', 1);
export const OUTCOME_RECORD_V1 = load<OutcomeRecordV1>('outcome-record.v1.avsc', 1);
export const OUTCOME_RECORD_V2 = load<OutcomeRecord>('outcome-record.v2.avsc', 2);

/** What writers emit today. @alias */
export const DECISION_RECORD_CURRENT = DECISION_RECORD_V1;
/** @alias */
export const OUTCOME_RECORD_CURRENT = OUTCOME_RECORD_V2;

/** Every version this build can read, oldest first. */
export const DECISION_RECORD_VERSIONS: readonly RecordSchema<unknown>[] = Object.freeze([DECISION_RECORD_V1]);
export const OUTCOME_RECORD_VERSIONS: readonly RecordSchema<unknown>[] = Object.freeze([OUTCOME_RECORD_V1, OUTCOME_RECORD_V2]);
