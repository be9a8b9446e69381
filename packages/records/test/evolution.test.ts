import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  decodeSingleObject,
  encodeSingleObject,
  joinOutcome,
  OUTCOME_REGISTRY,
  SchemaRegistry,
  type OutcomeRecord,
  type OutcomeRecordV1,
  type RecordSchema,
} from '../src/index';
import {
  AVRO_SCHEMA_DIR,
  DECISION_RECORD_V1,
  OUTCOME_RECORD_V1,
  OUTCOME_RECORD_V2,
} from '../src/schemas';
import { decision, ev, MAX_WORKER } from './fixtures';

function outcomeV2(): OutcomeRecord {
  return joinOutcome(decision(), [ev('first_token', 1_732_000_000_400), ev('done', 1_732_000_003_000, { usage: { inputTokens: 100_000, outputTokens: 512, cachedTokens: 88_000 } })], {
    requestId: 'req-1',
    closedBy: 'complete',
    sources: [{ stream: 'DECISIONS', sequence: 17, part: 'decision' }],
  });
}

function withoutServedPool(r: OutcomeRecord): OutcomeRecordV1 {
  const { servedPool: _drop, ...v1 } = r;
  return v1;
}

describe('OutcomeRecord v1 -> v2 (backward: new reader, old data)', () => {
  it('reads v1 bytes with the v2 reader; the added field takes its default', () => {
    const v1 = withoutServedPool(outcomeV2());
    const bytes = encodeSingleObject(OUTCOME_RECORD_V1, v1);
    const r = decodeSingleObject(bytes, OUTCOME_REGISTRY);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.writer.version).toBe(1);
    expect(r.value.servedPool).toBeNull();
    expect(r.value.decision?.chosenWorkerId).toBe(MAX_WORKER);
    expect({ ...r.value, decision: { ...r.value.decision } }).toEqual({ ...v1, servedPool: null, decision: { ...v1.decision } });
  });

  it('reads v2 bytes with the v2 reader', () => {
    const rec = outcomeV2();
    const r = decodeSingleObject(encodeSingleObject(OUTCOME_RECORD_V2, rec), OUTCOME_REGISTRY);
    expect(r.ok && r.writer.version).toBe(2);
    expect(r.ok && r.value.servedPool).toBe('qwen3-235b');
  });
});

describe('OutcomeRecord v2 -> v1 (forward: old reader, new data)', () => {
  it('a reader built for v1 skips the field it does not know', () => {
    const oldReader = new SchemaRegistry(OUTCOME_RECORD_V1, [OUTCOME_RECORD_V1, OUTCOME_RECORD_V2]);
    const rec = outcomeV2();
    const r = decodeSingleObject(encodeSingleObject(OUTCOME_RECORD_V2, rec), oldReader);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect('servedPool' in r.value).toBe(false);
    expect(r.value.status).toBe('completed');
    expect(r.value.uncachedInputTokens).toBe(12_000);
  });
});

describe('schema files follow the evolution rules', () => {
  type Field = { name: string; type: unknown; default?: unknown; aliases?: string[] };
  const fieldsOf = (s: RecordSchema<unknown>): Field[] => (s.json as { fields: Field[] }).fields;

  it('every field added in v2 has a default; no v1 field is removed, renamed or retyped', () => {
    const old = new Map(fieldsOf(OUTCOME_RECORD_V1).map((f) => [f.name, f]));
    for (const f of fieldsOf(OUTCOME_RECORD_V2)) {
      const prev = old.get(f.name) ?? fieldsOf(OUTCOME_RECORD_V1).find((p) => f.aliases?.includes(p.name));
      if (prev === undefined) expect(f, `added field ${f.name} needs a default`).toHaveProperty('default');
      else expect(JSON.stringify(f.type), `type of ${f.name}`).toBe(JSON.stringify(prev.type));
      old.delete(prev?.name ?? '');
    }
    expect([...old.keys()], 'fields dropped from v1').toEqual([]);
  });

  it('each outcome file embeds exactly the shipped DecisionRecord v1', () => {
    // The .avsc files are self-contained for other languages, so the
    // DecisionRecord definition is copied into each OutcomeRecord file; this
    // keeps the copies from drifting apart.
    const dec = JSON.parse(readFileSync(AVRO_SCHEMA_DIR + DECISION_RECORD_V1.file, 'utf8')) as unknown;
    for (const s of [OUTCOME_RECORD_V1, OUTCOME_RECORD_V2]) {
      const field = fieldsOf(s).find((f) => f.name === 'decision');
      expect(field?.type, s.file).toEqual(['null', dec]);
    }
  });

  it('every nullable field is a [null, X] union defaulting to null', () => {
    const walk = (fields: Field[], where: string): void => {
      for (const f of fields) {
        if (Array.isArray(f.type) && f.type[0] === 'null') expect(f.default, `${where}.${f.name}`).toBeNull();
        const inner = (Array.isArray(f.type) ? f.type[1] : f.type) as { fields?: Field[]; items?: { fields?: Field[] } } | string;
        if (typeof inner === 'object' && inner.fields) walk(inner.fields, `${where}.${f.name}`);
        if (typeof inner === 'object' && inner.items?.fields) walk(inner.items.fields, `${where}.${f.name}[]`);
      }
    };
    for (const s of [DECISION_RECORD_V1, OUTCOME_RECORD_V1, OUTCOME_RECORD_V2]) walk(fieldsOf(s), s.file);
  });
});
