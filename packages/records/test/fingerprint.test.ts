import { describe, expect, it } from 'vitest';
import { crc64AvroOfString, fingerprintHex } from '../src/fingerprint';
import { DECISION_RECORD_V1, OUTCOME_RECORD_V1, OUTCOME_RECORD_V2 } from '../src/schemas';

describe('CRC-64-AVRO', () => {
  // Published vectors from Avro's share/test/data/schema-tests.txt, which
  // prints fingerprints as the signed 64-bit value of the little-endian bytes.
  it.each([
    ['"null"', 7195948357588979594n],
    ['"int"', 8247732601305521295n],
    ['"long"', -3434872931120570953n],
    ['"string"', -8142146995180207161n],
    ['{"name":"foo","type":"fixed","size":15}', 1756455273707447556n],
  ])('fingerprint of %s matches the published value', (canonical, signed) => {
    expect(crc64AvroOfString(canonical)).toBe(BigInt.asUintN(64, signed));
  });

  it('renders the little-endian hex other tools print', () => {
    expect(fingerprintHex(crc64AvroOfString('"null"'))).toBe('8a8f25cce724dd63');
  });

  it('differs for a one-character change', () => {
    expect(crc64AvroOfString('"int"')).not.toBe(crc64AvroOfString('"long"'));
  });
});

describe('shipped schema fingerprints are frozen', () => {
  // A shipped version's canonical form must never change: readers in the
  // field look writers up by these values. Editing a field's type or name in
  // a shipped .avsc fails here; make a new version file instead. (Docs and
  // defaults are outside the canonical form and may be edited.)
  it.each([
    [DECISION_RECORD_V1, '54ccd78d3082057a'],
    [OUTCOME_RECORD_V1, 'aadb192c7bad6059'],
    [OUTCOME_RECORD_V2, '70c610a0e4baaf9f'],
  ])('%s', (schema, hex) => {
    expect(schema.fingerprintHex).toBe(hex);
    expect(schema.header.subarray(0, 2).toString('hex')).toBe('c301');
    expect(schema.header.subarray(2).toString('hex')).toBe(hex);
  });
});
