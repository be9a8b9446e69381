/**
 * Decoded values as printable JSON: u64 (bigint) as exact decimal strings,
 * hash arrays as lists of decimal strings, bytes as their length and hex.
 */
function toPrintable(v: unknown): unknown {
  if (typeof v === 'bigint') return v.toString(10);
  if (v instanceof BigUint64Array) return Array.from(v, (x) => x.toString(10));
  if (v instanceof Uint8Array) return { bytes: v.length, hex: Buffer.from(v).toString('hex') };
  if (Array.isArray(v)) return v.map(toPrintable);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) {
      Object.defineProperty(out, k, { value: toPrintable((v as Record<string, unknown>)[k]), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return v;
}

export function printJson(v: unknown): string {
  return `${JSON.stringify(toPrintable(v), null, 2)}\n`;
}
