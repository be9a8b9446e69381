/**
 * The benchmark's 2,048-block workload (`npm run bench:index`'s `match_2048_*`, and
 * `bench/match-ab.ts`): 64 random prompts, and 64 workers each holding prefixes of 16 of them, a
 * quarter of them whole and the rest of a uniform random length, stored as one event per prefix.
 * A fixed xorshift32 seed keeps it identical run to run.
 */
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import type { Prompt } from './trace-sim';

export function longPromptWorkload(length = 2048): { prompts: Prompt[]; events: KvEvent[] } {
  let seed = 0x2545f491;
  const rand = (): number => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 0x1_0000_0000;
  };
  const rand64 = (): bigint => (BigInt(Math.floor(rand() * 0x1_0000_0000)) << 32n) | BigInt(Math.floor(rand() * 0x1_0000_0000));
  const PROMPTS = 64;
  const HELD = 16; // prompts each worker holds a prefix of
  const prompts: Prompt[] = Array.from({ length: PROMPTS }, () => {
    const local = new BigUint64Array(length);
    const sequence = new BigUint64Array(length);
    for (let i = 0; i < length; i++) {
      local[i] = rand64();
      sequence[i] = rand64();
    }
    return { local, sequence };
  });
  const events: KvEvent[] = [];
  for (let w = 0; w < 64; w++) {
    const workerId = (0xf000_0000_0000_0000n + BigInt(w)) as WorkerId;
    let id = 1n;
    for (let k = 0; k < HELD; k++) {
      const p = prompts[(w * 5 + k * 4) % PROMPTS]!;
      const len = rand() < 0.25 ? length : Math.floor(rand() * length);
      if (len === 0) continue;
      events.push({
        workerId,
        dpRank: 0,
        storageTier: 'device',
        eventId: id++,
        data: {
          kind: 'stored',
          parentHash: null as ExternalHash | null,
          startPosition: 0,
          blockHashes: p.sequence.subarray(0, len),
          tokensHashes: p.local.subarray(0, len),
        },
      });
    }
  }
  return { prompts, events };
}
