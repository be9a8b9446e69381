import type { EvaluationAnalysis } from '@vantage/evaluation';
import { fmtG } from '@vantage/fitting';

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

/** What `evaluate` and `study` print of each variant after its session counts: TTFT, session time and the rule's activity. */
export function variantFigures(v: EvaluationAnalysis['variants'][number]): string {
  const r = v.rules;
  return `TTFT mean ${fmtG(v.ttftMs.mean)} ms p90 ${fmtG(v.ttftMs.p90)} ms, session ${fmtG(v.sessionCompletionMs.mean)} ms, could act ${r.couldAct}, overrode ${r.overrode}, fell back ${r.fallbackTotal} of ${r.efficientProposals} efficient proposals`;
}

/** The mean TTFT and session time differences from the baseline, one line each. */
export function differenceLines(a: EvaluationAnalysis): string[] {
  return a.differences
    .filter((x) => x.metric === 'ttft_mean_ms' || x.metric === 'session_completion_mean_ms')
    .map((d) => `${d.variant} - ${d.baseline}: ${d.label} ${fmtG(d.estimate)} ${d.unit} [${fmtG(d.lo)}, ${fmtG(d.hi)}] (${d.method})`);
}
