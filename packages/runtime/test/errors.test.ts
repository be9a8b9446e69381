import { headers, MsgHdrsImpl } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import {
  ERROR_CODES,
  HEADER_SERVICE_ERROR,
  HEADER_SERVICE_ERROR_CODE,
  HEADER_VANTAGE_ERROR_CODE,
  readErrorHeaders,
  toVantageError,
  VantageError,
  writeErrorHeaders,
  type ErrorCode,
} from '../src/errors';

describe('error catalogue', () => {
  it('has a unique, Prometheus-safe label for every code', () => {
    const labels = Object.values(ERROR_CODES).map((c) => c.label);
    expect(new Set(labels).size).toBe(labels.length);
    for (const l of labels) expect(l).toMatch(/^[a-z][a-z0-9_]*$/);
    expect(ERROR_CODES.OVERLOADED.label).toBe('overloaded');
  });

  it('takes retryable from the catalogue unless overridden', () => {
    expect(new VantageError('NATS_TIMEOUT', 'x').retryable).toBe(true);
    expect(new VantageError('BAD_REQUEST', 'x').retryable).toBe(false);
    expect(new VantageError('KAFKA_SEND_FAILED', 'x', { retryable: false }).retryable).toBe(false);
  });

  it('keeps cause and freezes details', () => {
    const cause = new Error('socket hang up');
    const e = new VantageError('UPSTREAM_UNAVAILABLE', 'indexer down', { cause, details: { pool: 'capable' } });
    expect(e.cause).toBe(cause);
    expect(e).toBeInstanceOf(Error);
    expect(Object.isFrozen(e.details)).toBe(true);
    expect(e.toJSON()).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', retryable: true, cause: { message: 'socket hang up' } });
  });

  it('wraps foreign errors as INTERNAL and passes VantageErrors through', () => {
    const v = new VantageError('NOT_FOUND', 'no such pool');
    expect(toVantageError(v)).toBe(v);
    const wrapped = toVantageError(new TypeError('boom'));
    expect(wrapped.code).toBe('INTERNAL');
    expect(wrapped.cause).toBeInstanceOf(TypeError);
  });
});

describe('error headers', () => {
  it('round-trips every code through real NATS headers', () => {
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const h = headers();
      writeErrorHeaders(h, new VantageError(code, `failure ${code}`));
      // Through the wire encoding, as a reply would travel.
      const back = readErrorHeaders(decode(h), { subject: 's' });
      expect(back?.code).toBe(code);
      expect(back?.retryable).toBe(ERROR_CODES[code].retryable);
      expect(back?.details).toMatchObject({ remote: true, subject: 's', remoteStatus: String(ERROR_CODES[code].status) });
      if (code !== 'INTERNAL') expect(back?.message).toBe(`failure ${code}`);
    }
  });

  it('writes the NATS service-error headers generic tools understand', () => {
    const h = headers();
    writeErrorHeaders(h, new VantageError('OVERLOADED', 'busy'));
    expect(h.get(HEADER_SERVICE_ERROR_CODE)).toBe('429');
    expect(h.get(HEADER_SERVICE_ERROR)).toBe('busy');
    expect(h.get(HEADER_VANTAGE_ERROR_CODE)).toBe('OVERLOADED');
  });

  it('keeps INTERNAL messages out of the reply and header values on one line', () => {
    const h = headers();
    writeErrorHeaders(h, new VantageError('INTERNAL', 'stack at /srv/secret.ts:12'));
    expect(h.get(HEADER_SERVICE_ERROR)).toBe('internal error');
    const h2 = headers();
    writeErrorHeaders(h2, new VantageError('BAD_REQUEST', `line1\r\nline2${'x'.repeat(5000)}`));
    const text = decode(h2).get(HEADER_SERVICE_ERROR);
    expect(text).not.toMatch(/[\r\n]/);
    expect(text.length).toBeLessThanOrEqual(1024);
    expect(text.startsWith('line1 line2')).toBe(true);
  });

  it('returns null for a successful reply', () => {
    expect(readErrorHeaders(undefined)).toBeNull();
    const h = headers();
    h.set('Trace-Id', 'abc');
    expect(readErrorHeaders(h)).toBeNull();
  });

  it('maps a foreign service error by its numeric status', () => {
    const h = headers();
    h.set(HEADER_SERVICE_ERROR_CODE, '404');
    h.set(HEADER_SERVICE_ERROR, 'no such endpoint');
    const e = readErrorHeaders(h);
    expect(e?.code).toBe('NOT_FOUND');
    expect(e?.message).toBe('no such endpoint');
  });

  it('falls back to the status when a peer sends a code we do not know', () => {
    const h = headers();
    h.set(HEADER_VANTAGE_ERROR_CODE, 'FUTURE_CODE');
    h.set(HEADER_SERVICE_ERROR_CODE, '503');
    const e = readErrorHeaders(h);
    expect(e?.code).toBe('UPSTREAM_UNAVAILABLE');
    expect(e?.details['remoteCode']).toBe('FUTURE_CODE');
  });
});

// Encode to the NATS/1.0 header block and parse it back, as the wire does.
function decode(h: ReturnType<typeof headers>): MsgHdrsImpl {
  return MsgHdrsImpl.decode((h as MsgHdrsImpl).encode());
}
