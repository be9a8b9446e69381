import { readFileSync } from 'node:fs';

/**
 * JSON Schemas (draft-07) of every message, read from `schemas/protocol/*.v1.json`, the single
 * source other languages read too (package README, "Schemas and evolution"). The limits below are
 * the ones those files state; a unit test checks that they agree.
 */

/** 2^17 blocks: 2M tokens at block size 16, beyond any context window we serve. */
export const MAX_HASHES = 131_072;
/** Most token ids a prompt may carry (`tokenIds` maxItems). */
export const MAX_TOKENS = 2_097_152;
/** Most worker records an observe reply may carry. */
export const MAX_WORKERS = 4096;
/** Longest `*Le64` string the schemas accept: base64 of MAX_HASHES u64s. */
export const MAX_LE64_CHARS = Math.ceil((MAX_HASHES * 8) / 3) * 4;

const FILES = [
  'observe-request.v1.json',
  'observe-reply.v1.json',
  'route-request.v1.json',
  'route-reply.v1.json',
  'booking-event.v1.json',
  'lifecycle-event.v1.json',
  'worker-registration.v1.json',
] as const;

export type ProtocolSchemaFile = (typeof FILES)[number];

const SCHEMA_DIR = new URL('../../../schemas/protocol/', import.meta.url);

/** Schema file name (under schemas/protocol/) → schema. */
export const PROTOCOL_SCHEMAS: Readonly<Record<ProtocolSchemaFile, object>> = Object.fromEntries(
  FILES.map((f) => [f, JSON.parse(readFileSync(new URL(f, SCHEMA_DIR), 'utf8')) as object]),
) as Record<ProtocolSchemaFile, object>;
