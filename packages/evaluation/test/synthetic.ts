// Genuine flattened outcome rows (records' joinOutcome + outcomeToJsonRow,
// as `vantage replay --kind outcome --format jsonl` writes them) for the
// analysis tests, and a synthetic five-variant evaluation with known effects.
import type { WorkerId } from '@vantage/types';
import { joinOutcome, outcomeToJsonRow, type CandidateObservation, type DecisionRecord, type JsonRow, type LifecycleEventInput } from '@vantage/records';
import { hash32, mulberry32 } from '@vantage/random';
import { DEFAULT_BACKGROUND_TRAFFIC, evaluationSchedule } from '../src/index';

export const MODELS = { efficient: 'eff-8b', capable: 'cap-70b' } as const;

export interface RowSpec {
  readonly requestId: string;
  readonly sessionId: string;
  readonly variant?: string;
  /** No decision record (background traffic). */
  readonly noDecision?: boolean;
  readonly background?: boolean;
  readonly reason?: string;
  readonly couldAct?: boolean;
  readonly proposal?: 'efficient' | 'capable';
  readonly finalRole?: 'efficient' | 'capable';
  readonly arrivalMs: number;
  readonly ttftMs?: number | null;
  /** End time relative to arrival; null for no terminal event. */
  readonly durationMs?: number | null;
  readonly terminal?: 'done' | 'failed' | 'cancelled';
  readonly usage?: { inputTokens: number; cachedTokens: number; outputTokens: number } | null;
  readonly observeDurationUs?: number | null;
  readonly decisionDurationUs?: number;
}

const noAges = { selectionMs: 1, overlapMs: 1, bookingsMs: 1, metricsMs: 1, pendingMs: null };

/** One candidate's observation of a decision record; `over` replaces fields. */
export function observation(role: 'efficient' | 'capable', over: Partial<CandidateObservation> = {}): CandidateObservation {
  return {
    role,
    model: MODELS[role],
    routingGroup: null,
    status: 'ok',
    error: null,
    workerId: (role === 'efficient' ? 0xfedcba9876543210n : 7n) as WorkerId,
    dpRank: 0,
    promptTokens: 5000,
    overlapTokens: 4000,
    bookedRequests: 2,
    prefillPressure: 0.5,
    bookedPrefillTokens: 4096,
    prefillCapacityTokens: 8192,
    hostOverlapTokens: null,
    diskOverlapTokens: null,
    effectivePrefillTokens: null,
    decodeBlocks: null,
    kvCapacityBlocks: null,
    pendingRequests: null,
    pendingTokens: null,
    ages: noAges,
    suspectReason: null,
    collectionDurationUs: 400,
    ...over,
  };
}

export function outcomeRow(s: RowSpec): JsonRow {
  const variant = s.variant ?? 'baseline';
  const proposal = s.proposal ?? 'efficient';
  const reason = s.reason ?? (variant === 'baseline' ? 'baseline' : 'kept');
  const finalRole = s.finalRole ?? (reason === 'overrode' ? 'capable' : proposal);
  const background = s.background ?? false;
  const decision: DecisionRecord | null = s.noDecision
    ? null
    : {
        recordId: `d-${s.requestId}`,
        requestId: s.requestId,
        sessionId: s.sessionId,
        timestampMs: s.arrivalMs,
        parameterSetVersion: 'ps-test',
        variant,
        stageProposal: { model: MODELS[proposal], role: proposal },
        finalChoice: { model: MODELS[finalRole], role: finalRole },
        reason,
        detail: null,
        couldAct: s.couldAct ?? (reason === 'kept' || reason === 'overrode'),
        triggered: reason === 'overrode',
        gate: null,
        observations: variant === 'baseline' ? [] : [observation('efficient'), observation('capable')],
        predictions: [],
        advantageMs: null,
        chosenWorkerId: 7n as WorkerId,
        chosenDpRank: 0,
        endpoint: null,
        observeDurationUs: s.observeDurationUs === undefined ? (variant === 'baseline' ? null : 900) : s.observeDurationUs,
        decisionDurationUs: s.decisionDurationUs ?? (variant === 'baseline' ? 50 : 1200),
        decisionInstanceId: 'dec-1',
        background,
      };
  const pool = MODELS[finalRole];
  const base = { requestId: s.requestId, sessionId: s.sessionId, pool };
  const events: LifecycleEventInput[] = [];
  const ttft = s.ttftMs === undefined ? 100 : s.ttftMs;
  if (ttft !== null) events.push({ ...base, kind: 'first_token', atMs: s.arrivalMs + ttft });
  const dur = s.durationMs === undefined ? (ttft ?? 0) + 400 : s.durationMs;
  const usage = s.usage === undefined ? { inputTokens: 1000, cachedTokens: 600, outputTokens: 50 } : s.usage;
  if (dur !== null) events.push({ ...base, kind: s.terminal ?? 'done', atMs: s.arrivalMs + dur, ...(usage === null ? {} : { usage }) });
  const rec = joinOutcome(decision, events, { requestId: s.requestId, closedBy: 'complete', arrivalMs: s.arrivalMs, background });
  return outcomeToJsonRow(rec);
}

