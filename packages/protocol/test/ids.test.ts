import { describe, expect, it } from 'vitest';
import { ID_MAX_LENGTH, isValidId, observeRequestCodec } from '../src/index';

describe('request and session ids', () => {
  it('are 1 to ID_MAX_LENGTH characters, as the schemas say', () => {
    expect(isValidId('r')).toBe(true);
    expect(isValidId('r'.repeat(ID_MAX_LENGTH))).toBe(true);
    expect(isValidId('')).toBe(false);
    expect(isValidId('r'.repeat(ID_MAX_LENGTH + 1))).toBe(false);
    expect(isValidId(7)).toBe(false);
    expect(isValidId(null)).toBe(false);
  });

  it('the observe schema accepts exactly the request ids isValidId accepts', () => {
    for (const requestId of ['r', 'r'.repeat(ID_MAX_LENGTH), '', 'r'.repeat(ID_MAX_LENGTH + 1)]) {
      const bytes = new TextEncoder().encode(JSON.stringify({ v: 1, requestId, prompt: { localHashes: ['1'] }, promptTokens: 16 }));
      expect(observeRequestCodec.decode(bytes).ok, `length ${requestId.length}`).toBe(isValidId(requestId));
    }
  });
});
