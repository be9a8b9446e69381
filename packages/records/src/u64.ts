import avro from 'avsc';
import { isU64 } from '@vantage/types';

/**
 * Exact u64 on the wire: `{"type":"fixed","name":"U64","size":8,"logicalType":"vantage-u64"}`,
 * the value as 8 bytes big-endian (README, "Numbers", says why not `long` or a decimal string).
 * Readers that do not know the logical type get the raw bytes, as the Avro spec requires.
 */
const U64_LOGICAL_TYPE = 'vantage-u64';

// avsc's typings declare the hooks `protected` and untyped (`any`), so the
// overrides below restate them with precise types.
class U64Type extends avro.types.LogicalType {
  protected override _fromValue(val: Buffer | undefined): bigint {
    // avsc's tap hands back `undefined` when the fixed runs past the end of a
    // truncated buffer; the decode is then reported as truncated and this
    // placeholder is discarded, so do not throw a less precise error here.
    return val === undefined || val.length < 8 ? 0n : val.readBigUInt64BE(0);
  }

  protected override _toValue(val: unknown): Buffer | undefined {
    // Returning undefined makes avsc's validity check (and so the encoder)
    // reject the value instead of writing a wrong one.
    if (!isU64(val)) return undefined;
    const b = Buffer.allocUnsafe(8);
    b.writeBigUInt64BE(val, 0);
    return b;
  }

  protected override _resolve(type: avro.Type): ((v: unknown) => unknown) | undefined {
    // Every writer schema this package resolves is one of its own, parsed with this logical type:
    // the writer's reader already yields bigint.
    return type instanceof U64Type ? (v) => v : undefined;
  }
}

/** avsc parse options every schema in this package is parsed with. */
export const AVSC_OPTIONS = Object.freeze({
  logicalTypes: { [U64_LOGICAL_TYPE]: U64Type },
  // A logical type that fails to build must fail loudly at start-up, not
  // degrade silently to raw bytes.
  assertLogicalTypes: true,
});
