/**
 * The evaluation design (seed 000, "Run coding evaluations": "repeated attempts, fresh sessions,
 * matched starting conditions and randomized policy order. Each turn executes only the selected
 * model.") as a pure schedule: (attempt, variant, sessions) in run order; the README says how blocks,
 * matched and fresh sessions are made. Session ids carry the design for the analysis:
 *   eval:<attempt>:<variant>:<sessionIndex>      the agent sessions
 *   evalbg:<attempt>:<variant>:<stream>          competing (background) traffic
 * (attempt, sessionIndex) is the key that matches a session across variants.
 */
import { VARIANTS, type Variant } from '@vantage/records';
import { hash32, shuffled, streamFor } from '@vantage/random';
import type { BackgroundTrafficSpec } from './background';
import type { Role } from './calibration-plan';

/**
 * How Stage's proposal is produced in the evaluation (a stand-in until the
 * real Stage router runs in the loop):
 *  - `always_efficient`: every turn proposes efficient (the rules decide everything);
 *  - `fraction_capable`: each turn proposes capable with probability `fraction`,
 *    drawn from (seed, session match key, turn), so every variant sees the same proposals;
 *  - `length`: capable when the prompt exceeds `capableAboveTokens`.
 */
export type StageProposalModel =
  | { readonly kind: 'always_efficient' }
  | { readonly kind: 'fraction_capable'; readonly fraction: number; readonly seed: number }
  | { readonly kind: 'length'; readonly capableAboveTokens: number };

/**
 * `always_efficient`, `fraction:F:SEED` or `length:TOKENS` (command lines and
 * the main job's settings) as a proposal model; RangeError on anything else.
 */
export function parseProposalSpec(text: string): StageProposalModel {
  if (text === 'always_efficient') return { kind: 'always_efficient' };
  const f = /^fraction:([0-9.]+):(\d+)$/.exec(text);
  if (f) {
    const fraction = Number(f[1]);
    if (!(fraction >= 0 && fraction <= 1)) throw new RangeError(`proposal ${JSON.stringify(text)}: capable fraction ${fraction} must lie in [0, 1]`);
    return { kind: 'fraction_capable', fraction, seed: Number(f[2]) };
  }
  const l = /^length:(\d+)$/.exec(text);
  if (l) return { kind: 'length', capableAboveTokens: Number(l[1]) };
  throw new RangeError(`proposal ${JSON.stringify(text)} is not always_efficient, fraction:F:SEED or length:TOKENS`);
}

interface ProposalContext {
  /** `<attempt>:<sessionIndex>`: the same for a session in every variant. */
  readonly matchKey: string;
  readonly turn: number;
  readonly promptTokens: number;
}

/** Stage's proposal for one turn. Depends only on the model and the turn, never on the variant. */
export function stageProposal(model: StageProposalModel, ctx: ProposalContext): Role {
  switch (model.kind) {
    case 'always_efficient':
      return 'efficient';
    case 'fraction_capable':
      return streamFor(model.seed, 'proposal', ctx.matchKey, ctx.turn)() < model.fraction ? 'capable' : 'efficient';
    case 'length':
      return ctx.promptTokens > model.capableAboveTokens ? 'capable' : 'efficient';
  }
}

interface EvaluationScheduleOptions {
  /** R: repeated attempts (blocks). */
  readonly attempts: number;
  /** Fresh agent sessions in each run. */
  readonly sessionsPerAttempt: number;
  /** Seed of the variant orders and of the session-generator seeds. */
  readonly seed: number;
  /** Default `always_efficient`. */
  readonly proposal?: StageProposalModel;
  /** The competing traffic every run carries (one background session id per stream), recorded in the schedule (default none). */
  readonly background?: BackgroundTrafficSpec | null;
}

export interface ScheduledSession {
  readonly sessionId: string;
  /** Index in the session generator's output (sim's `generateAgenticSessions`, `sessions: sessionsPerAttempt`). */
  readonly sessionIndex: number;
  readonly matchKey: string;
}

