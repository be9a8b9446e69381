import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import type { ModelParameters, QTable } from './estimators';

/**
 * Parameter sets: the frozen tables, coefficients, thresholds, margins and
 * gate limits of one evaluation run (seed 000: "Tables, coefficients,
 * thresholds, margins and destination limits stay fixed during each
 * evaluation run"). The wire contract is
 * `schemas/parameter-set.v1.schema.json`; this module adds the checks JSON
 * Schema cannot state and the hot-swap holder the decision service uses.
 */

export const VARIANTS = ['stage', 'count', 'count_prefill', 'blind', 'cache'] as const;
export type Variant = (typeof VARIANTS)[number];

export const PARAMETER_SET_SCHEMA = 'vantage.parameter-set';
export const PARAMETER_SET_SCHEMA_VERSION = 1;

export interface Thresholds {
  /** Request-count threshold: trigger when R_efficient >= r. null disables the term. */
  readonly r: number | null;
  /** Prefill-pressure threshold: trigger when P_efficient > p. null disables the term. */
  readonly p: number | null;
}

export interface Margins {
  readonly deltaBlindMs: number;
  readonly deltaCacheMs: number;
}

export interface GateLimits {
  readonly maxAgeMs: number;
  readonly destinationLimit: number;
  readonly localLimit: number;
}

export interface ParameterSet {
  readonly schema: typeof PARAMETER_SET_SCHEMA;
  readonly schemaVersion: typeof PARAMETER_SET_SCHEMA_VERSION;
  readonly version: string;
  readonly createdAt: string;
  readonly variant: Variant;
  readonly models: { readonly efficient: ModelParameters; readonly capable: ModelParameters };
  readonly thresholds: Thresholds;
  readonly margins: Margins;
  readonly gate: GateLimits;
  readonly provenance?: Readonly<Record<string, unknown>>;
}

type ParameterSetResult =
  | { readonly ok: true; readonly value: ParameterSet }
  | { readonly ok: false; readonly errors: readonly string[] };

// Compiled once at module load: validation is then a plain function call, and
// a schema mistake fails every test at import rather than at the first reload.
// allErrors so that an operator sees every bad field of a file in one pass.
const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
// The wire contract lives with the repository's other schemas (schemas/), read as protocol and records read theirs.
const schemaJson = JSON.parse(readFileSync(new URL('../../../schemas/parameter-set.v1.schema.json', import.meta.url), 'utf8')) as object;
const validateSchema = ajv.compile(schemaJson);

function formatAjvError(e: ErrorObject): string {
  const at = e.instancePath === '' ? '/' : e.instancePath;
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `${at}: missing required property "${String(p.missingProperty)}"`;
    case 'additionalProperties':
      return `${at}: unknown property "${String(p.additionalProperty)}"`;
    case 'const':
      return `${at}: must be ${JSON.stringify(p.allowedValue)}`;
    case 'enum':
      return `${at}: must be one of ${JSON.stringify(p.allowedValues)}`;
    default:
      return `${at}: ${e.message ?? e.keyword}`;
  }
}

function isNumberArray(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'number');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Every non-finite number anywhere (possible in objects built in code, never in JSON text). */
function nonFinite(v: unknown, path: string, out: string[]): void {
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) out.push(`${path === '' ? '/' : path}: ${v} is not a finite number`);
  } else if (Array.isArray(v)) {
    v.forEach((x, i) => nonFinite(x, `${path}/${i}`, out));
  } else if (isRecord(v)) {
    for (const [k, x] of Object.entries(v)) nonFinite(x, `${path}/${k}`, out);
  }
}

function strictlyIncreasing(grid: readonly number[], path: string, out: string[]): void {
  for (let i = 1; i < grid.length; i++) {
    const a = grid[i - 1] as number;
    const b = grid[i] as number;
    if (!(b > a)) out.push(`${path}/${i}: ${b} must be greater than the previous point ${a} (grid strictly increasing)`);
  }
}

function checkQTable(q: unknown, path: string, out: string[]): void {
  if (!isRecord(q)) return;
  const { nGrid, fGrid, valuesMs } = q;
  if (isNumberArray(nGrid)) strictlyIncreasing(nGrid, `${path}/nGrid`, out);
  if (isNumberArray(fGrid)) {
    strictlyIncreasing(fGrid, `${path}/fGrid`, out);
    // The cache-blind estimator always reads Q(N, 0).
    if (fGrid.length > 0 && fGrid[0] !== 0) out.push(`${path}/fGrid/0: must be 0 (the cache-blind estimator reads Q(N, 0))`);
  }
  if (!Array.isArray(valuesMs)) return;
  if (Array.isArray(nGrid) && valuesMs.length !== nGrid.length) {
    out.push(`${path}/valuesMs: has ${valuesMs.length} rows but nGrid has ${nGrid.length} points`);
  }
  valuesMs.forEach((row: unknown, i) => {
    if (Array.isArray(row) && Array.isArray(fGrid) && row.length !== fGrid.length) {
      out.push(`${path}/valuesMs/${i}: has ${row.length} values but fGrid has ${fGrid.length} points`);
    }
  });
}

