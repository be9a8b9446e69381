import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  createParameterSet,
  DEFAULT_PARAMETER_SET,
  loadParameterSet,
  ParameterStore,
  serializeParameterSet,
  validateParameterSet,
} from '@vantage/rules';
import { fitted, params } from './fixtures';

/** A valid document as plain mutable JSON, for breaking one field at a time. */
function doc(): Record<string, any> {
  return JSON.parse(serializeParameterSet(params()));
}

function errorsOf(d: unknown): readonly string[] {
  const r = validateParameterSet(d);
  return r.ok ? [] : r.errors;
}

describe('loadParameterSet', () => {
  it('accepts the development default and round-trips it', () => {
    const r = loadParameterSet(serializeParameterSet(DEFAULT_PARAMETER_SET));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.value).toEqual(DEFAULT_PARAMETER_SET);
    expect(DEFAULT_PARAMETER_SET.variant).toBe('stage');
  });

  it('returns a deep-frozen copy that does not alias the input', () => {
    const d = doc();
    const r = validateParameterSet(d);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    d.gate.maxAgeMs = 1;
    expect(r.value.gate.maxAgeMs).toBe(500);
    expect(Object.isFrozen(r.value.models.efficient.qTable.valuesMs[0])).toBe(true);
  });

  it('refuses text that is not JSON', () => {
    const r = loadParameterSet('{ "schema": ');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]).toMatch(/^not valid JSON/);
  });

  // Each row breaks one field; the error list must name it.
  const rows: [string, (d: Record<string, any>) => void, RegExp][] = [
    ['wrong schema id', (d) => (d.schema = 'other'), /^\/schema: must be "vantage.parameter-set"/],
    ['future schema version', (d) => (d.schemaVersion = 2), /^\/schemaVersion: must be 1/],
    ['empty version', (d) => (d.version = ''), /^\/version:/],
    ['unknown top-level key', (d) => (d.rules = {}), /^\/: unknown property "rules"/],
    ['missing gate', (d) => delete d.gate, /^\/: missing required property "gate"/],
    ['unknown variant', (d) => (d.variant = 'smart'), /^\/variant: must be one of/],
    ['createdAt not RFC 3339', (d) => (d.createdAt = 'yesterday'), /^\/createdAt:/],
    ['createdAt impossible date', (d) => (d.createdAt = '2026-13-45T00:00:00Z'), /^\/createdAt: .* not a real date/],
    ['unknown model key', (d) => (d.models.capable.weights = []), /^\/models\/capable: unknown property "weights"/],
    ['empty model name', (d) => (d.models.efficient.name = ''), /^\/models\/efficient\/name:/],
    ['same model twice', (d) => (d.models.capable.name = d.models.efficient.name), /^\/models\/capable\/name: must differ/],
    ['nGrid not increasing', (d) => (d.models.efficient.qTable.nGrid = [1000, 1000, 5000]), /^\/models\/efficient\/qTable\/nGrid\/1: .*strictly increasing/],
    ['nGrid decreasing', (d) => (d.models.capable.qTable.nGrid = [5000, 3000, 1000]), /^\/models\/capable\/qTable\/nGrid\/1:/],
    ['nGrid zero', (d) => (d.models.efficient.qTable.nGrid = [0, 3000, 5000]), /^\/models\/efficient\/qTable\/nGrid\/0:/],
    ['nGrid single point', (d) => (d.models.efficient.qTable.nGrid = [1000]), /^\/models\/efficient\/qTable\/nGrid:/],
    ['fGrid above 1', (d) => (d.models.efficient.qTable.fGrid = [0, 0.5, 1.5]), /^\/models\/efficient\/qTable\/fGrid\/2:/],
    ['fGrid not starting at 0', (d) => (d.models.efficient.qTable.fGrid = [0.1, 0.5, 1]), /^\/models\/efficient\/qTable\/fGrid\/0: must be 0/],
    ['fGrid not increasing', (d) => (d.models.efficient.qTable.fGrid = [0, 1, 0.5]), /^\/models\/efficient\/qTable\/fGrid\/2:/],
    ['too few rows', (d) => d.models.efficient.qTable.valuesMs.pop(), /^\/models\/efficient\/qTable\/valuesMs: has 2 rows but nGrid has 3/],
    ['short row', (d) => d.models.capable.qTable.valuesMs[1].pop(), /^\/models\/capable\/qTable\/valuesMs\/1: has 2 values but fGrid has 3/],
    ['zero value', (d) => (d.models.efficient.qTable.valuesMs[2][1] = 0), /^\/models\/efficient\/qTable\/valuesMs\/2\/1:/],
    ['negative value', (d) => (d.models.efficient.qTable.valuesMs[0][0] = -3), /^\/models\/efficient\/qTable\/valuesMs\/0\/0:/],
    ['string value', (d) => (d.models.efficient.qTable.valuesMs[0][0] = '800'), /^\/models\/efficient\/qTable\/valuesMs\/0\/0: must be number/],
    ['clamp flag missing', (d) => delete d.models.efficient.qTable.clampN, /missing required property "clampN"/],
    ['sd zero', (d) => (d.models.efficient.standardization.logR.sd = 0), /^\/models\/efficient\/standardization\/logR\/sd:/],
    ['sd negative', (d) => (d.models.capable.standardization.logP.sd = -1), /^\/models\/capable\/standardization\/logP\/sd:/],
    ['coefficient missing', (d) => delete d.models.capable.cache.cP, /^\/models\/capable\/cache: missing required property "cP"/],
    ['coefficient null', (d) => (d.models.capable.blind.b0 = null), /^\/models\/capable\/blind\/b0: must be number/],
    ['r fractional', (d) => (d.thresholds.r = 2.5), /^\/thresholds\/r:/],
    ['r zero', (d) => (d.thresholds.r = 0), /^\/thresholds\/r:/],
    ['p negative', (d) => (d.thresholds.p = -0.5), /^\/thresholds\/p:/],
    ['count without r', (d) => (d.thresholds.r = null), /^\/thresholds\/r: variant "count" needs r/],
    ['count_prefill with nothing enabled', (d) => ((d.variant = 'count_prefill'), (d.thresholds = { r: null, p: null })), /^\/thresholds: variant "count_prefill" needs r or p/],
    ['negative margin', (d) => (d.margins.deltaCacheMs = -1), /^\/margins\/deltaCacheMs:/],
    ['maxAgeMs zero', (d) => (d.gate.maxAgeMs = 0), /^\/gate\/maxAgeMs:/],
    ['destination limit fractional', (d) => (d.gate.destinationLimit = 1.5), /^\/gate\/destinationLimit:/],
    ['local limit zero', (d) => (d.gate.localLimit = 0), /^\/gate\/localLimit:/],
    ['provenance not an object', (d) => (d.provenance = 'fit-17'), /^\/provenance: must be object/],
  ];

  it.each(rows)('names the problem: %s', (_name, breakIt, expected) => {
    const d = doc();
    breakIt(d);
    const errors = errorsOf(d);
    expect(errors.some((e) => expected.test(e)), `errors were:\n${errors.join('\n')}`).toBe(true);
    // And the same through the text path.
    const r = loadParameterSet(JSON.stringify(d));
    expect(r.ok).toBe(false);
  });

  it('names every problem of a file in one pass (schema and semantic together)', () => {
    const d = doc();
    d.gate.localLimit = 0;
    d.models.efficient.qTable.nGrid = [3000, 1000, 5000];
    d.models.capable.standardization.logN.sd = 0;
    d.extra = true;
    const errors = errorsOf(d);
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\/gate\/localLimit:/),
        expect.stringMatching(/^\/models\/efficient\/qTable\/nGrid\/1:/),
        expect.stringMatching(/^\/models\/capable\/standardization\/logN\/sd:/),
        expect.stringMatching(/^\/: unknown property "extra"/),
      ]),
    );
  });

  it('refuses non-finite numbers in objects built in code', () => {
    const d = doc();
    d.models.capable.blind.bR = Number.NaN;
    d.models.efficient.standardization.logN.mean = Number.POSITIVE_INFINITY;
    const errors = errorsOf(d);
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^\/models\/capable\/blind\/bR: NaN is not a finite number/),
        expect.stringMatching(/^\/models\/efficient\/standardization\/logN\/mean: Infinity is not a finite number/),
      ]),
    );
  });
});

