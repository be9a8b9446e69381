/**
 * Competing (background) traffic of an evaluation run: a fixed, seeded
 * open-loop load played beside the agent sessions so the report can show
 * each variant's effect on traffic it does not route (seed 000: "Measured
 * outcomes [...] effects on competing traffic").
 *
 * Matched: the plan is a function of the spec alone (seed included), never
 * of the attempt or the variant, so every run of every variant and attempt
 * sees the same requests at the same offsets from the run's start. Arrivals
 * are open loop (fixed offsets, not waiting for earlier responses), so a
 * variant that slows the fleet cannot thin out the load it is judged on.
 *
 * The harness sends each request through the booking path Dynamo's router
 * uses (its own choice on the request's pool, booked on
 * `vantage.v1.bookings.{pool}`, so the indexers count it in R and P), never
 * through the decision service, with session id
 * `evalbg:<attempt>:<variant>:<stream>` and lifecycle events marked
 * `background: true` with their `arrivalMs`.
 */
import type { Role } from './calibration-plan';
import { hash32, streamFor } from '@vantage/random';

export interface BackgroundTrafficSpec {
  /** Independent streams (the bootstrap's units for competing traffic). */
  readonly streams: number;
  readonly requestsPerStream: number;
  /** Mean gap between a stream's arrivals, sim ms (exponential gaps; the first arrival is one gap in). */
  readonly meanGapMs: number;
  /** Prompt length, uniform in [min, max] tokens; fresh content (nothing shared with the sessions). */
  readonly promptTokens: { readonly min: number; readonly max: number };
  /** Output length, uniform in [min, max] tokens. */
  readonly outputTokens: { readonly min: number; readonly max: number };
  /** Fraction of requests served by the capable pool (the rest by the efficient one). */
  readonly capableFraction: number;
  readonly seed: number;
}

export interface BackgroundRequestPlan {
  readonly stream: number;
  readonly index: number;
  /** Offset from the run's start, sim ms. */
  readonly arrivalMs: number;
  readonly role: Role;
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Seed of the request's token content. */
  readonly contentSeed: number;
}

/** The main job's default: light enough to leave the sessions' picture intact, present on both pools. */
export const DEFAULT_BACKGROUND_TRAFFIC: BackgroundTrafficSpec = Object.freeze({
  streams: 4,
  requestsPerStream: 6,
  meanGapMs: 6_000,
  promptTokens: Object.freeze({ min: 1_024, max: 4_096 }),
  outputTokens: Object.freeze({ min: 16, max: 64 }),
  capableFraction: 0.5,
  seed: 1,
});

function problems(s: BackgroundTrafficSpec): string[] {
  const out: string[] = [];
  const int = (name: string, v: number, min: number): void => {
    if (!Number.isInteger(v) || v < min) out.push(`${name} = ${v} must be an integer >= ${min}`);
  };
  int('streams', s.streams, 0);
  int('requestsPerStream', s.requestsPerStream, 1);
  if (!(Number.isFinite(s.meanGapMs) && s.meanGapMs > 0)) out.push(`meanGapMs = ${s.meanGapMs} must be a positive number`);
  for (const [name, r] of [
    ['promptTokens', s.promptTokens],
    ['outputTokens', s.outputTokens],
  ] as const) {
    int(`${name}.min`, r.min, 1);
    int(`${name}.max`, r.max, 1);
    if (r.max < r.min) out.push(`${name}.max ${r.max} < ${name}.min ${r.min}`);
  }
  if (!(s.capableFraction >= 0 && s.capableFraction <= 1)) out.push(`capableFraction = ${s.capableFraction} must lie in [0, 1]`);
  if (!(Number.isSafeInteger(s.seed) && s.seed >= 0)) out.push(`seed = ${s.seed} must be a non-negative integer`);
  return out;
}

/**
 * Every request of the load, ordered by arrival (ties by stream, index).
 * Deterministic in the spec; throws RangeError on a spec it cannot play.
 */
export function backgroundTraffic(spec: BackgroundTrafficSpec): BackgroundRequestPlan[] {
  const bad = problems(spec);
  if (bad.length > 0) throw new RangeError(`background traffic: ${bad.join('; ')}`);
  const out: BackgroundRequestPlan[] = [];
  const uniformInt = (rnd: () => number, r: { min: number; max: number }): number => r.min + Math.floor(rnd() * (r.max - r.min + 1));
  for (let s = 0; s < spec.streams; s++) {
    const rnd = streamFor(spec.seed, 'background', s);
    let t = 0;
    for (let i = 0; i < spec.requestsPerStream; i++) {
      t += -Math.log(1 - rnd()) * spec.meanGapMs;
      out.push({
        stream: s,
        index: i,
        arrivalMs: Math.round(t),
        role: rnd() < spec.capableFraction ? 'capable' : 'efficient',
        promptTokens: uniformInt(rnd, spec.promptTokens),
        outputTokens: uniformInt(rnd, spec.outputTokens),
        contentSeed: hash32(spec.seed, 'background-content', s, i),
      });
    }
  }
  return out.sort((a, b) => a.arrivalMs - b.arrivalMs || a.stream - b.stream || a.index - b.index);
}

/**
 * `STREAMS:REQUESTS:GAP_MS:SEED[:CAPABLE_FRACTION]` (command lines), or `off`
 * (null). Prompt and output ranges are the default's.
 */
export function parseBackgroundSpec(text: string): BackgroundTrafficSpec | null {
  if (text === 'off') return null;
  const m = /^(\d+):(\d+):([0-9.]+):(\d+)(?::([0-9.]+))?$/.exec(text);
  if (m === null) throw new RangeError(`background spec ${JSON.stringify(text)} is not STREAMS:REQUESTS:GAP_MS:SEED[:CAPABLE_FRACTION] or off`);
  const spec: BackgroundTrafficSpec = {
    ...DEFAULT_BACKGROUND_TRAFFIC,
    streams: Number(m[1]),
    requestsPerStream: Number(m[2]),
    meanGapMs: Number(m[3]),
    seed: Number(m[4]),
    capableFraction: m[5] === undefined ? DEFAULT_BACKGROUND_TRAFFIC.capableFraction : Number(m[5]),
  };
  const bad = problems(spec);
  if (bad.length > 0) throw new RangeError(`background spec ${JSON.stringify(text)}: ${bad.join('; ')}`);
  return spec;
}

/** The spec as `parseBackgroundSpec` reads it back (prompt and output ranges must be the default's). */
export function formatBackgroundSpec(s: BackgroundTrafficSpec): string {
  return `${s.streams}:${s.requestsPerStream}:${s.meanGapMs}:${s.seed}:${s.capableFraction}`;
}