/**
 * The checks JSON Schema cannot express. Written against `unknown` so they
 * can run beside a failed schema check and an operator sees every problem of
 * a file at once rather than one round of fixes per validator.
 */
function semanticProblems(doc: unknown): string[] {
  const out: string[] = [];
  nonFinite(doc, '', out);
  if (!isRecord(doc)) return out;
  if (typeof doc.createdAt === 'string' && Number.isNaN(Date.parse(doc.createdAt))) {
    out.push(`/createdAt: "${doc.createdAt}" is not a real date`);
  }
  const models = doc.models;
  if (isRecord(models)) {
    for (const role of ['efficient', 'capable'] as const) {
      const m = models[role];
      if (isRecord(m)) checkQTable(m.qTable, `/models/${role}/qTable`, out);
    }
    const e = models.efficient;
    const c = models.capable;
    // The decision maps each role to an indexer by name; one name for both
    // roles would make "change efficient to capable" a no-op at best.
    if (isRecord(e) && isRecord(c) && typeof e.name === 'string' && e.name === c.name) {
      out.push(`/models/capable/name: must differ from the efficient model's name "${e.name}"`);
    }
  }
  const t = doc.thresholds;
  if (isRecord(t)) {
    // A count variant whose every term is disabled can never trigger: it is
    // the Stage baseline with extra probes, almost certainly a fitting slip.
    if (doc.variant === 'count' && t.r === null) {
      out.push('/thresholds/r: variant "count" needs r (null never triggers; use variant "stage" for the baseline)');
    }
    if (doc.variant === 'count_prefill' && t.r === null && t.p === null) {
      out.push('/thresholds: variant "count_prefill" needs r or p (both null never trigger)');
    }
  }
  return out;
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null && !Object.isFrozen(v)) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}

/**
 * Validate a parsed document. On success the value is a deep-frozen copy, so
 * neither the caller's object nor a later mutation can change a set that
 * decisions are reading.
 */
export function validateParameterSet(doc: unknown): ParameterSetResult {
  const errors: string[] = [];
  if (!validateSchema(doc)) errors.push(...(validateSchema.errors ?? []).map(formatAjvError));
  errors.push(...semanticProblems(doc));
  if (errors.length > 0) return { ok: false, errors: [...new Set(errors)] };
  return { ok: true, value: deepFreeze(structuredClone(doc) as ParameterSet) };
}

/** Parse and validate a parameter-set file. Never throws. */
export function loadParameterSet(jsonText: string): ParameterSetResult {
  let doc: unknown;
  try {
    doc = JSON.parse(jsonText);
  } catch (err) {
    return { ok: false, errors: [`not valid JSON: ${err instanceof Error ? err.message : String(err)}`] };
  }
  return validateParameterSet(doc);
}

