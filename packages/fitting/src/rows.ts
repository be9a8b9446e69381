/**
 * Outcome rows as the replay tool writes them (`outcomeToJsonRow` of
 * @vantage/records): the one place that knows their column names and reads
 * them, for the calibration measurements here and the evaluation's rows
 * (@vantage/evaluation). Then the calibration measurement, its validation,
 * and pairing of the two candidates measured for one repeat of a workload
 * condition (one outcome record measures one candidate). README, "Input".
 */
import { asRowObject, readJsonRows, type RowProblem } from '@vantage/records';
import type { Role } from '@vantage/rules';

export type { RowProblem } from '@vantage/records';
export type { Role } from '@vantage/rules';
export const ROLES: readonly Role[] = ['efficient', 'capable'];

/** One measured request of the calibration. */
export interface CalibrationRow {
  /** 1-based line of the source file; 0 for rows built in code. */
  readonly line: number;
  readonly requestId: string;
  /** Workload condition: every repeat of one condition shares it (the unit of every split). */
  readonly conditionId: string;
  /** Repeat index within the condition (>= 0). */
  readonly repeat: number;
  /** Which candidate the request was sent to (and whose TTFT was measured). */
  readonly role: Role;
  readonly model: string;
  /** N: prompt tokens after this model's template and tokenizer (> 0). */
  readonly n: number;
  /** K: reusable GPU-prefix tokens on the chosen worker (>= 0). */
  readonly k: number;
  /** R: booked requests on the chosen worker (>= 0). */
  readonly r: number;
  /** P: prefill pressure; null when the worker did not advertise its capacity. */
  readonly p: number | null;
  /** Measured time to first token. */
  readonly ttftMs: number;
  /** The harness ran this condition without background load. */
  readonly noBackgroundLoad: boolean;
  /** No-contention measurement: no background load and R = 0 (a Q-table point). */
  readonly noContention: boolean;
  /**
   * Part of the Q set: the no-contention (N, f) grid measured for the Q tables alone
   * (seed 000: "Q_m(N, f) is a table of measured TTFT with no competing requests").
   * Q-set conditions are never in the fitting, uncertainty or selection split.
   * Absent means false (contention measurements).
   */
  readonly qSet?: boolean;
}

/** Both candidates measured for one repeat of one condition. */
export interface CalibrationPair {
  readonly conditionId: string;
  readonly repeat: number;
  /** Stage's proposal the rules reconsider: calibration measures efficient proposals. */
  readonly proposal: Role;
  readonly efficient: CalibrationRow;
  readonly capable: CalibrationRow;
}

/**
 * Flattened outcome-record columns (`outcomeToJsonRow`: dotted paths, the
 * embedded decision under `decision.`, per-candidate arrays keyed by role)
 * that fitting and the evaluation read. A test checks every name against
 * `OUTCOME_CSV_COLUMNS`, so a schema change that renames one fails there
 * rather than here at fitting time.
 */
export const OUTCOME_COLUMNS = Object.freeze({
  requestId: 'requestId',
  sessionId: 'sessionId',
  status: 'status',
  arrivalMs: 'arrivalMs',
  endMs: 'endMs',
  ttftMs: 'ttftMs',
  latencyMs: 'latencyMs',
  inputTokens: 'inputTokens',
  uncachedInputTokens: 'uncachedInputTokens',
  routingOverheadUs: 'routingOverheadUs',
  background: 'background',
  servedPool: 'servedPool',
  variant: 'decision.variant',
  reason: 'decision.reason',
  couldAct: 'decision.couldAct',
  triggered: 'decision.triggered',
  /** The candidate the request was sent to. */
  role: 'decision.finalChoice.role',
  model: 'decision.finalChoice.model',
  proposal: 'decision.stageProposal.role',
  observeDurationUs: 'decision.observeDurationUs',
  decisionDurationUs: 'decision.decisionDurationUs',
  observation: (role: Role) =>
    Object.freeze({
      status: `decision.observations.${role}.status`,
      model: `decision.observations.${role}.model`,
      n: `decision.observations.${role}.promptTokens`,
      k: `decision.observations.${role}.overlapTokens`,
      r: `decision.observations.${role}.bookedRequests`,
      p: `decision.observations.${role}.prefillPressure`,
    }),
});

/** What one flattened row became: a row, a row left out for a counted reason, or a problem. */
export type RowParse<T, S extends string = string> =
  | { readonly kind: 'row'; readonly row: T }
  | { readonly kind: 'skip'; readonly reason: S }
  | { readonly kind: 'problem'; readonly message: string };

export interface RowsParse<T> {
  readonly rows: T[];
  /** Bad rows, with line numbers, in line order. */
  readonly problems: RowProblem[];
  /** Rows that were left out on purpose, by reason. */
  readonly skipped: Readonly<Record<string, number>>;
  /** Non-blank lines of the text, or the objects given. */
  readonly lines: number;
}

