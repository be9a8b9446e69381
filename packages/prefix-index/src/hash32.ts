/**
 * 32-bit mixing for the open-addressing tables. Keys are u64 values held as
 * (lo, hi) u32 halves so the hot path never allocates a bigint. Engine hashes
 * are usually random already, but tests and some engines use small sequential
 * ids, so every key goes through a full avalanche (murmur3's finaliser) before
 * it picks a bucket; without it sequential ids would cluster under linear probing.
 */
export function mix2(lo: number, hi: number): number {
  let h = lo ^ Math.imul(hi ^ (hi >>> 16), 0x85ebca6b);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h; // int32
}

/**
 * Low and high 32-bit halves of a u64 bigint, as int32 (the form the tables store and the
 * Int32Array views of BigUint64Array inputs yield). Used once per event, never per block.
 */
export function u64Lo(v: bigint): number {
  return Number(v & 0xffff_ffffn) | 0;
}
export function u64Hi(v: bigint): number {
  return Number((v >> 32n) & 0xffff_ffffn) | 0;
}
export function u64From(lo: number, hi: number): bigint {
  return (BigInt(hi >>> 0) << 32n) | BigInt(lo >>> 0);
}