/** Stable text form: two-space JSON with a trailing newline, keys in declaration order. */
export function serializeParameterSet(set: ParameterSet): string {
  return `${JSON.stringify(set, null, 2)}\n`;
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isRecord(v)) {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** What the fitting tool supplies; version and createdAt are derived when omitted. */
export interface FittedParameters extends Pick<ParameterSet, 'variant' | 'models' | 'thresholds' | 'margins' | 'gate' | 'provenance'> {
  /** Defaults to the current time. */
  readonly createdAt?: Date | string;
  /** Defaults to `<createdAt as YYYYMMDDTHHMMSSZ>-<12 hex digits of SHA-256 of the content>`. */
  readonly version?: string;
}

/**
 * Build and validate a parameter set from fitted values. The derived version
 * hashes only the content (not createdAt), so two fits that produced the same
 * numbers are recognisably the same set even when written at different times.
 */
export function createParameterSet(fitted: FittedParameters): ParameterSetResult {
  const created =
    fitted.createdAt === undefined
      ? new Date()
      : typeof fitted.createdAt === 'string'
        ? new Date(fitted.createdAt)
        : fitted.createdAt;
  if (Number.isNaN(created.getTime())) return { ok: false, errors: [`/createdAt: ${String(fitted.createdAt)} is not a date`] };
  const createdAt = created.toISOString();
  const content = {
    variant: fitted.variant,
    models: fitted.models,
    thresholds: fitted.thresholds,
    margins: fitted.margins,
    gate: fitted.gate,
  };
  const digest = createHash('sha256').update(canonical(content)).digest('hex').slice(0, 12);
  const stamp = createdAt.replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const doc = {
    schema: PARAMETER_SET_SCHEMA,
    schemaVersion: PARAMETER_SET_SCHEMA_VERSION,
    version: fitted.version ?? `${stamp}-${digest}`,
    createdAt,
    ...content,
    ...(fitted.provenance === undefined ? {} : { provenance: fitted.provenance }),
  };
  return validateParameterSet(doc);
}

// ---------------------------------------------------------------------------
// Development default.
// ---------------------------------------------------------------------------

/**
 * Q values for the default set from Dynamo's mocker step-time model
 * (prefill ms = 4.209989e-7 T^2 + 1.518344e-2 T + 16.50142 per step of at
 * most 8192 new tokens), so the simulator's fleet and the default estimates
 * agree in scale. At least one token is always computed, even when the whole
 * prompt is cached, as the engine recomputes the last position.
 */
function mockerTtftMs(n: number, f: number): number {
  let uncached = Math.max(1, Math.round(n * (1 - f)));
  let ms = 0;
  while (uncached > 0) {
    const t = Math.min(8192, uncached);
    ms += 4.209989e-7 * t * t + 1.518344e-2 * t + 16.50142;
    uncached -= t;
  }
  return Math.round(ms * 1000) / 1000;
}

function developmentModel(name: string): ModelParameters {
  const nGrid = [1, 256, 1024, 4096, 8192, 16384, 32768, 65536, 131072];
  const fGrid = [0, 0.25, 0.5, 0.75, 0.9, 1];
  const qTable: QTable = {
    nGrid,
    fGrid,
    valuesMs: nGrid.map((n) => fGrid.map((f) => mockerTtftMs(n, f))),
    clampN: false,
    clampF: false,
  };
  return {
    name,
    qTable,
    standardization: { logN: { mean: 0, sd: 1 }, logR: { mean: 0, sd: 1 }, logP: { mean: 0, sd: 1 } },
    blind: { b0: 0, bN: 0, bR: 0, bP: 0 },
    cache: { c0: 0, cN: 0, cR: 0, cP: 0 },
  };
}

/**
 * Conservative development default: variant `stage` (never overrides), no
 * count thresholds, and estimators without load correction so that the
 * predictions recorded for comparison are plain no-contention times. Never
 * use it for an evaluation run: it was not fitted to anything.
 */
export const DEFAULT_PARAMETER_SET: ParameterSet = deepFreeze<ParameterSet>({
  schema: PARAMETER_SET_SCHEMA,
  schemaVersion: PARAMETER_SET_SCHEMA_VERSION,
  version: '0.0.0-development',
  createdAt: '2026-01-01T00:00:00Z',
  variant: 'stage',
  models: { efficient: developmentModel('efficient'), capable: developmentModel('capable') },
  thresholds: { r: null, p: null },
  margins: { deltaBlindMs: 250, deltaCacheMs: 250 },
  gate: { maxAgeMs: 1000, destinationLimit: 64, localLimit: 64 },
  provenance: {
    source: 'built-in development default',
    note: 'Q from the Dynamo mocker prefill step model; zero load correction; not fitted',
  },
});

// ---------------------------------------------------------------------------
// Hot-swap holder.
// ---------------------------------------------------------------------------

type ReplaceResult =
  | { readonly ok: true; readonly previousVersion: string; readonly version: string }
  | {
      readonly ok: false;
      readonly errors: readonly string[];
      /** One line for logs: what was refused and which set stays active. */
      readonly message: string;
      readonly activeVersion: string;
    };

/**
 * Holds the active parameter set. A decision must call `current()` once at
 * its start and use that object throughout (including across the awaits for
 * indexer answers in the service): sets are immutable, so a reload swaps the
 * reference for later decisions and never changes one in flight. A refused
 * file leaves the previous set active.
 */
export class ParameterStore {
  #active: ParameterSet;

  constructor(initial: ParameterSet = DEFAULT_PARAMETER_SET) {
    const checked = validateParameterSet(initial);
    if (!checked.ok) throw new Error(`initial parameter set is invalid: ${checked.errors.join('; ')}`);
    this.#active = checked.value;
  }

  current(): ParameterSet {
    return this.#active;
  }

  /** Replace from file text; on any problem keep the active set and say why. */
  tryReplace(jsonText: string): ReplaceResult {
    const result = loadParameterSet(jsonText);
    const previousVersion = this.#active.version;
    if (!result.ok) {
      return {
        ok: false,
        errors: result.errors,
        message: `parameter set refused (${result.errors.length} problem${result.errors.length === 1 ? '' : 's'}: ${result.errors.join('; ')}); version ${previousVersion} stays active`,
        activeVersion: previousVersion,
      };
    }
    this.#active = result.value;
    return { ok: true, previousVersion, version: result.value.version };
  }
}
