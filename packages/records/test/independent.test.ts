/**
 * Independent decoding: messages written by our encoder are read back by
 * fastavro (Python), which picks the writer schema by a fingerprint it
 * computes itself from the .avsc files. A shared misunderstanding between our
 * code and avsc (canonical form, fingerprint, u64 layout, union encoding)
 * would pass every round-trip test and fail here.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeSingleObject, joinOutcome, type RecordSchema } from '../src/index';
import {
  AVRO_SCHEMA_DIR,
  DECISION_RECORD_V1,
  OUTCOME_RECORD_V1,
  OUTCOME_RECORD_V2,
} from '../src/schemas';
import { baselineDecision, decision, EDGE_WORKER, ev, observation, toComparableJson } from './fixtures';

const scripts = fileURLToPath(new URL('../scripts/', import.meta.url));
let python = '';
let dir = '';

beforeAll(() => {
  // Idempotent: a no-op taking milliseconds once the venv exists.
  python = execFileSync('bash', [join(scripts, 'ensure-fastavro.sh')], { encoding: 'utf8', timeout: 300_000 }).trim().split('\n').pop() ?? '';
  dir = mkdtempSync(join(tmpdir(), 'vantage-records-'));
}, 300_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface PyResult {
  source: string;
  ok: boolean;
  schema?: string;
  fingerprint?: string;
  value?: unknown;
  reason?: string;
}

function runPython(args: string[], input?: string): string {
  return execFileSync(python, [join(scripts, 'decode_with_fastavro.py'), '--schemas', AVRO_SCHEMA_DIR, ...args], { encoding: 'utf8', input, timeout: 60_000 });
}

function decodeFiles(files: string[]): PyResult[] {
  return runPython(files)
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as PyResult);
}

describe('fastavro reads what we write', () => {
  it('agrees on every shipped schema\'s canonical form and fingerprint', () => {
    const rows = runPython(['--canonical'])
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { schema: string; canonical: string; fingerprint: string });
    const ours = [DECISION_RECORD_V1, OUTCOME_RECORD_V1, OUTCOME_RECORD_V2];
    expect(rows.map((r) => r.schema).sort()).toEqual(ours.map((s) => s.file).sort());
    for (const s of ours) {
      const theirs = rows.find((r) => r.schema === s.file);
      expect(theirs?.canonical, s.file).toBe(s.canonicalForm);
      expect(theirs?.fingerprint, s.file).toBe(s.fingerprintHex);
    }
  });

  it('decodes decisions and outcomes (u64 >= 2^63, nulls, unicode) to the values written', () => {
    const outcome = joinOutcome(decision(), [ev('first_token', 1_732_000_000_250), ev('done', 1_732_000_002_000, { usage: { inputTokens: 7, outputTokens: 3, cachedTokens: 4 } })], {
      requestId: 'req-1',
      closedBy: 'complete',
      sources: [
        { stream: 'DECISIONS', sequence: 9_007_199_254_740_990, part: 'decision' },
        { stream: 'LIFECYCLE', sequence: 1, part: 'done' },
      ],
      joinLatencyMs: 0.125,
    });
    const { servedPool: _v2only, ...outcomeV1 } = outcome;
    const cases: { name: string; schema: RecordSchema<unknown>; value: unknown }[] = [
      { name: 'decision-full', schema: DECISION_RECORD_V1, value: decision() },
      { name: 'decision-baseline-nulls', schema: DECISION_RECORD_V1, value: baselineDecision() },
      {
        name: 'decision-unicode-edge-u64',
        schema: DECISION_RECORD_V1,
        value: decision({
          sessionId: 'セッション-😀-ñ',
          detail: '𝔘𝔫𝔦𝔠𝔬𝔡𝔢 "quoted" \\ \u0000 nul',
          chosenWorkerId: EDGE_WORKER,
          observations: [observation({ workerId: 0n as never, model: 'modèle' }), observation({ role: 'capable', workerId: null, status: 'timeout', error: 'observe timed out' })],
        }),
      },
      { name: 'outcome-v2', schema: OUTCOME_RECORD_V2, value: outcome },
      { name: 'outcome-v1', schema: OUTCOME_RECORD_V1, value: outcomeV1 },
      { name: 'outcome-no-decision', schema: OUTCOME_RECORD_V2, value: joinOutcome(null, [], { requestId: 'lost', closedBy: 'deadline' }) },
    ];
    const files = cases.map((c) => {
      const path = join(dir, `${c.name}.bin`);
      writeFileSync(path, encodeSingleObject(c.schema, c.value));
      return path;
    });
    const results = decodeFiles(files);
    expect(results).toHaveLength(cases.length);
    cases.forEach((c, i) => {
      const r = results[i];
      expect(r?.ok, `${c.name}: ${r?.reason}`).toBe(true);
      expect(r?.schema).toBe(c.schema.file);
      expect(r?.fingerprint).toBe(c.schema.fingerprintHex);
      expect(r?.value, c.name).toEqual(toComparableJson(c.value));
    });
    // The exact decimal text of ids at and above 2^63.
    expect((results[0]?.value as { chosenWorkerId: string }).chosenWorkerId).toBe('18446744073709551615');
    expect((results[2]?.value as { chosenWorkerId: string }).chosenWorkerId).toBe('9223372036854775808');
  });

  it('rejects corrupted messages the way our decoder does', () => {
    const good = encodeSingleObject(DECISION_RECORD_V1, decision());
    const badMarker = Buffer.from(good);
    badMarker[1] = 0x02;
    const unknownFp = Buffer.from(good);
    unknownFp[9] = (unknownFp[9] ?? 0) ^ 1;
    const lines = [badMarker, unknownFp, Buffer.concat([good, Buffer.from([1, 2])]), good].map((b) => b.toString('base64')).join('\n');
    const results = runPython(['--base64-lines'], lines)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as PyResult);
    expect(results.map((r) => r.ok)).toEqual([false, false, false, true]);
    expect(results[0]?.reason).toMatch(/bad marker/);
    expect(results[1]?.reason).toMatch(/unknown fingerprint/);
    expect(results[2]?.reason).toMatch(/trailing/);
  });
});
