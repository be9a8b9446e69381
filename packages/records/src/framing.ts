/**
 * Avro single-object encoding (Avro spec, "Single-object encoding"):
 *
 *   offset 0  2 bytes  marker C3 01
 *   offset 2  8 bytes  CRC-64-AVRO fingerprint of the writer schema's
 *                      Parsing Canonical Form, little-endian
 *   offset 10 ...      Avro binary encoding of the value under that schema
 *
 * The fingerprint lets a reader pick the exact writer schema and resolve it
 * to its own current schema, so old and new writers can share a topic. There
 * is no length field: the body must end exactly at the end of the message.
 */
import avro from 'avsc';
import type { RecordSchema } from './schemas';
import { DECISION_RECORD_CURRENT, DECISION_RECORD_VERSIONS, OUTCOME_RECORD_CURRENT, OUTCOME_RECORD_VERSIONS, SINGLE_OBJECT_HEADER_LENGTH, SINGLE_OBJECT_MARKER } from './schemas';
import { fingerprintHex } from './fingerprint';
import type { DecisionRecord, OutcomeRecord } from './types';

/** A value did not match the schema it was encoded with: a bug in the writer, never input data. */
export class RecordEncodeError extends Error {
  readonly code = 'RECORD_INVALID' as const;
  readonly retryable = false;
  constructor(
    readonly schema: string,
    /** Dotted paths of the offending fields (`observations.0.workerId`). */
    readonly paths: readonly string[],
  ) {
    super(`value does not match ${schema}: invalid at ${paths.join(', ') || '(root)'}`);
    this.name = 'RecordEncodeError';
  }
}

/**
 * Encode `value` as one single-object message. Throws `RecordEncodeError`
 * when the value does not fit the schema: writers build records from typed
 * code, so a mismatch is a bug to surface at once, not data to route.
 */
export function encodeSingleObject<T>(schema: RecordSchema<T>, value: T): Buffer {
  // Validate before writing: avsc's writers coerce some wrong values (a
  // missing boolean becomes false) instead of throwing, which would record a
  // silently wrong fact.
  if (!schema.type.isValid(value)) {
    // Again, collecting the paths: a hook on every check would slow the valid case.
    const paths: string[] = [];
    schema.type.isValid(value, { errorHook: (path: string[]) => void paths.push(path.join('.')) });
    throw new RecordEncodeError(`${schema.fullName} v${schema.version}`, paths);
  }
  return Buffer.concat([schema.header, schema.type.toBuffer(value)]);
}

export type RecordRejectionCode =
  | 'RECORD_TRUNCATED'
  | 'RECORD_BAD_MARKER'
  | 'RECORD_UNKNOWN_FINGERPRINT'
  | 'RECORD_TRAILING_BYTES'
  | 'RECORD_MALFORMED';

/** Why a message was refused. None is retryable: the same bytes fail the same way. */
export interface RecordRejection {
  readonly ok: false;
  readonly code: RecordRejectionCode;
  readonly reason: string;
  readonly retryable: false;
}

export interface RecordDecoded<T> {
  readonly ok: true;
  /** The value in the reader's (current) shape. */
  readonly value: T;
  /** The schema version that wrote it. */
  readonly writer: RecordSchema<unknown>;
}

export type DecodeResult<T> = RecordDecoded<T> | RecordRejection;

interface WriterEntry {
  readonly schema: RecordSchema<unknown>;
  /** avsc resolver from this writer to the reader; built once, reused per message. */
  readonly resolver: avro.Resolver;
}

/**
 * Fingerprint → writer schema, each resolved to one reader schema. Built once
 * at start-up: resolver construction is the expensive part of schema
 * resolution and fails (throws) for writers the reader cannot read, which is
 * a configuration error to catch before serving.
 */
export class SchemaRegistry<T> {
  private readonly byFingerprint = new Map<bigint, WriterEntry>();