describe('createParameterSet', () => {
  it('derives version from createdAt and a content hash', () => {
    const a = params();
    expect(a.version).toMatch(/^20260301T120000Z-[0-9a-f]{12}$/);
    expect(a.createdAt).toBe('2026-03-01T12:00:00.000Z');
    expect(a.provenance).toEqual({ fitReport: 'test' });
    // Same content, different time: same hash.
    const b = params({ createdAt: '2026-04-01T00:00:00Z' });
    expect(b.version.slice(-12)).toBe(a.version.slice(-12));
    // Different content: different hash.
    const c = params({ margins: { deltaBlindMs: 201, deltaCacheMs: 200 } });
    expect(c.version.slice(-12)).not.toBe(a.version.slice(-12));
  });

  it('keeps an explicit version', () => {
    expect(params({ version: '1.4.0' }).version).toBe('1.4.0');
  });

  it('validates what it builds', () => {
    const r = createParameterSet(fitted({ gate: { maxAgeMs: 500, destinationLimit: 0, localLimit: 4 } }));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.join('\n')).toMatch(/\/gate\/destinationLimit/);
    expect(createParameterSet(fitted({ createdAt: 'not a date' })).ok).toBe(false);
  });
});

describe('ParameterStore', () => {
  it('starts with the development default', () => {
    expect(new ParameterStore().current()).toEqual(DEFAULT_PARAMETER_SET);
  });

  it('refuses a bad file with a clear message and keeps the previous set', () => {
    const store = new ParameterStore(params({ version: 'good-1' }));
    const before = store.current();
    const bad = doc();
    bad.models.efficient.standardization.logR.sd = 0;
    bad.version = 'bad-2';
    const r = store.tryReplace(JSON.stringify(bad));
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.activeVersion).toBe('good-1');
      expect(r.message).toMatch(/refused .*\/models\/efficient\/standardization\/logR\/sd.*version good-1 stays active/);
    }
    expect(store.current()).toBe(before);
    expect(store.tryReplace('not json').ok).toBe(false);
    expect(store.current()).toBe(before);
  });

  it('installs a good file', () => {
    const store = new ParameterStore();
    const r = store.tryReplace(serializeParameterSet(params({ version: 'next' })));
    expect(r).toEqual({ ok: true, previousVersion: '0.0.0-development', version: 'next' });
    expect(store.current().version).toBe('next');
  });

  it('refuses an invalid initial set', () => {
    const bad = { ...params(), gate: { maxAgeMs: -1, destinationLimit: 1, localLimit: 1 } };
    expect(() => new ParameterStore(bad)).toThrow(/initial parameter set is invalid: \/gate\/maxAgeMs/);
  });
});

describe('schemas/parameter-set.v1.schema.json', () => {
  it('is a closed draft 2020-12 schema', () => {
    const schema = JSON.parse(readFileSync(new URL('../../../schemas/parameter-set.v1.schema.json', import.meta.url), 'utf8'));
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(schema.additionalProperties).toBe(false);
    // Every object in the schema except the free-form provenance is closed.
    const open: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const n = node as Record<string, unknown>;
      if (n.type === 'object' && n.additionalProperties !== false && !path.endsWith('/provenance')) open.push(path);
      for (const [k, v] of Object.entries(n)) walk(v, `${path}/${k}`);
    };
    walk(schema, '');
    expect(open).toEqual([]);
  });
});
