/**
 * Bounds on what a decoder accepts. Dynamo's own messages are far below every
 * default; the bounds exist so one hostile or corrupt message cannot make a
 * consumer allocate without limit or recurse without end.
 */
export interface WireLimits {
  /** Whole message (envelope or bare payload) in bytes. */
  readonly maxMessageBytes: number;
  /** Blocks in one `stored` event, or hashes in one `removed` event. */
  readonly maxBlocksPerEvent: number;
  /** Sequence hashes in one `AddRequest.token_sequence` (one per prompt block). */
  readonly maxSequenceHashes: number;
  /** Events in one `ActiveSequenceEventBatch`. */
  readonly maxBatchEvents: number;
  /** Nesting depth of JSON input and of opaque values such as `mm_extra_info`. */
  readonly maxDepth: number;
  /** Length in UTF-16 units of short strings: request ids, LoRA names, topics. */
  readonly maxStringLength: number;
}

const DEFAULT_WIRE_LIMITS: Readonly<WireLimits> = Object.freeze({
  maxMessageBytes: 16 * 1024 * 1024,
  maxBlocksPerEvent: 65_536,
  // 1M blocks of 16 tokens is a 16M-token prompt: far past any served context.
  maxSequenceHashes: 1 << 20,
  // Dynamo batches at most 256 replica events; leave headroom for future releases.
  maxBatchEvents: 4_096,
  maxDepth: 64,
  maxStringLength: 4_096,
});

/** Merge caller overrides over the defaults, validating each once. */
export function resolveLimits(overrides?: Partial<WireLimits>): Readonly<WireLimits> {
  if (!overrides) return DEFAULT_WIRE_LIMITS;
  const merged = { ...DEFAULT_WIRE_LIMITS, ...overrides };
  for (const [k, v] of Object.entries(merged)) {
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`wire limit ${k} must be a positive integer, got ${String(v)}`);
  }
  return Object.freeze(merged);
}

export interface DecodeOptions {
  readonly limits?: Partial<WireLimits>;
}
