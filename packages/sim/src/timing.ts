/**
 * How long one engine forward pass takes: the engine describes the pass
 * (`StepShape`), a `TimingModel` turns it into milliseconds (default Dynamo's
 * mocker polynomial; `scaledTiming` gives pools different speeds).
 */

export interface StepShape {
  /** Requests contributing prefill tokens. */
  readonly prefillRequests: number;
  /**
   * Sum over the prefill requests of the tokens each has computed (or found
   * cached) by the end of this pass: its sequence length as far as this pass
   * takes it. With `prefillPrefixTokens`, what Dynamo's batched prefill model
   * reads (`batchedPrefillTokens`).
   */
  readonly prefillThroughTokens: number;
  /** Sum over the prefill requests of the tokens computed or cached before this pass. */
  readonly prefillPrefixTokens: number;
  /**
   * Requests decoding in this pass: each computes one token after its first
   * (a request whose prefill completes in the pass emits its first token but
   * is prefill work, not decode).
   */
  readonly decodeRequests: number;
  /**
   * Sum of the decoding requests' context lengths in tokens, counting the
   * token computed in this pass (logical: a shared prefix counts once per
   * request). Dynamo's `active_kv_tokens` for the decode-time model.
   */
  readonly decodeKvTokens: number;
  /** KV capacity in tokens (GPU blocks × block size). */
  readonly totalKvTokens: number;
}

export interface TimingModel {
  /** Duration of the pass in ms; must be > 0 whenever the pass did any work. */
  stepMs(shape: StepShape): number;
}

/** Dynamo mocker prefill polynomial: ms for T new tokens in one pass (0 for none). */
export function polynomialPrefillMs(tokens: number): number {
  if (tokens <= 0) return 0;
  return 4.209989e-7 * tokens * tokens + 1.518344e-2 * tokens + 16.50142;
}

/** Dynamo mocker decode polynomial: ms for one decode pass at KV usage fraction u (clamped to [0, 1]). */
export function polynomialDecodeMs(u: number): number {
  const x = Math.min(1, Math.max(0, u));
  return Math.max(1, -25.74 * x * x + 54.01 * x + 5.74);
}

/**
 * The prefill tokens Dynamo 1.6.1's replay times a pass by: it reduces the
 * batch to one mean request, `batch × (⌊Σ isl / batch⌋ − ⌊Σ prefix / batch⌋)`
 * in integers (its `predict_prefill_time(batch_size, isl, prefix)`), so a
 * batch of n prefill requests can count up to n − 1 tokens fewer, or more,
 * than it computes. Measured against `run_trace_replay` (see the README).
 */
function batchedPrefillTokens(s: StepShape): number {
  const n = s.prefillRequests;
  if (n <= 0) return 0;
  return n * (Math.floor(s.prefillThroughTokens / n) - Math.floor(s.prefillPrefixTokens / n));
}

/** The mocker's vLLM pass, as Dynamo 1.6.1's replay times it (`end = start + prefill + decode`): README.md, "Fidelity notes" (pass time). */
export const polynomialTiming: TimingModel = Object.freeze({
  stepMs(s: StepShape): number {
    const prefill = polynomialPrefillMs(batchedPrefillTokens(s));
    const decode = s.decodeRequests > 0 ? polynomialDecodeMs(s.totalKvTokens > 0 ? s.decodeKvTokens / s.totalKvTokens : 1) : 0;
    return prefill + decode;
  },
});

/**
 * A model `factor` times faster (factor > 1) or slower (< 1) than `base`:
 * the same shape of curve, every pass divided by the factor.
 */
export function scaledTiming(base: TimingModel, factor: number): TimingModel {
  if (!(factor > 0) || !Number.isFinite(factor)) throw new RangeError(`speed factor must be positive, got ${factor}`);
  return Object.freeze({ stepMs: (s: StepShape) => base.stepMs(s) / factor });
}
