/** Seeded random command streams shared by the differential and snapshot tests. */
import fc from 'fast-check';
import type { ApplyResult, MatchResult } from '@vantage/prefix-index';
import { STORAGE_TIERS } from '@vantage/types';
import type { KvEvent } from '@vantage/types';
import { byPublisher } from './reference-model';
import type { ReferenceIndex, RefApply, RefMatch } from './reference-model';
import { cleared, removed, stored } from './events';

export const WORKERS = [1n, 2n, 0xffff_ffff_ffff_fffen] as const;
// Engine ids: small values plus two above 2^53 that share their low 32 bits.
export const EXTS = [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, (1n << 60n) + 5n, (1n << 61n) + 5n] as const;
export const LOCALS = [1n, 2n, 3n, 4n, 5n, 0xdead_beef_0000_0001n] as const;

export type Cmd =
  | {
      readonly t: 'ev';
      readonly w: number;
      readonly dp: number;
      readonly tier: number;
      /** id = last id sent on this publisher + step: 1 normal, 2..3 a loss, 0 a duplicate, -1 older. */
      readonly step: number;
      readonly kind: 'stored' | 'removed' | 'cleared';
      readonly parent: number | null;
      readonly blocks: ReadonlyArray<readonly [number, number]>;
    }
  | { readonly t: 'removeWorker'; readonly w: number }
  | { readonly t: 'removeDp'; readonly w: number; readonly dp: number }
  | { readonly t: 'resync'; readonly w: number; readonly dp: number; readonly withId: boolean };

const evArb: fc.Arbitrary<Cmd> = fc.record({
  t: fc.constant('ev' as const),
  w: fc.integer({ min: 0, max: WORKERS.length - 1 }),
  dp: fc.integer({ min: 0, max: 1 }),
  tier: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 3 }) }),
  step: fc.oneof({ weight: 12, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: -1, max: 3 }) }),
  kind: fc.oneof(
    { weight: 6, arbitrary: fc.constant('stored' as const) },
    { weight: 3, arbitrary: fc.constant('removed' as const) },
    { weight: 1, arbitrary: fc.constant('cleared' as const) },
  ),
  parent: fc.option(fc.integer({ min: 0, max: EXTS.length - 1 }), { freq: 2, nil: null }),
  blocks: fc.array(
    fc.tuple(fc.integer({ min: 0, max: EXTS.length - 1 }), fc.integer({ min: 0, max: LOCALS.length - 1 })),
    { minLength: 1, maxLength: 4 },
  ),
});

export const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 30, arbitrary: evArb },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('removeWorker' as const), w: fc.integer({ min: 0, max: 2 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('removeDp' as const),
      w: fc.integer({ min: 0, max: 2 }),
      dp: fc.integer({ min: 0, max: 1 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('resync' as const),
      w: fc.integer({ min: 0, max: 2 }),
      dp: fc.integer({ min: 0, max: 1 }),
      withId: fc.boolean(),
    }),
  },
);

/** Turn commands into concrete events/calls; ids come from a per-publisher sender counter. */
export function toEvent(c: Extract<Cmd, { t: 'ev' }>, sent: Map<string, bigint>): KvEvent {
  const key = `${c.w}:${c.dp}`;
  const last = sent.get(key) ?? 0n;
  let id = last + BigInt(c.step);
  if (id < 0n) id = 0n;
  if (id > last) sent.set(key, id);
  const opts = { dp: c.dp, tier: STORAGE_TIERS[c.tier]! };
  const worker = WORKERS[c.w]!;
  if (c.kind === 'cleared') return cleared(worker, id, opts);
  if (c.kind === 'removed') return removed(worker, id, c.blocks.map(([e]) => EXTS[e]!), opts);
  return stored(
    worker,
    id,
    c.parent === null ? null : EXTS[c.parent]!,
    c.blocks.map(([e, l]) => [EXTS[e]!, LOCALS[l]!] as const),
    opts,
  );
}

export function normImpl(r: MatchResult): RefMatch[] {
  return r.workers
    .map((m) => ({
      workerId: m.workerId as bigint,
      dpRank: m.dpRank,
      device: m.deviceBlocks,
      host: m.hostBlocks,
      disk: m.diskBlocks,
      any: m.anyBlocks,
      treeSize: m.treeSize,
      suspect: m.suspect,
      lastEventId: m.lastEventId,
    }))
    .sort(byPublisher);
}

export function normApply(r: ApplyResult): RefApply {
  return {
    status: r.status,
    rejection: r.rejection,
    missedEvents: r.missedEvents,
    unknownParent: r.unknownParent,
    unknownRemovals: [...r.unknownRemovals],
  };
}

/** Queries: every root path the reference can reach (to depth 8), each extended by every local. */
export function queries(ref: ReferenceIndex): BigUint64Array[] {
  const out: BigUint64Array[] = [];
  const walk = (node: ReferenceIndex['root'], path: bigint[]): void => {
    if (node.children.size === 0 || path.length >= 8) {
      for (const l of LOCALS) out.push(BigUint64Array.from([...path, l]));
      return;
    }
    for (const [local, c] of node.children) walk(c, [...path, local]);
  };
  walk(ref.root, []);
  return out;
}