export interface SyntheticEvaluation {
  readonly rows: JsonRow[];
  /** Per-request TTFT shift of each variant versus the baseline. */
  readonly shiftMs: Readonly<Record<string, number>>;
}

/**
 * A five-variant evaluation from the schedule: every session of an attempt
 * has the same turns and base TTFTs in every variant (matched), and each
 * variant shifts every TTFT by a known amount. Background streams have no
 * decision and a TTFT that grows with the variant's override count.
 */
export function syntheticEvaluation(opts: { attempts?: number; sessions?: number; turns?: number; seed?: number; shiftMs?: Record<string, number>; noiseMs?: number } = {}): SyntheticEvaluation {
  const shift: Record<string, number> = opts.shiftMs ?? { baseline: 0, request_count: -50, count_prefill: -80, cache_blind: 20, cache_aware: -200 };
  const turns = opts.turns ?? 6;
  const noise = opts.noiseMs ?? 150;
  const schedule = evaluationSchedule({ attempts: opts.attempts ?? 4, sessionsPerAttempt: opts.sessions ?? 6, seed: opts.seed ?? 11, background: { ...DEFAULT_BACKGROUND_TRAFFIC, streams: 1 } });
  const rows: JsonRow[] = [];
  let clock = 1_750_000_000_000;
  for (const run of schedule.runs) {
    const start = clock;
    let runEnd = start;
    for (const s of run.sessions) {
      const rand = mulberry32(hash32('session', run.sessionSeed, s.sessionIndex));
      let t = start + s.sessionIndex * 1000;
      for (let k = 0; k < turns; k++) {
        const baseTtft = 400 + noise * rand() * 4;
        const think = 500 + 1000 * rand();
        const decode = 800 + 400 * rand();
        const draw = rand(); // drawn in every variant, so the streams stay matched
        const isOverride = run.variant !== 'baseline' && draw < 0.3;
        const ttft = Math.max(10, baseTtft + (shift[run.variant] ?? 0));
        rows.push(
          outcomeRow({
            requestId: `${s.sessionId}/${k}`,
            sessionId: s.sessionId,
            variant: run.variant,
            reason: run.variant === 'baseline' ? 'baseline' : isOverride ? 'overrode' : k % 5 === 4 ? 'fallback_observations_stale' : 'kept',
            arrivalMs: t,
            ttftMs: ttft,
            durationMs: ttft + decode,
            usage: { inputTokens: 2000 + 500 * k, cachedTokens: 1500 + 400 * k, outputTokens: 60 },
          }),
        );
        t += ttft + decode + think;
      }
      runEnd = Math.max(runEnd, t);
    }
    for (const bg of run.backgroundSessionIds) {
      for (let k = 0; k < 5; k++) {
        rows.push(
          outcomeRow({
            requestId: `${bg}/${k}`,
            sessionId: bg,
            noDecision: true,
            background: true,
            finalRole: 'capable',
            arrivalMs: start + 2000 * k,
            ttftMs: 300 + (run.variant === 'baseline' ? 0 : 40),
            durationMs: 3000,
          }),
        );
      }
    }
    clock = runEnd + 60_000;
  }
  return { rows, shiftMs: shift };
}

export function toJsonl(rows: readonly JsonRow[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}
