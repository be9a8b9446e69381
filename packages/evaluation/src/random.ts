/**
 * Seeded randomness for schedules and the bootstrap: the project's one
 * generator (@vantage/random) and a string hash that derives an independent
 * stream for each purpose, so adding a metric or a variant never changes the
 * numbers of another. Not for anything security-related.
 */
import { seededRandom } from '@vantage/random';

export type Rand = () => number;

export { shuffled } from '@vantage/random';

/** FNV-1a (32-bit) of the parts joined by U+001F: a stable u32 per label. */
export function hash32(...parts: readonly (string | number)[]): number {
  const s = parts.map(String).join('\u001f');
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // One extra avalanche round: FNV's low bits are weak for short labels.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

/** A generator for one purpose: `streamFor(seed, 'bootstrap', metric, variant)`. */
export function streamFor(seed: number, ...labels: readonly (string | number)[]): Rand {
  return seededRandom(hash32(seed, ...labels));
}
