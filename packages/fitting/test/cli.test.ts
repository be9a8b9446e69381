// `vantage fit` end to end through the real command line (a child process:
// @vantage/cli depends on this package, so importing it here would turn the
// package graph into a cycle).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { loadParameterSet } from '@vantage/rules';
import { synthesize, toJsonl } from './synthetic';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'vantage-fit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function vantage(args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'packages/cli/src/main.ts', ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const input = join(dir, 'rows.jsonl');
const text = toJsonl(synthesize());
writeFileSync(input, text);

describe('vantage fit', () => {
  it('writes a loadable parameter set and an HTML report, progress on stderr, summary on stdout', () => {
    const params = join(dir, 'params.json');
    const report = join(dir, 'report.html');
    const r = vantage(['fit', '--input', input, '--out-params', params, '--out-report', report, '--seed', '3', '--variant', 'count']);
    expect(r.err).toContain('fit: read 576 rows');
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/fit: Q set: 36 conditions, 216 rows\n.*fit: split 60 contention conditions/);
    expect(r.out).toMatch(/parameter set \S+ \(variant count\)/);
    expect(r.out).toMatch(/margins: delta_blind [\d.]+ ms, delta_cache [\d.]+ ms/);
    const set = loadParameterSet(readFileSync(params, 'utf8'));
    expect(set.ok && set.value.variant).toBe('count');
    expect(set.ok && set.value.thresholds.r).toBeGreaterThanOrEqual(1);
    expect(readFileSync(report, 'utf8')).toMatch(/^<!doctype html>/);
  }, 60_000);

  it('refuses bad rows with their line numbers, or leaves them out with --lenient', () => {
    const lines = text.split('\n');
    lines[4] = '{"oops": true}';
    lines[9] = (lines[9] as string).replace('"ttftMs":', '"ttftMs":-5,"x":');
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, lines.join('\n'));
    const params = join(dir, 'p2.json');
    const refused = vantage(['fit', '--input', bad, '--out-params', params, '--out-report', join(dir, 'r2.html')]);
    expect(refused.code).toBe(65);
    expect(refused.err).toContain('2 bad row(s)');
    expect(refused.err).toContain('line 5: not an outcome row');
    expect(refused.err).toContain('line 10: TTFT = -5 ms');
    const lenient = vantage(['fit', '--input', bad, '--out-params', params, '--out-report', join(dir, 'r2.html'), '--lenient', '--q-source', 'all']);
    expect(lenient.code).toBe(0);
    expect(lenient.err).toContain('leaving out 2 bad row(s)');
  }, 60_000);

  it('explains a bad command line', () => {
    const v = vantage(['fit', '--input', input, '--out-params', 'x', '--out-report', 'y', '--variant', 'stage']);
    expect(v.code).toBe(64);
    expect(v.err).toContain('--variant must be one of count, count_prefill, blind, cache');
  }, 60_000);
});
