/**
 * CRC-64-AVRO, the 64-bit Rabin fingerprint the Avro specification defines for
 * schema identity ("Schema Fingerprints"), over a schema's Parsing Canonical
 * Form. Single-object encoding puts these 8 bytes, little-endian, in every
 * message header.
 *
 * Reference algorithm (Avro spec):
 *   EMPTY = 0xc15d213aa4d7a795
 *   table[i] = i, then 8 times: fp = (fp >>> 1) ^ (EMPTY & -(fp & 1))
 *   fingerprint(buf): fp = EMPTY; for each byte b: fp = (fp >>> 8) ^ table[(fp ^ b) & 0xff]
 *
 * Computed with bigint: fingerprints are taken once per schema when the
 * package loads, never per message, so clarity beats speed here.
 */

const EMPTY = 0xc15d_213a_a4d7_a795n;
const MASK64 = 0xffff_ffff_ffff_ffffn;

const TABLE: readonly bigint[] = (() => {
  const t: bigint[] = new Array<bigint>(256);
  for (let i = 0; i < 256; i++) {
    let fp = BigInt(i);
    for (let j = 0; j < 8; j++) {
      // `-(fp & 1)` in two's complement is all ones when the low bit is set.
      fp = (fp >> 1n) ^ (fp & 1n ? EMPTY : 0n);
    }
    t[i] = fp;
  }
  return t;
})();

/** CRC-64-AVRO of a string's UTF-8 bytes (a schema's canonical form is JSON text), as an unsigned 64-bit bigint. */
export function crc64AvroOfString(text: string): bigint {
  let fp = EMPTY;
  for (const b of Buffer.from(text, 'utf8')) {
    fp = ((fp >> 8n) ^ (TABLE[Number((fp ^ BigInt(b)) & 0xffn)] as bigint)) & MASK64;
  }
  return fp;
}

/** The 8 little-endian bytes single-object encoding carries for a fingerprint. */
export function fingerprintBytesLE(fp: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(fp);
  return b;
}

/** 16 hex digits of the little-endian bytes: the form fastavro and Avro tooling print. */
export function fingerprintHex(fp: bigint): string {
  return fingerprintBytesLE(fp).toString('hex');
}