/**
 * Flattened outcome rows through `parse`: JSON Lines (blank lines ignored,
 * bad JSON a problem with its line) or objects already parsed (their lines
 * are their 1-based positions). Never throws.
 */
export function parseOutcomeRows<T>(input: string | readonly unknown[], parse: (o: Record<string, unknown>, line: number) => RowParse<T>): RowsParse<T> {
  const read = typeof input === 'string' ? readJsonRows(input) : undefined;
  const objects = read?.objects ?? (input as readonly unknown[]).map((o, i) => ({ line: i + 1, row: asRowObject(o) }));
  const rows: T[] = [];
  const problems = [...(read?.problems ?? [])];
  const skipped: Record<string, number> = {};
  for (const { line, row: o } of objects) {
    const r = typeof o === 'string' ? { kind: 'problem' as const, message: o } : parse(o, line);
    if (r.kind === 'row') rows.push(r.row);
    else if (r.kind === 'skip') skipped[r.reason] = (skipped[r.reason] ?? 0) + 1;
    else problems.push({ line, message: r.message });
  }
  return { rows, problems: problems.sort((a, b) => a.line - b.line), skipped, lines: read?.lines ?? input.length };
}

/**
 * Calibration identity: outcome records have no field for the workload
 * condition, so the harness names it in the session id as
 * `cal:<conditionId>:<repeat>:<idle|loaded|qgrid>` (the condition id may
 * contain `:`; the last two fields are split off from the right). Explicit
 * columns below, added by a tool that joins its own design table, win.
 */
const CALIBRATION_SESSION_PREFIX = 'cal:';
export const CALIBRATION_COLUMNS = Object.freeze({
  conditionId: 'calibration.conditionId',
  repeat: 'calibration.repeat',
  noBackgroundLoad: 'calibration.noBackgroundLoad',
  /** Optional boolean: the row belongs to the Q set (absent = false). */
  qSet: 'calibration.qSet',
});

/**
 * Session id for one calibration measurement, as the harness must write it.
 * `qSet` marks a Q-set point (no background load by definition).
 */
export function calibrationSessionId(conditionId: string, repeat: number, noBackgroundLoad: boolean, qSet = false): string {
  if (qSet && !noBackgroundLoad) throw new RangeError(`Q-set condition ${conditionId} must run without background load`);
  return `${CALIBRATION_SESSION_PREFIX}${conditionId}:${repeat}:${qSet ? 'qgrid' : noBackgroundLoad ? 'idle' : 'loaded'}`;
}

type Identity = Pick<CalibrationRow, 'conditionId' | 'repeat' | 'noBackgroundLoad'> & { readonly qSet: boolean };

type IdentityResult = { kind: 'none' } | { kind: 'bad'; message: string } | { kind: 'ok'; id: Identity };

function identityOf(o: Record<string, unknown>): IdentityResult {
  const c = o[CALIBRATION_COLUMNS.conditionId];
  if (c !== undefined && c !== null) {
    const rep = o[CALIBRATION_COLUMNS.repeat];
    const nb = o[CALIBRATION_COLUMNS.noBackgroundLoad];
    if (typeof c !== 'string' || c === '') return { kind: 'bad', message: `${CALIBRATION_COLUMNS.conditionId} must be a non-empty string` };
    if (typeof rep !== 'number' || !Number.isInteger(rep) || rep < 0) {
      return { kind: 'bad', message: `${CALIBRATION_COLUMNS.repeat} must be a non-negative integer, got ${JSON.stringify(rep)}` };
    }
    if (typeof nb !== 'boolean') return { kind: 'bad', message: `${CALIBRATION_COLUMNS.noBackgroundLoad} must be true or false, got ${JSON.stringify(nb)}` };
    const q = o[CALIBRATION_COLUMNS.qSet] ?? false;
    if (typeof q !== 'boolean') return { kind: 'bad', message: `${CALIBRATION_COLUMNS.qSet} must be true or false, got ${JSON.stringify(q)}` };
    return { kind: 'ok', id: { conditionId: c, repeat: rep, noBackgroundLoad: nb, qSet: q } };
  }
  const s = o[OUTCOME_COLUMNS.sessionId];
  if (typeof s !== 'string' || !s.startsWith(CALIBRATION_SESSION_PREFIX)) return { kind: 'none' };
  const m = /^cal:(.+):(\d+):(idle|loaded|qgrid)$/.exec(s);
  if (m === null) return { kind: 'bad', message: `session id ${JSON.stringify(s)} is not cal:<condition>:<repeat>:<idle|loaded|qgrid>` };
  return { kind: 'ok', id: { conditionId: m[1] as string, repeat: Number(m[2]), noBackgroundLoad: m[3] !== 'loaded', qSet: m[3] === 'qgrid' } };
}

