import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import { describe, expect, it } from 'vitest';
import {
  bookingEventCodec,
  lifecycleEventCodec,
  observeReplyCodec,
  observeRequestCodec,
  PROTOCOL_SCHEMAS,
  routeReplyCodec,
  routeRequestCodec,
  workerRegistrationCodec,
  type DecodeResult,
} from '@vantage/protocol';
import { ID_MAX_LENGTH, POOL_NAME_PATTERN } from '../src/index';
import { LIFECYCLE_KINDS } from '../src/messages';
import { MAX_HASHES, MAX_LE64_CHARS, MAX_TOKENS, MAX_WORKERS } from '../src/schemas';
import {
  CASES,
  U64_2_63,
  U64_TOP,
  W,
  bookingEvent,
  backgroundLifecycleEvent,
  lifecycleEvent,
  observeReply,
  observeRequest,
  registration,
  routeReply,
  routeRequest,
} from './fixtures';

const SCHEMA_DIR = fileURLToPath(new URL('../../../schemas/protocol/', import.meta.url));

function wire(codec: { encode(v: never): Uint8Array }, value: unknown): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(codec.encode(value as never))) as Record<string, unknown>;
}

function rejected<T>(r: DecodeResult<T>): { code: string; reason: string } {
  if (r.ok) throw new Error('expected a rejection, got a value');
  return { code: r.code, reason: r.reason };
}

describe('round trip', () => {
  it.each(CASES)('%s decodes to what was encoded', (_name, codec, value) => {
    const bytes = codec.encode(value as never);
    const back = codec.decode(bytes);
    expect(back.ok).toBe(true);
    if (back.ok) expect(back.value).toEqual(value);
    // Decoding from a string and from an already-parsed value agree.
    expect(codec.decode(new TextDecoder().decode(bytes))).toEqual(back);
    expect(codec.fromWire(JSON.parse(new TextDecoder().decode(bytes)))).toEqual(back);
  });
});

describe('schema files on disk', () => {
  const files = readdirSync(SCHEMA_DIR).filter((f) => f.endsWith('.json'));

  it('are exactly the schemas the decoders compile', () => {
    expect(files.sort()).toEqual(Object.keys(PROTOCOL_SCHEMAS).sort());
  });

  it("state the limits and vocabularies the module's own checks use", () => {
    const seen = new Set<string>();
    const walk = (node: unknown, key: string): void => {
      if (Array.isArray(node)) return node.forEach((x) => walk(x, key));
      if (typeof node !== 'object' || node === null) return;
      const n = node as Record<string, unknown>;
      const expectAt = (prop: string, want: unknown): void => {
        seen.add(`${key}.${prop}`);
        expect(n[prop], `${key}.${prop}`).toEqual(want);
      };
      if (/^(local|sequence)Hashes$/.test(key) && n.type === 'array') expectAt('maxItems', MAX_HASHES);
      if (key.endsWith('Le64')) expectAt('maxLength', MAX_LE64_CHARS);
      if (key === 'tokenIds' && n.type === 'array') expectAt('maxItems', MAX_TOKENS);
      if (key === 'workers' && n.type === 'array') expectAt('maxItems', MAX_WORKERS);
      if ((key === 'requestId' || key === 'sessionId') && n.type === 'string') expectAt('maxLength', ID_MAX_LENGTH);
      if (key === 'pool' && n.type === 'string') expectAt('pattern', POOL_NAME_PATTERN);
      for (const [k, v] of Object.entries(n)) walk(v, k === 'properties' || k === 'items' || /^(oneOf|anyOf|allOf)$/.test(k) ? key : k);
    };
    for (const schema of Object.values(PROTOCOL_SCHEMAS)) walk(schema, '');
    expect([...seen].sort()).toEqual(
      ['localHashes.maxItems', 'localHashesLe64.maxLength', 'pool.pattern', 'requestId.maxLength', 'sequenceHashes.maxItems', 'sequenceHashesLe64.maxLength', 'sessionId.maxLength', 'tokenIds.maxItems', 'workers.maxItems'],
    );
    const lifecycle = PROTOCOL_SCHEMAS['lifecycle-event.v1.json'] as { properties: { kind: { enum: unknown } } };
    expect(lifecycle.properties.kind.enum).toEqual(LIFECYCLE_KINDS);
  });

  it.each(CASES)('validate the encoder output of %s', (_name, codec, value) => {
    // An independent validator, compiled from the files rather than the module.
    const ajv = new Ajv({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: true });
    const schema: unknown = JSON.parse(readFileSync(`${SCHEMA_DIR}${codec.schemaFile}`, 'utf8'));
    const validate = ajv.compile(schema as object);
    const ok = validate(wire(codec, value));
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });
});

