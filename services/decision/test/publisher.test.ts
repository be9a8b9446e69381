import { describe, expect, it } from 'vitest';
import { parseAck } from '../src/publisher';

const b = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('JetStream publish acks', () => {
  it('accepts a stored or deduplicated record', () => {
    expect(parseAck(b('{"stream":"S","seq":7}'))).toEqual({ ok: true, stream: 'S', seq: 7, duplicate: false });
    expect(parseAck(b('{"stream":"S","seq":7,"duplicate":true}'))).toEqual({ ok: true, stream: 'S', seq: 7, duplicate: true });
  });
  it('refuses errors and anything that is not an ack', () => {
    expect(parseAck(b('{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}'))).toMatchObject({ ok: false, reason: expect.stringContaining('maximum messages exceeded') });
    expect(parseAck(b('nope'))).toMatchObject({ ok: false });
    expect(parseAck(b('null'))).toMatchObject({ ok: false });
    expect(parseAck(b('{"stream":"S"}'))).toMatchObject({ ok: false });
    expect(parseAck(new Uint8Array())).toMatchObject({ ok: false });
  });
});
