/**
 * Flat, JSON-friendly rows for JSON Lines and CSV exports. Columns are derived
 * from the Avro schema, not from the values, so every row of a kind has the
 * same columns in the same order. Flattening rules: README, "JSON Lines and CSV".
 */
import avro from 'avsc';
import { DECISION_RECORD_CURRENT, OUTCOME_RECORD_CURRENT } from './schemas';
import { ROLES } from './types';
import type { DecisionRecord, OutcomeRecord } from './types';

export type JsonScalar = string | number | boolean | null;
export type JsonRow = Record<string, JsonScalar>;

type Step = string | { readonly role: string };
interface Column {
  readonly name: string;
  readonly path: readonly Step[];
  /** Leaf is an array kept whole, serialised as JSON. */
  readonly json: boolean;
}

/** Walk the schema's avsc types (named types already resolved) and list leaf columns. */
function columnsOf(root: avro.Type): Column[] {
  const out: Column[] = [];
  const walk = (type: avro.Type, path: Step[], name: string): void => {
    if (type instanceof avro.types.UnwrappedUnionType || type instanceof avro.types.WrappedUnionType) {
      // Only nullable unions ([null, X]) appear in our schemas.
      const branch = type.types.find((b) => b.typeName !== 'null');
      if (branch === undefined) return;
      type = branch;
    }
    if (type instanceof avro.types.RecordType) {
      for (const f of type.fields) walk(f.type, [...path, f.name], name ? `${name}.${f.name}` : f.name);
      return;
    }
    if (type instanceof avro.types.ArrayType) {
      const items = type.itemsType;
      if (items instanceof avro.types.RecordType && items.fields.some((f) => f.name === 'role')) {
        for (const role of ROLES) {
          for (const f of items.fields) if (f.name !== 'role') walk(f.type, [...path, { role }, f.name], `${name}.${role}.${f.name}`);
        }
        return;
      }
      out.push({ name, path, json: true });
      return;
    }
    // fixed (u64), enums, primitives with logical types: leaves.
    out.push({ name, path, json: false });
  };
  walk(root, [], '');
  return out;
}

const DECISION_COLUMN_DEFS = columnsOf(DECISION_RECORD_CURRENT.type);
const OUTCOME_COLUMN_DEFS = columnsOf(OUTCOME_RECORD_CURRENT.type);

/** CSV header / JSON row keys for decision records, in schema order. */
export const DECISION_CSV_COLUMNS: readonly string[] = Object.freeze(DECISION_COLUMN_DEFS.map((c) => c.name));
/** CSV header / JSON row keys for outcome records (the embedded decision under `decision.`). */
export const OUTCOME_CSV_COLUMNS: readonly string[] = Object.freeze(OUTCOME_COLUMN_DEFS.map((c) => c.name));

function bigintSafe(_key: string, v: unknown): unknown {
  return typeof v === 'bigint' ? v.toString(10) : v;
}

function leaf(v: unknown, json: boolean): JsonScalar {
  if (v === null || v === undefined) return null;
  if (json) return JSON.stringify(v, bigintSafe);
  if (typeof v === 'bigint') return v.toString(10);
  if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  return JSON.stringify(v, bigintSafe);
}

function get(root: unknown, path: readonly Step[]): unknown {
  let cur: unknown = root;
  for (const step of path) {
    if (cur === null || cur === undefined) return null;
    if (typeof step === 'string') cur = (cur as Record<string, unknown>)[step];
    else cur = Array.isArray(cur) ? cur.find((x: { role?: unknown }) => x?.role === step.role) : undefined;
  }
  return cur;
}

function rowOf(record: unknown, defs: readonly Column[]): JsonRow {
  const row: JsonRow = {};
  for (const c of defs) row[c.name] = leaf(get(record, c.path), c.json);
  return row;
}

export function outcomeToJsonRow(record: OutcomeRecord): JsonRow {
  return rowOf(record, OUTCOME_COLUMN_DEFS);
}

/** Flatten either record kind (told apart by the outcome's `join` field). */
export function toJsonRow(record: DecisionRecord | OutcomeRecord): JsonRow {
  return 'join' in record ? outcomeToJsonRow(record) : rowOf(record, DECISION_COLUMN_DEFS);
}

/** RFC 4180 field: quoted only when it holds a comma, quote, CR or LF. Null is an empty field. */
function csvField(v: JsonScalar): string {
  if (v === null) return '';
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvHeader(columns: readonly string[]): string {
  return columns.map((c) => csvField(c)).join(',');
}

/** One CSV line (no terminator) for `row` in `columns` order. */
export function toCsvLine(row: JsonRow, columns: readonly string[]): string {
  return columns.map((c) => csvField(row[c] ?? null)).join(',');
}