describe('u64 values stay exact', () => {
  it('writes worker ids and hashes at and above 2^63 as exact decimal strings', () => {
    const w = wire(bookingEventCodec, bookingEvent);
    expect(w.workerId).toBe('18446744073709551615');
    // Hash lists go out compactly; read the base64 back as little-endian u64s by hand.
    const seq = Buffer.from(w.sequenceHashesLe64 as string, 'base64');
    expect([0, 1].map((i) => seq.readBigUInt64LE(i * 8).toString())).toEqual(['18446744073709551615', '9223372036854775813']);
    expect(w.sequenceHashes).toBeUndefined();
    // The decimal form of a booking's hashes stays accepted; two lists at once are refused.
    const { sequenceHashesLe64: _drop, ...rest } = w;
    const viaDecimal = bookingEventCodec.fromWire({ ...rest, sequenceHashes: ['18446744073709551615', '9223372036854775813'] });
    expect(viaDecimal.ok && viaDecimal.value.sequenceHashes ? [...viaDecimal.value.sequenceHashes] : null).toEqual([2n ** 64n - 1n, 9223372036854775813n]);
    expect(bookingEventCodec.fromWire({ ...w, localHashes: ['1'] }).ok).toBe(false);
    const o = wire(observeRequestCodec, observeRequest) as { prompt: { localHashesLe64: string } };
    // Independent check of the compact form: read the base64 bytes back as little-endian u64s by hand.
    const b = Buffer.from(o.prompt.localHashesLe64, 'base64');
    expect([0, 1, 2, 3].map((i) => b.readBigUInt64LE(i * 8).toString())).toEqual(['18446744073709551615', '9223372036854775808', '0', '12345']);
    // The decimal form stays accepted.
    const dec = observeRequestCodec.fromWire({ v: 1, prompt: { localHashes: ['18446744073709551615', '1'] }, promptTokens: 8 });
    expect(dec.ok && dec.value.prompt.kind === 'local_hashes' ? [...dec.value.prompt.localHashes] : null).toEqual([18446744073709551615n, 1n]);
    // A length that is not whole u64s is refused.
    expect(observeRequestCodec.fromWire({ v: 1, prompt: { localHashesLe64: Buffer.alloc(7).toString('base64') }, promptTokens: 8 }).ok).toBe(false);
  });

  it('reads them back as the same bigints', () => {
    const r = observeReplyCodec.decode(observeReplyCodec.encode(observeReply));
    expect(r.ok && r.value.workers[0]!.workerId).toBe(U64_2_63 + 1n);
    expect(r.ok && r.value.workers[1]!.workerId).toBe(U64_TOP);
    expect(r.ok && r.value.dynamoChoice?.workerId).toBe(W);
  });

  it('rejects a decimal above 2^64-1 with its own code and path', () => {
    const w = wire(bookingEventCodec, bookingEvent);
    const { sequenceHashesLe64: _compact, ...decimalOnly } = w;
    const r = rejected(bookingEventCodec.fromWire({ ...decimalOnly, sequenceHashes: ['1', '18446744073709551616'] }));
    expect(r.code).toBe('u64_out_of_range');
    expect(r.reason).toContain('/sequenceHashes/1');
    expect(rejected(bookingEventCodec.fromWire({ ...w, workerId: '99999999999999999999' })).code).toBe('u64_out_of_range');
  });

  it.each([
    ['negative', '-1'],
    ['leading zero', '01'],
    ['hex', '0xff'],
    ['21 digits', '100000000000000000000'],
    ['empty', ''],
    ['a JSON number', 12],
  ])('rejects a u64 written as %s', (_what, bad) => {
    const w = wire(bookingEventCodec, bookingEvent);
    const r = rejected(bookingEventCodec.fromWire({ ...w, workerId: bad }));
    expect(r.code).toBe('schema_violation');
    expect(r.reason).toContain('/workerId');
  });
});

