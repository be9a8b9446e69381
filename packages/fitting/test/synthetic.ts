// Synthetic calibration data from known truth: bilinear no-contention TTFT
// per model plus a load correction linear in log(1 + R) and log(1 + P),
// zero at no load, and Gaussian noise. Used to check that fitting recovers
// what generated the data.
import type { WorkerId } from '@vantage/types';
import { joinOutcome, outcomeToJsonRow, type CandidateObservation, type DecisionRecord } from '@vantage/records';
import { calibrationSessionId, type CalibrationRow, type Role } from '../src/rows';
import { mulberry32 } from '@vantage/random';

export interface TrueModel {
  readonly name: string;
  /** Q(N, f) = a + b N (1 - f) + d N */
  readonly a: number;
  readonly b: number;
  readonly d: number;
  /** correction = betaR log(1 + R) + betaP log(1 + P) */
  readonly betaR: number;
  readonly betaP: number;
}

export const TRUTH: Readonly<Record<Role, TrueModel>> = {
  efficient: { name: 'eff-8b', a: 30, b: 0.02, d: 0.002, betaR: 250, betaP: 300 },
  capable: { name: 'cap-70b', a: 50, b: 0.024, d: 0.003, betaR: 100, betaP: 150 },
};

export function trueQ(m: TrueModel, n: number, f: number): number {
  return m.a + m.b * n * (1 - f) + m.d * n;
}

export function trueTtft(m: TrueModel, n: number, k: number, r: number, p: number): number {
  return trueQ(m, n, k / n) + m.betaR * Math.log1p(r) + m.betaP * Math.log1p(p);
}

export const N_GRID = [1000, 4000, 16000, 64000];
export const F_GRID = [0, 0.5, 0.9];

export interface SyntheticOptions {
  readonly seed?: number;
  readonly noiseMs?: number;
  readonly idleVariants?: number;
  readonly loadedConditions?: number;
  readonly repeats?: number;
  /** The idle grid conditions are the Q set (default true); false gives data without one. */
  readonly qSet?: boolean;
}

export function synthesize(opts: SyntheticOptions = {}): CalibrationRow[] {
  const rand = mulberry32(opts.seed ?? 7);
  const noise = opts.noiseMs ?? 8;
  const gauss = (): number => {
    const u = Math.max(rand(), 1e-12);
    const v = rand();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };
  const rows: CalibrationRow[] = [];
  const repeats = opts.repeats ?? 3;
  const add = (conditionId: string, idle: boolean, n: number, k: number, load: Record<Role, { r: number; p: number }>, qSet = false): void => {
    for (let rep = 0; rep < repeats; rep++) {
      for (const role of ['efficient', 'capable'] as const) {
        const m = TRUTH[role];
        const { r, p } = load[role];
        rows.push({
          line: 0,
          requestId: `${conditionId}/${rep}/${role}`,
          conditionId,
          repeat: rep,
          role,
          model: m.name,
          n,
          k,
          r,
          p,
          ttftMs: trueTtft(m, n, k, r, p) + noise * gauss(),
          noBackgroundLoad: idle,
          noContention: idle && r === 0,
          ...(qSet ? { qSet: true } : {}),
        });
      }
    }
  };
  for (const n of N_GRID) {
    for (const f of F_GRID) {
      for (let v = 0; v < (opts.idleVariants ?? 3); v++) {
        add(`idle-${n}-${f}-${v}`, true, n, Math.round(n * f), { efficient: { r: 0, p: 0 }, capable: { r: 0, p: 0 } }, opts.qSet ?? true);
      }
    }
  }
  for (let c = 0; c < (opts.loadedConditions ?? 60); c++) {
    const n = 1000 + Math.floor(rand() * 63000);
    const k = Math.round(n * 0.9 * rand());
    const round2 = (x: number): number => Math.round(x * 100) / 100;
    add(`load-${String(c).padStart(3, '0')}`, false, n, k, {
      efficient: { r: 1 + Math.floor(rand() * 8), p: round2(rand() * 4) },
      capable: { r: Math.floor(rand() * 5), p: round2(rand() * 2) },
    });
  }
  return rows;
}

const noAges = { selectionMs: 1, overlapMs: 1, bookingsMs: 1, metricsMs: 1, pendingMs: null };

function observationFor(role: Role, row: { n: number; k: number; r: number; p: number | null } | null, model: string): CandidateObservation {
  return {
    role,
    model,
    routingGroup: null,
    status: 'ok',
    error: null,
    workerId: (role === 'efficient' ? 0xfedcba9876543210n : 7n) as WorkerId,
    dpRank: 0,
    promptTokens: row?.n ?? 5000,
    overlapTokens: row?.k ?? 0,
    bookedRequests: row?.r ?? 1,
    prefillPressure: row === null ? 0.5 : row.p,
    bookedPrefillTokens: null,
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
    collectionDurationUs: 500,
  };
}

/**
 * A genuine flattened outcome record (records' joinOutcome + outcomeToJsonRow)
 * for one measurement, as `vantage replay --format jsonl` writes it.
 */
export function outcomeJsonRow(row: CalibrationRow, other: { name: string } = { name: TRUTH[row.role === 'efficient' ? 'capable' : 'efficient'].name }): Record<string, unknown> {
  const otherRole: Role = row.role === 'efficient' ? 'capable' : 'efficient';
  const t0 = 1_750_000_000_000;
  const decision: DecisionRecord = {
    recordId: `d-${row.requestId}`,
    requestId: row.requestId,
    sessionId: calibrationSessionId(row.conditionId, row.repeat, row.noBackgroundLoad, row.qSet === true),
    timestampMs: t0,
    parameterSetVersion: 'calibration',
    variant: 'baseline',
    stageProposal: { model: row.role === 'efficient' ? row.model : other.name, role: 'efficient' },
    finalChoice: { model: row.model, role: row.role },
    reason: 'overrode',
    detail: 'calibration: forced candidate',
    couldAct: false,
    triggered: false,
    gate: null,
    observations: [observationFor(row.role, row, row.model), observationFor(otherRole, null, other.name)],
    predictions: [],
    advantageMs: null,
    chosenWorkerId: 7n as WorkerId,
    chosenDpRank: 0,
    endpoint: null,
    observeDurationUs: 900,
    decisionDurationUs: 1200,
    decisionInstanceId: 'cal-1',
    background: false,
  };
  const rec = joinOutcome(
    decision,
    [
      { requestId: row.requestId, sessionId: decision.sessionId, pool: row.model, kind: 'first_token', atMs: t0 + row.ttftMs },
      { requestId: row.requestId, sessionId: decision.sessionId, pool: row.model, kind: 'done', atMs: t0 + row.ttftMs + 500 },
    ],
    { requestId: row.requestId, closedBy: 'complete' },
  );
  return outcomeToJsonRow(rec);
}

export function toJsonl(rows: readonly CalibrationRow[]): string {
  return rows.map((r) => JSON.stringify(outcomeJsonRow(r))).join('\n') + '\n';
}
