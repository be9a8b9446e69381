/**
 * Turns a Mooncake trace into Dynamo KV events through simulated worker caches.
 *
 * Prompts: each hash_id becomes 512 copies of the token value hash_id (u32), the sequence is cut to
 * input_length and hashed at the engine block size with @vantage/hashing (so a 512-token trace
 * block is 8 engine blocks of 64). The engine block id (`block_hash`) is the sequence hash, as in
 * vLLM and Dynamo's mocker.
 *
 * Workers: a prefix cache of `capacity` blocks with LRU eviction. A request touches its whole
 * prompt deepest-block-first, so a block is always more recently used than its children and
 * eviction takes leaves before their parents (as an engine that frees a finished request's blocks
 * tail first does). Newly cached blocks produce one `stored` event (parent = the last reused
 * block, or none); blocks evicted to make room produce one `removed` event before it.
 *
 * Routing: the simulator's own cache state, not the index under test, so the event stream is
 * fixed before anything is timed. A request goes to the worker holding the longest prefix of it
 * among workers whose request count is at most 1.25x the fair share + 1 (a load cap, or one hot
 * prefix would pull every request onto one worker); ties go to the least-loaded worker.
 */
import { readFileSync } from 'node:fs';
import { hashPrompt } from '@vantage/hashing';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';

export interface Prompt {
  readonly local: BigUint64Array;
  readonly sequence: BigUint64Array;
}

export function loadTracePrompts(path: string, blockSize: number, traceBlock = 512): Prompt[] {
  const out: Prompt[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const rec = JSON.parse(line) as { input_length: number; hash_ids: number[] };
    const tokens = new Uint32Array(rec.input_length);
    for (let i = 0; i < rec.input_length; i++) tokens[i] = rec.hash_ids[Math.floor(i / traceBlock)]! >>> 0;
    const { local, sequence } = hashPrompt(tokens, blockSize);
    out.push({ local, sequence });
  }
  return out;
}

class WorkerCache {
  /** seq hash -> present; Map order is LRU order (first = least recently used). */
  readonly lru = new Map<bigint, true>();
  nextEventId = 1n;
  requests = 0;
  constructor(
    readonly id: WorkerId,
    readonly capacity: number,
  ) {}

  overlap(p: Prompt): number {
    let n = 0;
    while (n < p.sequence.length && this.lru.has(p.sequence[n]!)) n++;
    return n;
  }
}

export interface SimResult {
  readonly events: KvEvent[];
  readonly blockOps: number;
  readonly evicted: number;
}

export function simulate(prompts: readonly Prompt[], workers: number, capacity: number): SimResult {
  const caches = Array.from({ length: workers }, (_, i) => new WorkerCache(BigInt(0x1000_0000_0000_0000n + BigInt(i) * 7919n) as WorkerId, capacity));
  const events: KvEvent[] = [];
  let blockOps = 0;
  let evicted = 0;
  prompts.forEach((p, r) => {
    const n = p.sequence.length;
    if (n === 0) return;
    if (n > capacity) throw new Error(`prompt of ${n} blocks exceeds the cache (${capacity})`);
    const cap = Math.floor(((r + 1) / workers) * 1.25) + 1;
    let best: WorkerCache | undefined;
    let bestOverlap = -1;
    for (const w of caches) {
      if (w.requests > cap) continue;
      const o = w.overlap(p);
      if (o > bestOverlap || (o === bestOverlap && w.requests < best!.requests)) {
        best = w;
        bestOverlap = o;
      }
    }
    const w = best!;
    w.requests++;
    const fresh = n - bestOverlap;
    // Evict least recently used blocks; the request's own reused blocks are refreshed first so they
    // are never chosen.
    for (let i = bestOverlap - 1; i >= 0; i--) {
      const h = p.sequence[i]!;
      w.lru.delete(h);
      w.lru.set(h, true);
    }
    const gone: bigint[] = [];
    if (w.lru.size + fresh > capacity) {
      for (const h of w.lru.keys()) {
        if (w.lru.size + fresh <= capacity) break;
        w.lru.delete(h);
        gone.push(h);
      }
    }
    if (gone.length > 0) {
      events.push({
        workerId: w.id,
        dpRank: 0,
        storageTier: 'device',
        eventId: w.nextEventId++,
        data: { kind: 'removed', blockHashes: BigUint64Array.from(gone) },
      });
      blockOps += gone.length;
      evicted += gone.length;
    }
    if (fresh > 0) {
      events.push({
        workerId: w.id,
        dpRank: 0,
        storageTier: 'device',
        eventId: w.nextEventId++,
        data: {
          kind: 'stored',
          parentHash: bestOverlap > 0 ? (p.sequence[bestOverlap - 1]! as ExternalHash) : null,
          startPosition: bestOverlap,
          blockHashes: p.sequence.slice(bestOverlap),
          tokensHashes: p.local.slice(bestOverlap),
        },
      });
      blockOps += fresh;
    }
    // Deepest block first, so every block is more recent than its children.
    for (let i = n - 1; i >= bestOverlap; i--) w.lru.set(p.sequence[i]!, true);
    for (let i = bestOverlap - 1; i >= 0; i--) {
      const h = p.sequence[i]!;
      w.lru.delete(h);
      w.lru.set(h, true);
    }
  });
  return { events, blockOps, evicted };
}
