/**
 * @vantage/random: the one family of seeded pseudo-random numbers. Selection
 * (softmax sampling, tie-breaks), the simulator, the fleet's workloads, the
 * fitting's splits and folds, the evaluation's schedules and bootstrap must all
 * be reproducible from a seed, so nothing calls Math.random; callers pass an
 * `Rng` (or the `() => number` form, `seededRandom`). Not for anything
 * security-related.
 *
 * Generator: sfc32 (Chris Doty-Humphrey's Small Fast Counter, 128-bit state,
 * passes PractRand), seeded through splitmix32 so that nearby seeds give
 * unrelated streams. 32-bit integer arithmetic only: fast in V8 and identical
 * on every platform.
 */

export interface Rng {
  /** Uniform float in [0, 1), 32 bits of resolution. */
  next(): number;
}

function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** Fold a number, bigint or string seed to 32 bits (strings by FNV-1a). */
export function seed32(seed: number | bigint | string): number {
  if (typeof seed === 'number') {
    if (!Number.isFinite(seed)) throw new RangeError(`seed must be finite, got ${seed}`);
    // Keep the high bits of large integer seeds instead of silently truncating them.
    return (Math.trunc(seed) ^ Math.trunc(seed / 0x1_0000_0000)) >>> 0;
  }
  if (typeof seed === 'bigint') {
    let h = 0;
    let v = BigInt.asUintN(64, seed);
    for (let i = 0; i < 2; i++) {
      h = (h ^ Number(v & 0xffff_ffffn)) >>> 0;
      h = Math.imul(h, 0x01000193) >>> 0;
      v >>= 32n;
    }
    return h;
  }
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) {
    h ^= seed.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

class Sfc32 implements Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    const st = { s: seed | 0 };
    this.a = splitmix32(st);
    this.b = splitmix32(st);
    this.c = splitmix32(st);
    this.d = 1;
    // Discard the first outputs: sfc32's state mixes slowly from a fresh seed.
    for (let i = 0; i < 12; i++) this.u32();
  }

  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  next(): number {
    return this.u32() / 0x1_0000_0000;
  }
}

/** A reproducible generator for `seed`. Two generators with the same seed give the same stream. */
export function seededRng(seed: number | bigint | string): Rng {
  return new Sfc32(seed32(seed));
}

/** Uniform integer in [0, n). */
export function randomInt(rng: Rng, n: number): number {
  if (!Number.isInteger(n) || n <= 0) throw new RangeError(`randomInt bound must be a positive integer, got ${n}`);
  return Math.floor(rng.next() * n);
}

/** `seededRng(seed)` as a plain function returning uniform floats in [0, 1). */
export function seededRandom(seed: number | bigint | string): () => number {
  const rng = new Sfc32(seed32(seed));
  return () => rng.next();
}

/** Fisher-Yates shuffle of a copy. */
export function shuffled<T>(xs: readonly T[], rand: () => number): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    const t = out[i] as T;
    out[i] = out[j] as T;
    out[j] = t;
  }
  return out;
}
