// The HTML report is self-contained and shows each part; `vantage evaluate`
// end to end through the real command line (a child process: @vantage/cli
// depends on this package).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { analyzeEvaluation, renderEvaluationHtml, type EvaluationAnalysis } from '../src/index';
import { outcomeRow, syntheticEvaluation, toJsonl } from './synthetic';

const syn = syntheticEvaluation({ attempts: 3, sessions: 4 });

describe('renderEvaluationHtml', () => {
  const extra = outcomeRow({ requestId: 'fb', sessionId: 'eval:0:cache_aware:0', variant: 'cache_aware', reason: 'fallback_destination_limit', arrivalMs: 5 });
  const a = analyzeEvaluation([...syn.rows.filter((r) => r['requestId'] !== 'eval:0:cache_aware:0/0'), { ...extra, requestId: 'eval:0:cache_aware:0/0' }], { iterations: 200 });
  const html = renderEvaluationHtml(a);

  it('is one page with no scripts or external assets', () => {
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).not.toMatch(/<script|<link|<img|src=|@import|url\(/i);
    const urls = html.match(/https?:\/\/[^"'\s)]+/g) ?? [];
    expect(new Set(urls)).toEqual(new Set(['http://www.w3.org/2000/svg']));
  });

  it('has the per-variant table, a forest plot, TTFT distributions and the decision bars', () => {
    for (const v of ['baseline', 'request_count', 'count_prefill', 'cache_blind', 'cache_aware']) expect(html).toContain(`<td>${v}</td>`);
    expect(html).toContain('Mean TTFT: variant − baseline (ms)');
    expect(html).toContain('TTFT empirical CDF');
    expect(html).toContain('<polyline');
    expect(html).toContain('box p25–p75');
    expect(html).toContain('Decisions by reason');
    expect(html).toContain('fallback_destination_limit');
    expect(html).toContain('fallback_observations_stale');
    expect(html).toContain('What the records do not show');
  });

  it('escapes what it shows and survives an analysis without a baseline', () => {
    const weird = outcomeRow({ requestId: 'w', sessionId: 's', variant: '<b>&x', reason: 'kept', arrivalMs: 1 });
    const b: EvaluationAnalysis = analyzeEvaluation([weird], { iterations: 10 });
    const h = renderEvaluationHtml(b);
    expect(h).toContain('&lt;b&gt;&amp;x');
    expect(h).not.toContain('<b>&x');
    expect(h).toContain('no rows of the baseline variant');
  });
});

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'vantage-evaluate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function vantage(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', ...args], { cwd: root, encoding: 'utf8', timeout: 90_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('vantage evaluate', () => {
  const input = join(dir, 'outcomes.jsonl');
  const text = toJsonl(syn.rows);
  writeFileSync(input, text);

  it('writes the report and the analysis, progress on stderr, a summary on stdout; reproducible', () => {
    const out = join(dir, 'report.html');
    const json = join(dir, 'analysis.json');
    const r = vantage(['evaluate', '--input', input, '--out', out, '--json', json, '--bootstrap', '300', '--seed', '7']);
    expect(r.err).toContain(`evaluate: read ${syn.rows.length} rows`);
    expect(r.code).toBe(0);
    expect(r.err).toContain('evaluate: cache_aware vs baseline');
    expect(r.err).toContain('evaluate: wrote report');
    expect(r.out).toMatch(/cache_aware - baseline: Mean TTFT -200 ms \[/);
    expect(readFileSync(out, 'utf8')).toMatch(/^<!doctype html>/);
    const a = JSON.parse(readFileSync(json, 'utf8')) as EvaluationAnalysis;
    expect(a.options).toEqual({ seed: 7, iterations: 300, confidence: 0.95, baseline: 'baseline' });
    const again = analyzeEvaluation(syn.rows, { seed: 7, iterations: 300 });
    expect(a.differences).toEqual(JSON.parse(JSON.stringify(again.differences)));
  }, 120_000);

  it('refuses bad rows by line unless --lenient, and bad arguments', () => {
    const lines = text.split('\n');
    lines[2] = '{"oops": 1}';
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, lines.join('\n'));
    const refused = vantage(['evaluate', '--input', bad, '--out', join(dir, 'r.html')]);
    expect(refused.code).toBe(65);
    expect(refused.err).toContain('line 3: not an outcome row');
    const lenient = vantage(['evaluate', '--input', bad, '--out', join(dir, 'r.html'), '--lenient', '--bootstrap', '50']);
    expect(lenient.code).toBe(0);
    expect(vantage(['evaluate', '--input', input, '--out', join(dir, 'x.html'), '--bootstrap', '0']).code).toBe(64);
    expect(vantage(['evaluate', '--input', join(dir, 'missing.jsonl'), '--out', join(dir, 'x.html')]).code).toBe(66);
  }, 180_000);
});