function isRole(v: unknown): v is Role {
  return v === 'efficient' || v === 'capable';
}

type RowSkipReason = 'background' | 'not_calibration' | `status_${string}`;

/**
 * One flattened outcome row to a calibration measurement. Rows that are not
 * measurements (background traffic, warm-up requests, requests that did not
 * complete) are skipped with a reason; a measurement that cannot be used is a
 * problem. Values are range-checked by `validateCalibrationRows` afterwards.
 */
export function rowFromOutcomeJson(o: Record<string, unknown>, line: number): RowParse<CalibrationRow, RowSkipReason> {
  if (!(OUTCOME_COLUMNS.status in o) || !(OUTCOME_COLUMNS.ttftMs in o)) {
    return { kind: 'problem', message: 'not an outcome row (no status/ttftMs columns; replay --kind outcome writes them)' };
  }
  if (o[OUTCOME_COLUMNS.background] === true) return { kind: 'skip', reason: 'background' };
  const ident = identityOf(o);
  if (ident.kind === 'none') return { kind: 'skip', reason: 'not_calibration' };
  if (ident.kind === 'bad') return { kind: 'problem', message: ident.message };
  const status = o[OUTCOME_COLUMNS.status];
  if (status !== 'completed') return { kind: 'skip', reason: `status_${String(status)}` };

  const role = o[OUTCOME_COLUMNS.role];
  if (!isRole(role)) return { kind: 'problem', message: `${OUTCOME_COLUMNS.role} must be efficient or capable, got ${JSON.stringify(role)}` };
  const model = o[OUTCOME_COLUMNS.model];
  if (typeof model !== 'string' || model === '') return { kind: 'problem', message: `${OUTCOME_COLUMNS.model} missing` };
  const cols = OUTCOME_COLUMNS.observation(role);
  const obsStatus = o[cols.status];
  if (obsStatus !== 'ok') {
    return { kind: 'problem', message: `${cols.status} is ${JSON.stringify(obsStatus)}: the measured candidate has no usable observation` };
  }
  const obsModel = o[cols.model];
  if (obsModel !== model) return { kind: 'problem', message: `${cols.model} ${JSON.stringify(obsModel)} differs from ${OUTCOME_COLUMNS.model} ${JSON.stringify(model)}` };
  const served = o[OUTCOME_COLUMNS.servedPool];
  if (served !== undefined && served !== null && served !== model) {
    return { kind: 'problem', message: `served by pool ${JSON.stringify(served)}, not the chosen model ${JSON.stringify(model)}` };
  }
  const num = (col: string, nullable: boolean): number | null | string => {
    const v = o[col];
    if (v === null || v === undefined) return nullable ? null : `${col} missing`;
    return typeof v === 'number' ? v : `${col} must be a number, got ${JSON.stringify(v)}`;
  };
  const n = num(cols.n, false);
  const k = num(cols.k, false);
  const r = num(cols.r, false);
  const p = num(cols.p, true);
  const ttft = num(OUTCOME_COLUMNS.ttftMs, false);
  for (const v of [n, k, r, p, ttft]) if (typeof v === 'string') return { kind: 'problem', message: v };
  const requestId = o[OUTCOME_COLUMNS.requestId];
  const rr = r as number;
  return {
    kind: 'row',
    row: {
      line,
      requestId: typeof requestId === 'string' ? requestId : '',
      conditionId: ident.id.conditionId,
      repeat: ident.id.repeat,
      role,
      model,
      n: n as number,
      k: k as number,
      r: rr,
      p: p as number | null,
      ttftMs: ttft as number,
      noBackgroundLoad: ident.id.noBackgroundLoad,
      noContention: ident.id.noBackgroundLoad && rr === 0,
      ...(ident.id.qSet ? { qSet: true } : {}),
    },
  };
}

/**
 * Parse the replay tool's JSON Lines (one flattened outcome record per line).
 * Never throws: every unusable line is a problem with its line number, and
 * only rows without problems are returned (value checks included).
 */
export function parseCalibrationJsonl(text: string): RowsParse<CalibrationRow> {
  const parsed = parseOutcomeRows(text, rowFromOutcomeJson);
  const valueProblems = validateCalibrationRows(parsed.rows);
  const bad = new Set(valueProblems.map((p) => p.line));
  return { ...parsed, rows: parsed.rows.filter((r) => !bad.has(r.line)), problems: [...parsed.problems, ...valueProblems].sort((a, b) => a.line - b.line) };
}

