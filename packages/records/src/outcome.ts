/**
 * Building an OutcomeRecord from a decision and the request's lifecycle
 * events. Pure and deterministic: the same inputs (in any order) give the
 * same record, so an outcome service that re-emits after a restart writes a
 * byte-identical record (except `joinLatencyMs`, which the caller measures).
 */
import type { DecisionRecord, JoinClosedBy, OutcomeRecord, OutcomeStatus, SourcePosition } from './types';

/**
 * Lifecycle event as the gateway reports it. Mirrors the draft wire shape in
 * `@vantage/protocol` as a plain input type so this package stays a leaf;
 * the outcome service adapts decoded protocol events into it.
 */
export type LifecycleKind = 'first_token' | 'done' | 'cancelled' | 'failed' | 'usage';

export interface LifecycleUsage {
  inputTokens: number;
  outputTokens: number;
  /** Prompt tokens the engine reported as served from cache; null when the backend does not report it. */
  cachedTokens: number | null;
}

export interface LifecycleEventInput {
  requestId: string;
  sessionId: string;
  /** Model pool that served the request. */
  pool: string;
  kind: LifecycleKind;
  /** Unix epoch ms at the gateway (may be fractional). */
  atMs: number;
  usage?: LifecycleUsage;
  error?: string;
}

interface JoinOptions {
  /** The join key; events for any other request id are ignored and counted. */
  requestId: string;
  /** What made the caller emit: every part arrived, or the join deadline passed. */
  closedBy: JoinClosedBy;
  /** Stream positions of the contributing messages (decision and events). */
  sources?: readonly SourcePosition[];
  /** Request arrival when there is no decision (background traffic). Ignored when a decision is present. */
  arrivalMs?: number;
  /** Background marker when there is no decision. Ignored when a decision is present: the decision is authoritative. */
  background?: boolean;
  /** Outcome-service wall time from first contributing message to emission. */
  joinLatencyMs?: number;
}

const TERMINAL_KINDS = new Set<LifecycleKind>(['done', 'cancelled', 'failed']);
const KNOWN_KINDS = new Set<LifecycleKind>(['first_token', 'done', 'cancelled', 'failed', 'usage']);

/**
 * When two terminal events carry the same timestamp the more pessimistic one
 * wins, so a duplicated or racing report never upgrades a failure to success.
 */
const TERMINAL_RANK: Record<string, number> = { failed: 0, cancelled: 1, done: 2 };

const STATUS_OF_TERMINAL: Record<string, OutcomeStatus> = { done: 'completed', cancelled: 'cancelled', failed: 'failed' };

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function compareSources(a: SourcePosition, b: SourcePosition): number {
  if (a.stream !== b.stream) return a.stream < b.stream ? -1 : 1;
  return a.sequence - b.sequence;
}

/**
 * Join a decision (or its absence) with lifecycle events into the current
 * OutcomeRecord shape. Status and the event rules: README, "Building outcomes"
 * and "String-coded enumerations". TTFT and latency are measured from the
 * decision's timestamp, so they include routing overhead, as the study requires.
 */
export function joinOutcome(decision: DecisionRecord | null, events: readonly LifecycleEventInput[], opts: JoinOptions): OutcomeRecord {
  let ignored = 0;
  const accepted: { e: LifecycleEventInput; i: number }[] = [];
  events.forEach((e, i) => {
    if (e.requestId === opts.requestId && KNOWN_KINDS.has(e.kind) && Number.isFinite(e.atMs)) accepted.push({ e, i });
    else ignored++;
  });
  // Order by time, then input order: inputs may arrive reordered across
  // subjects, and the result must not depend on it.
  accepted.sort((a, b) => a.e.atMs - b.e.atMs || a.i - b.i);

  let firstToken: LifecycleEventInput | undefined;
  let terminal: LifecycleEventInput | undefined;
  let usage: LifecycleUsage | undefined;
  let duplicates = 0;
  for (const { e } of accepted) {
    if (e.kind === 'first_token') {
      if (firstToken === undefined) firstToken = e;
      else duplicates++;
    } else if (TERMINAL_KINDS.has(e.kind)) {
      if (terminal === undefined) terminal = e;
      else {
        duplicates++;
        if (e.atMs === terminal.atMs && (TERMINAL_RANK[e.kind] ?? 9) < (TERMINAL_RANK[terminal.kind] ?? 9)) terminal = e;
      }
    }
    // The latest usage report wins: engines may send running totals.
    if (e.usage !== undefined) usage = e.usage;
  }

  const background = decision !== null ? decision.background : (opts.background ?? false);
  const arrivalMs = decision !== null ? decision.timestampMs : (opts.arrivalMs ?? null);
  const missingPartner = (decision === null && !background) || accepted.length === 0;

  let status: OutcomeStatus;
  if (missingPartner) status = 'incomplete';
  else if (terminal !== undefined) status = STATUS_OF_TERMINAL[terminal.kind] ?? 'failed';
  else status = 'timeout';

  const inputTokens = isCount(usage?.inputTokens) ? usage.inputTokens : null;
  const outputTokens = isCount(usage?.outputTokens) ? usage.outputTokens : null;
  const cachedTokens = isCount(usage?.cachedTokens) ? usage.cachedTokens : null;
  // A cached count above the prompt is an inconsistent report; do not invent a value.
  const uncachedInputTokens = inputTokens !== null && cachedTokens !== null && cachedTokens <= inputTokens ? inputTokens - cachedTokens : null;

  const firstEvent = accepted[0]?.e;
  const sources = dedupeSources(opts.sources ?? []);

  // Timestamps go into `timestamp-millis` longs: whole, exact milliseconds.
  return {
    requestId: opts.requestId,
    sessionId: decision?.sessionId ?? firstEvent?.sessionId ?? null,
    decision,
    arrivalMs: arrivalMs === null ? null : Math.round(arrivalMs),
    firstTokenMs: firstToken ? Math.round(firstToken.atMs) : null,
    endMs: terminal ? Math.round(terminal.atMs) : null,
    ttftMs: firstToken && arrivalMs !== null ? firstToken.atMs - arrivalMs : null,
    latencyMs: terminal && status === 'completed' && arrivalMs !== null ? terminal.atMs - arrivalMs : null,
    status,
    error: terminal?.kind === 'failed' ? (terminal.error ?? null) : null,
    inputTokens,
    outputTokens,
    cachedTokens,
    uncachedInputTokens,
    routingOverheadUs: decision?.decisionDurationUs ?? null,
    background,
    join: {
      hasDecision: decision !== null,
      hasFirstToken: firstToken !== undefined,
      hasTerminal: terminal !== undefined,
      hasUsage: usage !== undefined,
      eventCount: accepted.length,
      duplicateEvents: duplicates,
      ignoredEvents: ignored,
      closedBy: opts.closedBy,
      joinLatencyMs: opts.joinLatencyMs ?? null,
    },
    sources,
    servedPool: (terminal ?? firstEvent)?.pool ?? null,
  };
}

/** Sorted by (stream, sequence), exact duplicates (redeliveries) dropped. */
function dedupeSources(sources: readonly SourcePosition[]): SourcePosition[] {
  const sorted = sources.map((s) => ({ stream: s.stream, sequence: s.sequence, part: s.part })).sort(compareSources);
  return sorted.filter((s, i) => {
    const prev = sorted[i - 1];
    return prev === undefined || prev.stream !== s.stream || prev.sequence !== s.sequence;
  });
}
