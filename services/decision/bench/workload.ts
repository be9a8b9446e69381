/**
 * The decision benchmark's workload, shared by `decision-bench.ts` (our route over NATS) and
 * `dynamo-select-peer.ts` (Dynamo's selection service over HTTP), so both are given the very same
 * workers, KV state and prompts.
 *
 * Prompts: session s's tokens are a seeded LCG stream (`tokensFor`), 131,072 tokens long; a route
 * asks for its first 32k or 128k tokens, for sessions 0..3 (`PROMPT_SESSIONS`).
 * Workers: worker w of a pool holds a prefix of session (w mod 8)'s prompt, (w mod 7 + 1)/8 of its
 * blocks (`heldBlocks`), stored in one event whose engine block ids are the local hashes XOR 0xabcd
 * (`storedPrefixEvent`).
 */
import { createParameterSet, DEFAULT_PARAMETER_SET, type ParameterSet } from '@vantage/rules';
import type { ExternalHash, KvEvent, LocalHash, WorkerId } from '@vantage/types';

export const BLOCK = 64;
export const WORKERS = 64;
/** Sessions whose prompts the workers hold. */
export const SESSIONS = 8;
/** Length of every session's token stream (its longest prompt). */
export const SESSION_TOKENS = 131072;
/** What every worker registers (a WorkerCapacity). */
export const WORKER_CAPACITY = { blockSize: BLOCK, totalKvBlocks: 65536, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true } as const;
/** Sessions whose prompts the benchmark routes (several, so that different workers are chosen). */
export const PROMPT_SESSIONS: readonly number[] = [0, 1, 2, 3];

/**
 * Session `session`'s first `n` tokens: a 32-bit LCG (full period 2^32), so no 64-token block repeats
 * within a session. (`Math.imul`, not `*`: a double product past 2^53 drops low bits, and the stream
 * that gave fell into a 419-token cycle, so a 128k prompt held only ~600 distinct blocks and a stored
 * prefix repeated block hashes, which Dynamo refuses as a self-referencing block.)
 */
export function tokensFor(session: number, n: number): Uint32Array {
  const t = new Uint32Array(n);
  let x = Math.imul(session + 1, 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    t[i] = x % 150_000;
  }
  return t;
}

/** The session whose prompt worker `w` holds a prefix of. */
export function sessionOf(w: number): number {
  return w % SESSIONS;
}

/** How many of its session's `sessionBlocks` blocks worker `w` holds. */
export function heldBlocks(w: number, sessionBlocks: number): number {
  return Math.floor((sessionBlocks * ((w % 7) + 1)) / 8);
}

/** Engine block id (`block_hash`) the benchmark gives the block with local hash `h`. */
function engineBlockHash(h: bigint): ExternalHash {
  return (h ^ 0xabcdn) as ExternalHash;
}

/**
 * The one `stored` event that gives worker `w` (id `workerId`) its prefix, from every session's local
 * block hashes (`sessionHashes[s]`, of `SESSION_TOKENS` tokens).
 */
export function storedPrefixEvent(workerId: WorkerId, w: number, sessionHashes: readonly BigUint64Array[]): KvEvent {
  const h = sessionHashes[sessionOf(w)]!;
  const held = heldBlocks(w, h.length);
  const tokensHashes = h.slice(0, held);
  return {
    workerId,
    dpRank: 0,
    storageTier: 'device',
    eventId: 1n,
    data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: tokensHashes.map((x) => engineBlockHash(x as LocalHash)), tokensHashes },
  };
}

/** The two candidate models' pools (their KV events on namespace `ns`, component `backend`). */
export const POOLS = { efficient: { model: 'bench-8b', pool: 'bench-eff', ns: 'benchE' }, capable: { model: 'bench-70b', pool: 'bench-cap', ns: 'benchC' } } as const;

/** The decision services' parameter set: variant cache with the development tables (the most work per decision), no limits that bind. */
export function benchParameterSet(): ParameterSet {
  const fitted = createParameterSet({
    variant: 'cache',
    models: { efficient: { ...DEFAULT_PARAMETER_SET.models.efficient, name: POOLS.efficient.model }, capable: { ...DEFAULT_PARAMETER_SET.models.capable, name: POOLS.capable.model } },
    thresholds: { r: null, p: null },
    margins: { deltaBlindMs: 250, deltaCacheMs: 250 },
    gate: { maxAgeMs: 1000, destinationLimit: 1_000_000, localLimit: 1_000_000 },
    provenance: { source: 'bench' },
  });
  if (!fitted.ok) throw new Error(fitted.errors.join('; '));
  return fitted.value;
}