function rowValueProblems(r: CalibrationRow): string[] {
  const out: string[] = [];
  const intAtLeast = (name: string, v: number, min: number): void => {
    if (!Number.isInteger(v) || v < min) out.push(`${name} = ${v} must be an integer >= ${min}`);
  };
  if (r.conditionId === '') out.push('condition id is empty');
  intAtLeast('repeat', r.repeat, 0);
  if (!isRole(r.role)) out.push(`role ${JSON.stringify(r.role)} is not efficient or capable`);
  if (r.model === '') out.push('model name is empty');
  intAtLeast('N', r.n, 1);
  intAtLeast('K', r.k, 0);
  intAtLeast('R', r.r, 0);
  if (r.p !== null && !(Number.isFinite(r.p) && r.p >= 0)) out.push(`P = ${r.p} must be a finite number >= 0`);
  if (!(Number.isFinite(r.ttftMs) && r.ttftMs > 0)) out.push(`TTFT = ${r.ttftMs} ms must be a positive finite time`);
  if (r.noContention !== (r.noBackgroundLoad && r.r === 0)) out.push('noContention must equal (no background load AND R = 0)');
  if (r.qSet === true && !r.noBackgroundLoad) out.push('a Q-set measurement must run without background load');
  return out;
}

/**
 * Value checks and cross-row checks: ranges, one model name per role, and
 * one measurement per (condition, repeat, candidate). Every problem names
 * its line.
 */
export function validateCalibrationRows(rows: readonly CalibrationRow[]): RowProblem[] {
  const problems: RowProblem[] = [];
  for (const r of rows) for (const m of rowValueProblems(r)) problems.push({ line: r.line, message: m });
  const seen = new Map<string, number>();
  const names = new Map<Role, { model: string; line: number }>();
  const setOf = new Map<string, { qSet: boolean; line: number }>();
  for (const r of rows) {
    const q = r.qSet === true;
    const set = setOf.get(r.conditionId);
    if (set === undefined) setOf.set(r.conditionId, { qSet: q, line: r.line });
    else if (set.qSet !== q) {
      problems.push({ line: r.line, message: `condition ${JSON.stringify(r.conditionId)} is ${q ? '' : 'not '}in the Q set here but ${set.qSet ? '' : 'not '}on line ${set.line}: a condition is Q set or contention, never both` });
    }
    const key = JSON.stringify([r.conditionId, r.repeat, r.role]);
    const first = seen.get(key);
    if (first !== undefined) {
      problems.push({ line: r.line, message: `second ${r.role} measurement of condition ${JSON.stringify(r.conditionId)} repeat ${r.repeat} (first on line ${first})` });
    } else seen.set(key, r.line);
    const named = names.get(r.role);
    if (named === undefined) names.set(r.role, { model: r.model, line: r.line });
    else if (named.model !== r.model) {
      problems.push({ line: r.line, message: `${r.role} model ${JSON.stringify(r.model)} differs from ${JSON.stringify(named.model)} (line ${named.line}): one model per role` });
    }
  }
  const e = names.get('efficient');
  const c = names.get('capable');
  if (e !== undefined && c !== undefined && e.model === c.model) {
    problems.push({ line: c.line, message: `efficient and capable are the same model ${JSON.stringify(e.model)}` });
  }
  return problems.sort((a, b) => a.line - b.line);
}

interface Pairing {
  readonly pairs: CalibrationPair[];
  /** Measurements whose other candidate was not measured (still usable for Q and regression). */
  readonly unpaired: CalibrationRow[];
}

/**
 * Join both candidates of each (condition, repeat), each pair an efficient
 * proposal (the only kind the rules reconsider). Output order is by condition
 * id, then repeat: independent of input order.
 */
export function pairRows(rows: readonly CalibrationRow[]): Pairing {
  const byKey = new Map<string, { efficient?: CalibrationRow; capable?: CalibrationRow }>();
  for (const r of rows) {
    const key = JSON.stringify([r.conditionId, r.repeat]);
    const slot = byKey.get(key) ?? {};
    if (slot[r.role] === undefined) slot[r.role] = r;
    byKey.set(key, slot);
  }
  const pairs: CalibrationPair[] = [];
  const unpaired: CalibrationRow[] = [];
  for (const slot of byKey.values()) {
    if (slot.efficient !== undefined && slot.capable !== undefined) {
      pairs.push({ conditionId: slot.efficient.conditionId, repeat: slot.efficient.repeat, proposal: 'efficient', efficient: slot.efficient, capable: slot.capable });
    } else {
      const one = slot.efficient ?? slot.capable;
      if (one !== undefined) unpaired.push(one);
    }
  }
  pairs.sort((a, b) => compareStrings(a.conditionId, b.conditionId) || a.repeat - b.repeat);
  unpaired.sort((a, b) => compareStrings(a.conditionId, b.conditionId) || a.repeat - b.repeat || compareStrings(a.role, b.role));
  return { pairs, unpaired };
}

/** Code-unit order: locale-independent, so results never depend on the machine. */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
