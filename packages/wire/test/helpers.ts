/**
 * Hand-written msgpack fixture helpers, deliberately independent of the
 * package's encoder: each returns hex per the msgpack spec.
 */
export function hexBytes(...parts: string[]): Uint8Array {
  const hex = parts.join('').replace(/\s+/g, '');
  if (hex.length % 2 !== 0) throw new Error('odd hex');
  return Uint8Array.from(Buffer.from(hex, 'hex'));
}

/** ASCII string: fixstr below 32 bytes, str8 (0xd9, one length byte) up to 255. */
export function s(text: string): string {
  const body = Buffer.from(text, 'ascii').toString('hex');
  if (text.length < 32) return (0xa0 | text.length).toString(16) + body;
  if (text.length < 256) return 'd9' + text.length.toString(16).padStart(2, '0') + body;
  throw new Error('fixstr/str8 only');
}

/** fixmap header for n entries. */
export function map(n: number): string {
  return (0x80 | n).toString(16);
}

/** fixarray header for n entries. */
export function arr(n: number): string {
  return (0x90 | n).toString(16);
}

export const NIL = 'c0';
