/**
 * Where `decodeObserveRequestReusing` decodes a request's hashes, whichever encoding carried them
 * (base64 in JSON, raw in the binary request): one buffer, grown as needed and overwritten by every
 * decode given it.
 */
export class Le64Scratch {
  hashes = new BigUint64Array(0);
  /** The same memory as `hashes`, as bytes. */
  bytes = Buffer.alloc(0);

  /** The first `n` u64s of the buffer (grown to hold them, doubling), to be overwritten by the caller. */
  take(n: number): BigUint64Array {
    if (this.hashes.length < n) {
      this.hashes = new BigUint64Array(Math.max(n, 2 * this.hashes.length));
      this.bytes = Buffer.from(this.hashes.buffer);
    }
    return this.hashes.subarray(0, n);
  }
}
