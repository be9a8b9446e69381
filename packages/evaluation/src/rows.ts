/**
 * Evaluation outcome rows: how a flattened outcome row (`outcomeToJsonRow` of
 * @vantage/records, as `vantage replay --kind outcome --format jsonl` writes
 * it, read through fitting's `parseOutcomeRows` and its column names) becomes
 * a row of the analysis, labelled with its variant.
 */
import { OUTCOME_COLUMNS as C, parseOutcomeRows, type RowParse, type RowsParse } from '@vantage/fitting';
import { parseEvaluationSessionId } from './schedule';

/** Ours, not the schema's: a tool that labels rows itself (e.g. background traffic without a decision) may add it. */
export const EVALUATION_LABEL_COLUMNS = Object.freeze({ variant: 'evaluation.variant' });

export interface DecisionFacts {
  readonly reason: string;
  readonly couldAct: boolean;
  readonly triggered: boolean;
  readonly proposal: string | null;
  readonly finalRole: string | null;
}

/** One outcome row as the analysis uses it. */
export interface EvaluationRow {
  /** 1-based line of the source, or position of a row given as an object. */
  readonly line: number;
  readonly requestId: string;
  readonly sessionId: string | null;
  readonly variant: string;
  readonly background: boolean;
  /** `<attempt>:<index>` from an evaluation session id; null for other ids (no matching across variants). */
  readonly matchKey: string | null;
  readonly attempt: number | null;
  readonly status: string;
  readonly arrivalMs: number | null;
  readonly endMs: number | null;
  readonly ttftMs: number | null;
  readonly latencyMs: number | null;
  /** The pool that served the request, else the decision's final model. */
  readonly model: string | null;
  readonly inputTokens: number | null;
  readonly uncachedInputTokens: number | null;
  readonly routingOverheadUs: number | null;
  readonly observeDurationUs: number | null;
  readonly decisionDurationUs: number | null;
  readonly decision: DecisionFacts | null;
}

/** The numeric columns of a row: each a finite number >= 0, or null. */
const NUMBER_COLUMNS = ['arrivalMs', 'endMs', 'ttftMs', 'latencyMs', 'inputTokens', 'uncachedInputTokens', 'routingOverheadUs', 'observeDurationUs', 'decisionDurationUs'] as const;

/** One flattened outcome row. Rows with no variant label (calibration, warm-ups) are skipped. */
function evaluationRowFromJson(o: Record<string, unknown>, line: number): RowParse<EvaluationRow, 'no_variant'> {
  if (!(C.status in o) || !(C.ttftMs in o) || !(C.requestId in o)) {
    return { kind: 'problem', message: 'not an outcome row (no requestId/status/ttftMs columns; replay --kind outcome writes them)' };
  }
  const sessionId = o[C.sessionId];
  if (sessionId !== null && sessionId !== undefined && typeof sessionId !== 'string') return { kind: 'problem', message: `${C.sessionId} must be a string or null` };
  const parsedId = parseEvaluationSessionId(sessionId);
  const decisionVariant = o[C.variant];
  const labelVariant = o[EVALUATION_LABEL_COLUMNS.variant];
  let variant: string | null = null;
  for (const v of [decisionVariant, labelVariant]) {
    if (v === null || v === undefined) continue;
    if (typeof v !== 'string' || v === '') return { kind: 'problem', message: `variant label ${JSON.stringify(v)} must be a non-empty string` };
    if (variant !== null && variant !== v) return { kind: 'problem', message: `${C.variant} ${JSON.stringify(decisionVariant)} differs from ${EVALUATION_LABEL_COLUMNS.variant} ${JSON.stringify(labelVariant)}` };
    variant = v;
  }
  if (parsedId !== null) {
    if (variant !== null && variant !== parsedId.variant) {
      return { kind: 'problem', message: `session id ${JSON.stringify(sessionId)} names variant ${parsedId.variant}, the decision says ${variant}` };
    }
    variant = parsedId.variant;
  }
  if (variant === null) return { kind: 'skip', reason: 'no_variant' };

  const status = o[C.status];
  if (typeof status !== 'string' || status === '') return { kind: 'problem', message: `${C.status} must be a non-empty string` };
  const nums = {} as Record<(typeof NUMBER_COLUMNS)[number], number | null>;
  for (const key of NUMBER_COLUMNS) {
    const v = o[C[key]];
    if (v === null || v === undefined) nums[key] = null;
    else if (typeof v === 'number' && Number.isFinite(v) && v >= 0) nums[key] = v;
    else return { kind: 'problem', message: `${C[key]} must be a finite number >= 0 or null, got ${JSON.stringify(v)}` };
  }
  const flag = o[C.background];
  const background = flag === true || parsedId?.background === true;
  const reason = o[C.reason];
  const hasDecision = typeof reason === 'string' && reason !== '';
  // A lifecycle-only record (no decision) whose events were not marked background is joined as an
  // ordinary request (`incomplete`, untimed); its evalbg session id still says what it is.
  const unmarkedBackground = parsedId?.background === true && flag === false && !hasDecision;
  if (parsedId !== null && typeof flag === 'boolean' && flag !== parsedId.background && !unmarkedBackground) {
    return { kind: 'problem', message: `session id ${JSON.stringify(sessionId)} is ${parsedId.background ? '' : 'not '}background traffic, the row says otherwise` };
  }
  let decision: DecisionFacts | null = null;
  if (hasDecision) {
    const str = (k: string): string | null => (typeof o[k] === 'string' ? (o[k] as string) : null);
    decision = { reason, couldAct: o[C.couldAct] === true, triggered: o[C.triggered] === true, proposal: str(C.proposal), finalRole: str(C.role) };
  }
  const served = o[C.servedPool];
  const finalModel = o[C.model];
  const requestId = o[C.requestId];
  return {
    kind: 'row',
    row: {
      line,
      requestId: typeof requestId === 'string' ? requestId : String(requestId),
      sessionId: typeof sessionId === 'string' ? sessionId : null,
      variant,
      background,
      matchKey: parsedId?.matchKey ?? null,
      attempt: parsedId?.attempt ?? null,
      status,
      ...nums,
      model: typeof served === 'string' ? served : typeof finalModel === 'string' ? finalModel : null,
      decision,
    },
  };
}

/**
 * JSON Lines (blank lines are ignored, not counted; bad JSON is a problem with its line) or rows
 * given as objects (already parsed JSON; line numbers are their 1-based positions). Each outcome
 * once per request id: a second one is a problem on its line.
 */
export function parseEvaluationRows(input: string | readonly unknown[]): RowsParse<EvaluationRow> {
  const seen = new Map<string, number>();
  return parseOutcomeRows(input, (o, line) => {
    const r = evaluationRowFromJson(o, line);
    if (r.kind !== 'row') return r;
    const first = seen.get(r.row.requestId);
    if (first !== undefined) return { kind: 'problem', message: `second outcome of request ${JSON.stringify(r.row.requestId)} (first on line ${first})` };
    seen.set(r.row.requestId, line);
    return r;
  });
}