export interface ScheduledRun {
  /** 0-based position in the whole schedule. */
  readonly order: number;
  readonly attempt: number;
  /** 0-based position within the attempt's block. */
  readonly position: number;
  readonly variant: Variant;
  /** Seed of the session generator: equal for every variant of one attempt. */
  readonly sessionSeed: number;
  readonly sessions: readonly ScheduledSession[];
  readonly backgroundSessionIds: readonly string[];
  /** Matched starting conditions: the harness empties every worker's KV cache (or restarts the pools) before the run. */
  readonly flushCachesBefore: true;
}

export interface EvaluationSchedule {
  readonly seed: number;
  readonly attempts: number;
  readonly sessionsPerAttempt: number;
  readonly variants: readonly Variant[];
  readonly proposal: StageProposalModel;
  /** The competing traffic of every run (the same in each); null for none. */
  readonly background: BackgroundTrafficSpec | null;
  readonly runs: readonly ScheduledRun[];
}

export function evaluationSessionId(attempt: number, variant: string, sessionIndex: number): string {
  return `eval:${attempt}:${variant}:${sessionIndex}`;
}

export function evaluationBackgroundSessionId(attempt: number, variant: string, stream: number): string {
  return `evalbg:${attempt}:${variant}:${stream}`;
}

interface ParsedEvaluationSessionId {
  readonly background: boolean;
  readonly attempt: number;
  readonly variant: string;
  /** Session index (agent sessions) or stream number (background). */
  readonly index: number;
  readonly matchKey: string;
}

/** The inverse of the two id builders; null for any other session id. */
export function parseEvaluationSessionId(s: string | null | undefined): ParsedEvaluationSessionId | null {
  if (typeof s !== 'string') return null;
  const m = /^(eval|evalbg):(\d+):([^:]+):(\d+)$/.exec(s);
  if (m === null) return null;
  const background = m[1] === 'evalbg';
  const attempt = Number(m[2]);
  const index = Number(m[4]);
  return { background, attempt, variant: m[3] as string, index, matchKey: background ? `${attempt}:bg${index}` : `${attempt}:${index}` };
}

function positiveInt(name: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new RangeError(`${name} must be an integer >= 1, got ${v}`);
}

/** The run list of all five variants. Deterministic given the options; throws RangeError on invalid options. */
export function evaluationSchedule(options: EvaluationScheduleOptions): EvaluationSchedule {
  const variants = [...VARIANTS];
  positiveInt('attempts', options.attempts);
  positiveInt('sessionsPerAttempt', options.sessionsPerAttempt);
  const background = options.background ?? null;
  const streams = background?.streams ?? 0;
  if (!Number.isInteger(options.seed)) throw new RangeError(`seed must be an integer, got ${options.seed}`);
  const proposal = options.proposal ?? { kind: 'always_efficient' };
  if (proposal.kind === 'fraction_capable' && !(proposal.fraction >= 0 && proposal.fraction <= 1)) {
    throw new RangeError(`capable fraction ${proposal.fraction} must lie in [0, 1]`);
  }
  if (proposal.kind === 'length' && !(proposal.capableAboveTokens >= 0)) throw new RangeError('capableAboveTokens must be >= 0');

  const runs: ScheduledRun[] = [];
  for (let a = 0; a < options.attempts; a++) {
    const order = shuffled(variants, streamFor(options.seed, 'variant-order', a));
    const sessionSeed = hash32(options.seed, 'sessions', a);
    order.forEach((variant, position) => {
      const sessions = Array.from({ length: options.sessionsPerAttempt }, (_, i): ScheduledSession => ({ sessionId: evaluationSessionId(a, variant, i), sessionIndex: i, matchKey: `${a}:${i}` }));
      const bg = Array.from({ length: streams }, (_, s) => evaluationBackgroundSessionId(a, variant, s));
      runs.push({ order: runs.length, attempt: a, position, variant, sessionSeed, sessions, backgroundSessionIds: bg, flushCachesBefore: true });
    });
  }
  return { seed: options.seed, attempts: options.attempts, sessionsPerAttempt: options.sessionsPerAttempt, variants, proposal, background, runs };
}
