/**
 * Seeded generator of agentic coding sessions (README.md, "Workloads"): each turn's prompt is the
 * previous prompt, the previous turn's output and a tool result, so prefixes (the model's own
 * output included, which the engine caches when it generates those exact tokens) are truly shared
 * between turns. Session i draws from its own generator derived from the seed and i, so adding
 * sessions never changes the earlier ones.
 */
import { seededRng, seed32, type Rng } from '@vantage/selection';

export type Dist =
  | { readonly kind: 'const'; readonly value: number }
  | { readonly kind: 'uniform'; readonly min: number; readonly max: number }
  | { readonly kind: 'lognormal'; readonly median: number; readonly sigma: number; readonly min?: number; readonly max?: number }
  | { readonly kind: 'exponential'; readonly mean: number; readonly min?: number; readonly max?: number };

/** A standard normal draw (Box-Muller; 1 - u keeps log() away from 0). */
export function standardNormal(rng: Rng): number {
  return Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
}

/** One draw from `d`. */
export function sample(d: Dist, rng: Rng): number {
  switch (d.kind) {
    case 'const':
      return d.value;
    case 'uniform':
      return d.min + (d.max - d.min) * rng.next();
    case 'lognormal':
      return clamp(d.median * Math.exp(d.sigma * standardNormal(rng)), d.min, d.max);
    case 'exponential':
      return clamp(-d.mean * Math.log(1 - rng.next()), d.min, d.max);
  }
}

function clamp(v: number, lo = -Infinity, hi = Infinity): number {
  return Math.min(hi, Math.max(lo, v));
}

function count(d: Dist, rng: Rng, min: number): number {
  return Math.max(min, Math.round(sample(d, rng)));
}

export interface AgenticSessionConfig {
  readonly sessions: number;
  readonly seed: number | string;
  /** Distinct system prompts sessions draw from (uniformly). Default 1: every session shares one. */
  readonly systemPrompts?: number;
  readonly systemPromptTokens: Dist;
  /** The user's task in turn 1. */
  readonly userTaskTokens: Dist;
  readonly toolResultTokens: Dist;
  readonly outputTokens: Dist;
  readonly turnsPerSession: Dist;
  /** Delay between a turn's completion and the next turn's arrival. */
  readonly thinkTimeMs: Dist;
  /** Delay between consecutive sessions' first arrivals. */
  readonly sessionInterarrivalMs: Dist;
  /** A session ends early once its next prompt would exceed this. Default 131,072. */
  readonly maxContextTokens?: number;
}

/** Token ids are drawn from [0, VOCAB). */
const VOCAB = 150_000;

/** Defaults shaped like a coding agent: a long shared system prompt, short outputs, large tool results. */
export const DEFAULT_AGENTIC_CONFIG: Omit<AgenticSessionConfig, 'sessions' | 'seed'> = Object.freeze<Omit<AgenticSessionConfig, 'sessions' | 'seed'>>({
  systemPrompts: 1,
  systemPromptTokens: { kind: 'const', value: 6000 },
  userTaskTokens: { kind: 'lognormal', median: 400, sigma: 0.8, min: 20, max: 8000 },
  toolResultTokens: { kind: 'lognormal', median: 1200, sigma: 1.0, min: 10, max: 30000 },
  outputTokens: { kind: 'lognormal', median: 250, sigma: 0.9, min: 1, max: 4000 },
  turnsPerSession: { kind: 'uniform', min: 3, max: 30 },
  thinkTimeMs: { kind: 'lognormal', median: 1500, sigma: 0.7, min: 50, max: 60000 },
  sessionInterarrivalMs: { kind: 'exponential', mean: 2000 },
  maxContextTokens: 131_072,
});

export interface SessionTurn {
  /** Full prompt: a prefix of the session's token stream. */
  readonly promptTokens: Uint32Array;
  /** What the model answers on this turn (the next turn's prompt contains it). */
  readonly outputTokens: Uint32Array;
  /** Wait after the previous turn completes before this one arrives (0 for turn 0). */
  readonly thinkTimeMs: number;
}

export interface AgenticSession {
  /** Stable across runs with the same seed. */
  readonly sessionId: string;
  readonly startMs: number;
  readonly turns: readonly SessionTurn[];
}

function fillTokens(out: Uint32Array, from: number, n: number, rng: Rng): void {
  for (let i = 0; i < n; i++) out[from + i] = Math.floor(rng.next() * VOCAB);
}

export function generateAgenticSessions(config: AgenticSessionConfig): AgenticSession[] {
  const c = { ...DEFAULT_AGENTIC_CONFIG, ...config };
  const maxCtx = c.maxContextTokens ?? 131_072;
  const nSystem = c.systemPrompts ?? 1;
  if (!Number.isInteger(c.sessions) || c.sessions < 0) throw new RangeError(`sessions must be a non-negative integer, got ${c.sessions}`);
  if (!Number.isInteger(nSystem) || nSystem <= 0) throw new RangeError(`systemPrompts must be a positive integer, got ${nSystem}`);
  const base = seed32(config.seed);
  const tag = base.toString(16).padStart(8, '0');

  const systemTokens: Uint32Array[] = [];
  for (let k = 0; k < nSystem; k++) {
    const rng = seededRng(`${base}:system:${k}`);
    const n = count(c.systemPromptTokens, rng, 0);
    const t = new Uint32Array(n);
    fillTokens(t, 0, n, rng);
    systemTokens.push(t);
  }

  const arrivalsRng = seededRng(`${base}:arrivals`);
  const sessions: AgenticSession[] = [];
  let startMs = 0;
  for (let s = 0; s < c.sessions; s++) {
    if (s > 0) startMs += Math.max(0, sample(c.sessionInterarrivalMs, arrivalsRng));
    const rng = seededRng(`${base}:session:${s}`);
    const sys = Math.floor(rng.next() * nSystem);
    const sysTok = systemTokens[sys]!;
    const nTurns = count(c.turnsPerSession, rng, 1);
    // Draw every length first, so the stream is allocated once.
    const user = count(c.userTaskTokens, rng, 1);
    const plan: Array<{ added: number; out: number; think: number }> = [];
    let len = sysTok.length + user;
    for (let t = 0; t < nTurns; t++) {
      const added = t === 0 ? sysTok.length + user : count(c.toolResultTokens, rng, 1);
      const think = t === 0 ? 0 : Math.max(0, sample(c.thinkTimeMs, rng));
      if (t > 0) len += added;
      const out = count(c.outputTokens, rng, 1);
      if (len > maxCtx && t > 0) break;
      plan.push({ added, out, think });
      len += out;
    }
    const total = plan.reduce((a, p) => a + p.added + p.out, 0);
    const stream = new Uint32Array(total);
    stream.set(sysTok, 0);
    let pos = sysTok.length;
    const turns: SessionTurn[] = [];
    for (let t = 0; t < plan.length; t++) {
      const p = plan[t]!;
      const fresh = t === 0 ? user : p.added;
      fillTokens(stream, pos, fresh, rng);
      pos += fresh;
      const promptEnd = pos;
      fillTokens(stream, pos, p.out, rng);
      pos += p.out;
      turns.push({
        promptTokens: stream.subarray(0, promptEnd),
        outputTokens: stream.subarray(promptEnd, pos),
        thinkTimeMs: p.think,
      });
    }
    sessions.push({ sessionId: `agent-${tag}-${s}`, startMs, turns });
  }
  return sessions;
}