  constructor(
    readonly reader: RecordSchema<T>,
    writers: readonly RecordSchema<unknown>[],
  ) {
    for (const w of writers) {
      const prior = this.byFingerprint.get(w.fingerprint);
      if (prior !== undefined && prior.schema.canonicalForm !== w.canonicalForm) {
        // Astronomically unlikely, but two schemas behind one fingerprint
        // would make decoding ambiguous: refuse to start.
        throw new Error(`fingerprint collision between ${prior.schema.file} and ${w.file}`);
      }
      this.byFingerprint.set(w.fingerprint, { schema: w, resolver: reader.type.createResolver(w.type) });
    }
  }

  /** Writer versions this registry accepts. */
  get writers(): RecordSchema<unknown>[] {
    return [...this.byFingerprint.values()].map((e) => e.schema);
  }

  lookup(fingerprint: bigint): WriterEntry | undefined {
    return this.byFingerprint.get(fingerprint);
  }
}

/** Reads every DecisionRecord version this build ships, as the current shape. */
export const DECISION_REGISTRY: SchemaRegistry<DecisionRecord> = new SchemaRegistry(DECISION_RECORD_CURRENT, DECISION_RECORD_VERSIONS);

/** Reads every OutcomeRecord version this build ships (v1, v2), as the current shape (v2). */
export const OUTCOME_REGISTRY: SchemaRegistry<OutcomeRecord> = new SchemaRegistry(OUTCOME_RECORD_CURRENT, OUTCOME_RECORD_VERSIONS);

function reject(code: RecordRejectionCode, reason: string): RecordRejection {
  return { ok: false, code, reason, retryable: false };
}

/**
 * Decode one single-object message into the registry's reader shape. Never
 * throws: every malformed input becomes a `RecordRejection` whose `code` is
 * stable (metric label, dead-letter header) and whose `reason` is for people.
 */
export function decodeSingleObject<T>(bytes: Uint8Array, registry: SchemaRegistry<T>): DecodeResult<T> {
  // View, not copy: avsc's Tap needs a Buffer, and messages can be large.
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < 2) return reject('RECORD_TRUNCATED', `message of ${buf.length} bytes is shorter than the 2-byte marker`);
  if (buf[0] !== SINGLE_OBJECT_MARKER[0] || buf[1] !== SINGLE_OBJECT_MARKER[1]) {
    return reject('RECORD_BAD_MARKER', `expected marker c301, found ${buf.subarray(0, 2).toString('hex')}`);
  }
  if (buf.length < SINGLE_OBJECT_HEADER_LENGTH) {
    return reject('RECORD_TRUNCATED', `message of ${buf.length} bytes is shorter than the ${SINGLE_OBJECT_HEADER_LENGTH}-byte header`);
  }
  const fingerprint = buf.readBigUInt64LE(2);
  const entry = registry.lookup(fingerprint);
  if (entry === undefined) {
    return reject(
      'RECORD_UNKNOWN_FINGERPRINT',
      `no known writer schema has fingerprint ${fingerprintHex(fingerprint)} (reader ${registry.reader.fullName}, knows ${registry.writers.map((w) => `v${w.version}=${w.fingerprintHex}`).join(', ')})`,
    );
  }
  let decoded: { value: unknown; offset: number };
  try {
    decoded = registry.reader.type.decode(buf, SINGLE_OBJECT_HEADER_LENGTH, entry.resolver);
  } catch (err) {
    // avsc throws on structurally impossible input: a union branch index out
    // of range, a negative length, a long beyond ±2^53 ("potential precision
    // loss"), or invalid UTF-8 handling in some paths.
    return reject('RECORD_MALFORMED', `body does not decode as ${entry.schema.file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (decoded.offset < 0) {
    return reject('RECORD_TRUNCATED', `body ends before a complete ${entry.schema.file} value (${buf.length} bytes)`);
  }
  if (decoded.offset !== buf.length) {
    return reject('RECORD_TRAILING_BYTES', `${buf.length - decoded.offset} bytes follow a complete ${entry.schema.file} value`);
  }
  return { ok: true, value: decoded.value as T, writer: entry.schema };
}
