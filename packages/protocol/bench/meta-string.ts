/**
 * `JSON.stringify({ pool, policy, reasons })`, the same string, built by concatenation: the baseline
 * `meta-json.ts` times `writeMetaJson` against (V8's generic stringify is slower still, its number
 * formatting going through a slow path). Tested against JSON.stringify.
 */
export function metaJson(pool: string, policy: { readonly name: string; readonly params: Readonly<Record<string, number>> } | null, reasons: readonly string[]): string {
  let s = '{"pool":' + JSON.stringify(pool) + ',"policy":';
  if (policy === null) s += 'null';
  else {
    s += '{"name":' + JSON.stringify(policy.name) + ',"params":{';
    const params = policy.params;
    let first = true;
    for (const k of Object.keys(params)) {
      const v = params[k]!;
      // As JSON.stringify writes a number: a non-finite one is null.
      s += (first ? '' : ',') + JSON.stringify(k) + ':' + (Number.isFinite(v) ? String(v) : 'null');
      first = false;
    }
    s += '}}';
  }
  return s + ',"reasons":' + (reasons.length === 0 ? '[]' : JSON.stringify(reasons)) + '}';
}
