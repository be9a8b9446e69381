import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import {
  DECISION_REGISTRY,
  decodeSingleObject,
  encodeSingleObject,
  OUTCOME_REGISTRY,
  RecordEncodeError,
  type DecodeResult,
} from '../src/index';
import { DECISION_RECORD_V1 } from '../src/schemas';
import { baselineDecision, BIG_WORKER, decision, EDGE_WORKER, MAX_WORKER, observation } from './fixtures';

function expectOk<T>(r: DecodeResult<T>): T {
  if (!r.ok) throw new Error(`expected ok, got ${r.code}: ${r.reason}`);
  return r.value;
}

describe('single-object framing', () => {
  it('writes marker, little-endian fingerprint, then the Avro body', () => {
    const bytes = encodeSingleObject(DECISION_RECORD_V1, decision());
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0xc3, 0x01]));
    expect(bytes.readBigUInt64LE(2)).toBe(DECISION_RECORD_V1.fingerprint);
    expect(bytes.subarray(10)).toEqual(DECISION_RECORD_V1.type.toBuffer(decision()));
  });

  it('round-trips a full record exactly, u64 ids >= 2^63 included', () => {
    const rec = decision();
    const out = expectOk(decodeSingleObject(encodeSingleObject(DECISION_RECORD_V1, rec), DECISION_REGISTRY));
    expect({ ...out }).toEqual(rec);
    expect(out.chosenWorkerId).toBe(MAX_WORKER);
    expect(out.observations[0]?.workerId).toBe(BIG_WORKER);
    expect(out.observations[1]?.suspectReason).toBe('event gap on worker 7 — resync pending ✓');
  });

  it('round-trips a record whose nullable fields are all null', () => {
    const rec = baselineDecision({ detail: null });
    expect({ ...expectOk(decodeSingleObject(encodeSingleObject(DECISION_RECORD_V1, rec), DECISION_REGISTRY)) }).toEqual(rec);
  });

  it('carries u64 as 8 big-endian bytes (not a signed long)', () => {
    const rec = baselineDecision({ chosenWorkerId: EDGE_WORKER });
    const body = encodeSingleObject(DECISION_RECORD_V1, rec);
    // [null, U64] union: branch index 1 zig-zags to 0x02, then the 8 raw bytes.
    expect(body.includes(Buffer.from('028000000000000000', 'hex'))).toBe(true);
  });

  it('round-trips arbitrary u64 ids and strings (property)', () => {
    fc.assert(
      fc.property(fc.bigUint(2n ** 64n - 1n), fc.bigUint(2n ** 64n - 1n), fc.fullUnicodeString(), (a, b, s) => {
        const rec = decision({
          chosenWorkerId: a as WorkerId,
          detail: s,
          observations: [observation({ workerId: b as WorkerId, model: s })],
        });
        const out = expectOk(decodeSingleObject(encodeSingleObject(DECISION_RECORD_V1, rec), DECISION_REGISTRY));
        expect(out.chosenWorkerId).toBe(a);
        expect(out.observations[0]?.workerId).toBe(b);
        expect(out.detail).toBe(s);
      }),
      { seed: 0x5eed, numRuns: 200 },
    );
  });

  it('accepts a plain Uint8Array view (not only Buffer)', () => {
    const bytes = encodeSingleObject(DECISION_RECORD_V1, decision());
    const padded = new Uint8Array(bytes.length + 7);
    padded.set(bytes, 7);
    expect(decodeSingleObject(padded.subarray(7), DECISION_REGISTRY).ok).toBe(true);
  });
});

describe('encode refuses values that do not fit the schema', () => {
  it.each([
    ['negative worker id', { chosenWorkerId: -1n as WorkerId }],
    ['worker id above u64', { chosenWorkerId: (1n << 64n) as WorkerId }],
    ['worker id as number', { chosenWorkerId: 7 as unknown as WorkerId }],
    ['fractional long', { decisionDurationUs: 1.5 }],
    ['unsafe long', { timestampMs: 2 ** 60 }],
    ['missing boolean', { background: undefined as unknown as boolean }],
  ])('%s', (_name, over) => {
    const bad = decision(over);
    expect(() => encodeSingleObject(DECISION_RECORD_V1, bad)).toThrow(RecordEncodeError);
    try {
      encodeSingleObject(DECISION_RECORD_V1, bad);
    } catch (err) {
      expect((err as RecordEncodeError).paths.length).toBeGreaterThan(0);
      expect((err as RecordEncodeError).code).toBe('RECORD_INVALID');
    }
  });
});