describe('rejections', () => {
  it('refuses bytes that are not JSON or not UTF-8', () => {
    expect(rejected(routeRequestCodec.decode('{"v":1,')).code).toBe('malformed_json');
    expect(rejected(routeRequestCodec.decode(Uint8Array.from([0x7b, 0xff, 0x7d]))).code).toBe('malformed_json');
  });

  it('refuses payloads over the size limit before parsing', () => {
    const bytes = routeRequestCodec.encode(routeRequest);
    expect(rejected(routeRequestCodec.decode(bytes, 10)).code).toBe('payload_too_large');
  });

  it('refuses non-objects and other versions', () => {
    expect(rejected(routeRequestCodec.decode('[1,2]')).code).toBe('schema_violation');
    expect(rejected(routeRequestCodec.decode('null')).code).toBe('schema_violation');
    const w = wire(routeRequestCodec, routeRequest);
    const r = rejected(routeRequestCodec.fromWire({ ...w, v: 2 }));
    expect(r.code).toBe('unsupported_version');
    expect(rejected(routeRequestCodec.fromWire({ ...w, v: undefined })).reason).toMatch(/required/);
  });

  it('names the missing field', () => {
    const w = wire(routeRequestCodec, routeRequest);
    delete w.sessionId;
    const r = rejected(routeRequestCodec.fromWire(w));
    expect(r.code).toBe('schema_violation');
    expect(r.reason).toContain('sessionId');
  });

  it('requires exactly one prompt form', () => {
    const w = wire(observeRequestCodec, observeRequest) as { prompt: Record<string, unknown> };
    expect(rejected(observeRequestCodec.fromWire({ ...w, prompt: { ...w.prompt, tokenIds: [1] } })).reason).toContain('/prompt');
    expect(rejected(observeRequestCodec.fromWire({ ...w, prompt: {} })).code).toBe('schema_violation');
    expect(rejected(observeRequestCodec.fromWire({ ...w, prompt: { tokenIds: [2 ** 32] } })).reason).toContain('/prompt/tokenIds/0');
  });

  it('refuses pool names that are not one subject token', () => {
    const w = wire(lifecycleEventCodec, lifecycleEvent);
    for (const pool of ['a.b', 'a*', '>', 'has space', '']) {
      expect(rejected(lifecycleEventCodec.fromWire({ ...w, pool })).reason).toContain('/pool');
    }
  });

  it('requires usage on a usage event, and a known kind', () => {
    const w = wire(lifecycleEventCodec, lifecycleEvent);
    delete w.usage;
    expect(rejected(lifecycleEventCodec.fromWire(w)).reason).toContain('usage');
    expect(lifecycleEventCodec.fromWire({ ...w, kind: 'done' }).ok).toBe(true);
    expect(rejected(lifecycleEventCodec.fromWire({ ...w, kind: 'paused' })).reason).toContain('/kind');
  });

  it('lifecycle background and arrival: omitted on the wire unless set, defaulted on decode, type-checked', () => {
    const plain = wire(lifecycleEventCodec, lifecycleEvent);
    expect('background' in plain).toBe(false);
    expect('arrivalMs' in plain).toBe(false);
    const { background: _b, arrivalMs: _a, ...legacy } = lifecycleEvent;
    const fromLegacy = lifecycleEventCodec.decode(lifecycleEventCodec.encode(legacy));
    expect(fromLegacy.ok && fromLegacy.value.background === false && fromLegacy.value.arrivalMs === null).toBe(true);
    const bg = wire(lifecycleEventCodec, backgroundLifecycleEvent);
    expect(bg.background).toBe(true);
    expect(bg.arrivalMs).toBe(backgroundLifecycleEvent.arrivalMs);
    expect(rejected(lifecycleEventCodec.fromWire({ ...bg, background: 'yes' })).reason).toContain('/background');
    expect(rejected(lifecycleEventCodec.fromWire({ ...bg, arrivalMs: -1 })).reason).toContain('/arrivalMs');
    expect(rejected(lifecycleEventCodec.fromWire({ ...bg, arrivalMs: 1.5 })).reason).toContain('/arrivalMs');
  });

  it('refuses a booking carrying both hash forms', () => {
    const w = wire(bookingEventCodec, bookingEvent);
    expect(rejected(bookingEventCodec.fromWire({ ...w, localHashes: ['1'] })).code).toBe('schema_violation');
  });

  it('refuses a registration without capacity, but not a deregistration', () => {
    const w = wire(workerRegistrationCodec, registration);
    delete w.maxNumBatchedTokens;
    expect(rejected(workerRegistrationCodec.fromWire(w)).reason).toContain('maxNumBatchedTokens');
    expect(rejected(workerRegistrationCodec.fromWire({ ...w, maxNumBatchedTokens: 8192, dpSize: 0 })).reason).toContain('/dpSize');
  });

  it('refuses negative counts, fractional integers and bad enums', () => {
    const w = wire(observeReplyCodec, observeReply) as { workers: Record<string, unknown>[] };
    const bad = (patch: Record<string, unknown>) => ({ ...w, workers: [{ ...w.workers[0], ...patch }] });
    expect(rejected(observeReplyCodec.fromWire(bad({ R: -1 }))).reason).toContain('/workers/0/R');
    expect(rejected(observeReplyCodec.fromWire(bad({ K: 1.5 }))).reason).toContain('/workers/0/K');
    expect(rejected(observeReplyCodec.fromWire(bad({ P: 'high' }))).reason).toContain('/workers/0/P');
    const rr = wire(routeReplyCodec, routeReply);
    expect(rejected(routeReplyCodec.fromWire({ ...rr, reason: 'maybe' })).reason).toContain('/reason');
  });

  it('ignores unknown fields (additive evolution within v1)', () => {
    const w = wire(routeRequestCodec, routeRequest);
    const r = routeRequestCodec.fromWire({ ...w, addedLater: { x: 1 } });
    expect(r).toEqual({ ok: true, value: routeRequest });
  });
});
