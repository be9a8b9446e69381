/**
 * Evaluation outcome rows: the one place that knows the flattened column
 * names (`outcomeToJsonRow` of @vantage/records, as `vantage replay --kind
 * outcome --format jsonl` writes them), the parser with line-numbered
 * problems, and how a row is labelled with its variant.
 */
import { parseEvaluationSessionId } from './schedule';

/**
 * Every flattened outcome column the analysis reads. A test checks each name
 * against `OUTCOME_CSV_COLUMNS`, so a schema rename fails there.
 */
export const EVALUATION_COLUMNS = Object.freeze({
  requestId: 'requestId',
  sessionId: 'sessionId',
  status: 'status',
  arrivalMs: 'arrivalMs',
  firstTokenMs: 'firstTokenMs',
  endMs: 'endMs',
  ttftMs: 'ttftMs',
  latencyMs: 'latencyMs',
  inputTokens: 'inputTokens',
  cachedTokens: 'cachedTokens',
  uncachedInputTokens: 'uncachedInputTokens',
  outputTokens: 'outputTokens',
  routingOverheadUs: 'routingOverheadUs',
  background: 'background',
  servedPool: 'servedPool',
  hasDecision: 'join.hasDecision',
  variant: 'decision.variant',
  reason: 'decision.reason',
  couldAct: 'decision.couldAct',
  triggered: 'decision.triggered',
  proposal: 'decision.stageProposal.role',
  finalRole: 'decision.finalChoice.role',
  finalModel: 'decision.finalChoice.model',
  observeDurationUs: 'decision.observeDurationUs',
  decisionDurationUs: 'decision.decisionDurationUs',
});

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
  /** 1-based line of the source; 0 for rows given as objects. */
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

export type EvaluationRowParse =
  | { readonly kind: 'row'; readonly row: EvaluationRow }
  | { readonly kind: 'skip'; readonly reason: 'no_variant' }
  | { readonly kind: 'problem'; readonly message: string };

const C = EVALUATION_COLUMNS;

/** One flattened outcome row. Rows with no variant label (calibration, warm-ups) are skipped. */
export function evaluationRowFromJson(o: Record<string, unknown>, line: number): EvaluationRowParse {
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
  const nums: Record<string, number | null> = {};
  for (const key of ['arrivalMs', 'endMs', 'ttftMs', 'latencyMs', 'inputTokens', 'uncachedInputTokens', 'routingOverheadUs', 'observeDurationUs', 'decisionDurationUs'] as const) {
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
    decision = { reason, couldAct: o[C.couldAct] === true, triggered: o[C.triggered] === true, proposal: str(C.proposal), finalRole: str(C.finalRole) };
  }
  const served = o[C.servedPool];
  const finalModel = o[C.finalModel];
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
      arrivalMs: nums['arrivalMs'] ?? null,
      endMs: nums['endMs'] ?? null,
      ttftMs: nums['ttftMs'] ?? null,
      latencyMs: nums['latencyMs'] ?? null,
      model: typeof served === 'string' ? served : typeof finalModel === 'string' ? finalModel : null,
      inputTokens: nums['inputTokens'] ?? null,
      uncachedInputTokens: nums['uncachedInputTokens'] ?? null,
      routingOverheadUs: nums['routingOverheadUs'] ?? null,
      observeDurationUs: nums['observeDurationUs'] ?? null,
      decisionDurationUs: nums['decisionDurationUs'] ?? null,
      decision,
    },
  };
}

export interface RowProblem {
  readonly line: number;
  readonly message: string;
}

export interface EvaluationParse {
  readonly rows: EvaluationRow[];
  readonly problems: RowProblem[];
  readonly skipped: Readonly<Record<string, number>>;
  readonly lines: number;
}

/** Rows given as objects (already parsed JSON); line numbers are their 1-based positions. */
export function parseEvaluationRows(objects: readonly unknown[]): EvaluationParse {
  const rows: EvaluationRow[] = [];
  const problems: RowProblem[] = [];
  const skipped: Record<string, number> = {};
  const seen = new Map<string, number>();
  objects.forEach((o, i) => {
    const line = i + 1;
    if (typeof o !== 'object' || o === null || Array.isArray(o)) {
      problems.push({ line, message: 'not a JSON object' });
      return;
    }
    const r = evaluationRowFromJson(o as Record<string, unknown>, line);
    if (r.kind === 'skip') skipped[r.reason] = (skipped[r.reason] ?? 0) + 1;
    else if (r.kind === 'problem') problems.push({ line, message: r.message });
    else {
      const first = seen.get(r.row.requestId);
      if (first !== undefined) problems.push({ line, message: `second outcome of request ${JSON.stringify(r.row.requestId)} (first on line ${first})` });
      else {
        seen.set(r.row.requestId, line);
        rows.push(r.row);
      }
    }
  });
  return { rows, problems, skipped, lines: objects.length };
}

/** JSON Lines; blank lines are ignored (not counted), bad JSON is a problem with its line. */
export function parseEvaluationJsonl(text: string): EvaluationParse {
  const objects: unknown[] = [];
  const lineOf: number[] = [];
  const problems: RowProblem[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    if (raw.trim() === '') return;
    try {
      objects.push(JSON.parse(raw));
      lineOf.push(i + 1);
    } catch (err) {
      problems.push({ line: i + 1, message: `not JSON: ${err instanceof Error ? err.message : String(err)}` });
    }
  });
  const p = parseEvaluationRows(objects);
  const fix = (l: number): number => lineOf[l - 1] ?? l;
  return {
    rows: p.rows.map((r) => ({ ...r, line: fix(r.line) })),
    problems: [...problems, ...p.problems.map((q) => ({ line: fix(q.line), message: q.message.replace(/first on line (\d+)/, (_m, n: string) => `first on line ${fix(Number(n))}`) }))].sort((a, b) => a.line - b.line),
    skipped: p.skipped,
    lines: objects.length + problems.length,
  };
}