describe('decode rejects, never throws', () => {
  const good = encodeSingleObject(DECISION_RECORD_V1, decision());

  it('bad marker', () => {
    const b = Buffer.from(good);
    b[0] = 0x4f;
    expect(decodeSingleObject(b, DECISION_REGISTRY)).toMatchObject({ ok: false, code: 'RECORD_BAD_MARKER' });
  });

  it('empty, one byte, and header-only-partial inputs are truncated', () => {
    for (const n of [0, 1, 2, 9]) {
      expect(decodeSingleObject(good.subarray(0, n), DECISION_REGISTRY)).toMatchObject({ ok: false, code: 'RECORD_TRUNCATED' });
    }
  });

  it('every strict prefix of a valid message is rejected as truncated', () => {
    for (const msg of [good, encodeSingleObject(DECISION_RECORD_V1, baselineDecision())]) {
      for (let n = 0; n < msg.length; n++) {
        const r = decodeSingleObject(msg.subarray(0, n), DECISION_REGISTRY);
        expect(r.ok, `prefix ${n}`).toBe(false);
        if (!r.ok) expect(r.code, `prefix ${n}: ${r.reason}`).toBe('RECORD_TRUNCATED');
      }
    }
  });

  it('trailing bytes after a complete value', () => {
    const r = decodeSingleObject(Buffer.concat([good, Buffer.from([0])]), DECISION_REGISTRY);
    expect(r).toMatchObject({ ok: false, code: 'RECORD_TRAILING_BYTES' });
  });

  it('unknown fingerprint', () => {
    const b = Buffer.from(good);
    b[5] = (b[5] ?? 0) ^ 0xff;
    const r = decodeSingleObject(b, DECISION_REGISTRY);
    expect(r).toMatchObject({ ok: false, code: 'RECORD_UNKNOWN_FINGERPRINT' });
  });

  it('a decision message offered to the outcome registry is an unknown fingerprint', () => {
    expect(decodeSingleObject(good, OUTCOME_REGISTRY)).toMatchObject({ ok: false, code: 'RECORD_UNKNOWN_FINGERPRINT' });
  });

  it('malformed body: union branch index out of range', () => {
    // `detail` ([null, string]) follows `reason`; its union index byte sits
    // right after the encoded reason string (length zig-zagged, then UTF-8).
    const rec = baselineDecision({ reason: 'baseline' });
    const body = DECISION_RECORD_V1.type.toBuffer(rec);
    const reason = Buffer.from([2 * 'baseline'.length, ...Buffer.from('baseline')]);
    const at = body.lastIndexOf(reason) + reason.length;
    expect(body[at]).toBe(0x00); // null branch
    const corrupt = Buffer.from(body);
    corrupt[at] = 0x0a; // zig-zag 5: no such branch
    const msg = Buffer.concat([DECISION_RECORD_V1.header, corrupt]);
    const r = decodeSingleObject(msg, DECISION_REGISTRY);
    expect(r).toMatchObject({ ok: false, code: 'RECORD_MALFORMED' });
  });

  it('malformed body: long beyond ±2^53 is refused rather than rounded', () => {
    const rec = baselineDecision();
    const body = DECISION_RECORD_V1.type.toBuffer(rec);
    // timestampMs follows recordId, requestId, sessionId. Re-encode with a
    // hand-written varint for 2^60 in its place.
    const t = DECISION_RECORD_V1.type as unknown as { fields: { name: string; type: { toBuffer(v: unknown): Buffer } }[] };
    const enc = (name: string, v: unknown): Buffer => {
      const f = t.fields.find((x) => x.name === name);
      if (!f) throw new Error(name);
      return f.type.toBuffer(v);
    };
    const head = Buffer.concat([enc('recordId', rec.recordId), enc('requestId', rec.requestId), enc('sessionId', rec.sessionId)]);
    const oldTs = enc('timestampMs', rec.timestampMs);
    const bigTs = zigzagVarint(1n << 60n);
    const msg = Buffer.concat([DECISION_RECORD_V1.header, head, bigTs, body.subarray(head.length + oldTs.length)]);
    const r = decodeSingleObject(msg, DECISION_REGISTRY);
    expect(r).toMatchObject({ ok: false, code: 'RECORD_MALFORMED' });
  });

  it('random garbage after a valid header never throws (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (tail) => {
        const msg = Buffer.concat([DECISION_RECORD_V1.header, tail]);
        const r = decodeSingleObject(msg, DECISION_REGISTRY);
        expect(typeof r.ok).toBe('boolean');
      }),
      { seed: 42, numRuns: 500 },
    );
  });
});

function zigzagVarint(n: bigint): Buffer {
  let z = n >= 0n ? n << 1n : ((-n) << 1n) - 1n;
  const out: number[] = [];
  while (z >= 0x80n) {
    out.push(Number(z & 0x7fn) | 0x80);
    z >>= 7n;
  }
  out.push(Number(z));
  return Buffer.from(out);
}
