/**
 * Differential test: the typed-array index against the reference model (test/reference-model.ts)
 * on seeded random command streams with loss (id jumps), duplicates and reordering (repeated and
 * older ids), unknown parents, clears, several dp ranks and tiers, re-stored block ids and worker
 * churn. Small hash universes make collisions, shared prefixes, cuts and aliasing frequent.
 * fast-check shrinks a failing stream to a short one and the assertion prints it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PrefixIndex, type MatchResult, type WorkerMatch } from '@vantage/prefix-index';
import { ReferenceIndex } from './reference-model';
import type { ExternalHash, KvEvent } from '@vantage/types';
import { W, removed, stored } from './events';
import { WORKERS, cmdArb, normApply, normImpl, queries, toEvent } from './streams';
import type { Cmd } from './streams';

/**
 * `DIFFERENTIAL_SEED=N DIFFERENTIAL_RUNS=M` runs the random-stream property with another seed and
 * count, for a longer search than CI's (e.g. `DIFFERENTIAL_SEED=1 DIFFERENTIAL_RUNS=4000 npx vitest
 * run --project unit --testTimeout=600000 packages/prefix-index/test/differential.test.ts -t 'random
 * streams'`); CI runs the fixed seed below.
 */
const STREAMS = {
  seed: process.env.DIFFERENTIAL_SEED === undefined ? 0x5eed_0001 : Number(process.env.DIFFERENTIAL_SEED),
  numRuns: process.env.DIFFERENTIAL_RUNS === undefined ? 300 : Number(process.env.DIFFERENTIAL_RUNS),
};

describe('PrefixIndex', () => {
  /** Every field of match records, in a form `toEqual` compares exactly (the record objects themselves may differ). */
  const plain = (ws: readonly WorkerMatch[]): WorkerMatch[] => ws.map((w) => ({ ...w }));

  function check(idx: PrefixIndex, ref: ReferenceIndex, where: string): void {
    let previous: readonly WorkerMatch[] | null = null;
    for (const q of queries(ref)) {
      const m = idx.match(q);
      expect(normImpl(m), `${where}: match [${[...q].join(',')}]`).toEqual(ref.match([...q]));
      // matchTransient: every field as match, in records the index reuses from one answer to the next.
      const t = idx.matchTransient(q);
      expect([t.blockSize, t.requestBlocks, plain(t.workers)], `${where}: matchTransient [${[...q].join(',')}]`).toEqual([m.blockSize, m.requestBlocks, plain(m.workers)]);
      if (previous !== null) for (let k = 0; k < t.workers.length; k++) expect(t.workers[k], `${where}: transient record reused`).toBe(previous[k]);
      previous = [...t.workers];
    }
    const tiers = ref.tierCounts();
    for (const p of idx.stats().publishers) {
      expect(p.blocksByTier, `${where}: tier counts ${p.workerId}:${p.dpRank}`).toEqual(
        tiers.get(`${p.workerId}:${p.dpRank}`),
      );
    }
    const c = idx.stats().counters;
    expect(
      { duplicates: c.duplicates, gaps: c.gaps, unknownParents: c.unknownParents, unknownRemovals: c.unknownRemovals, missedStarts: c.missedStarts },
      `${where}: counters`,
    ).toEqual(ref.counters);
  }

  /**
   * `expected`: each worker's `expectBlocks` hint, given before the stream (and again after the worker
   * is removed, as a re-registration would), so tables start pre-sized or are grown mid-stream.
   */
  function runStream(
    cmds: readonly Cmd[],
    checkEvery = 1,
    expected: readonly number[] | null = null,
    rebuildAt: ReadonlySet<number> = new Set(),
  ): { idx: PrefixIndex; ref: ReferenceIndex } {
    let idx = new PrefixIndex(16);
    const ref = new ReferenceIndex();
    if (expected !== null) WORKERS.forEach((w, i) => idx.expectBlocks(W(w), expected[i]!));
    const sent = new Map<string, bigint>();
    cmds.forEach((c, i) => {
      const now = 1000 + i;
      const where = `after command #${i}`;
      if (c.t === 'ev') {
        const ev = toEvent(c, sent);
        expect(normApply(idx.apply(ev, now)), `${where}: apply result`).toEqual(ref.apply(ev, now));
      } else if (c.t === 'removeWorker') {
        idx.removeWorker(W(WORKERS[c.w]!));
        ref.removeWorker(WORKERS[c.w]!);
        if (expected !== null) idx.expectBlocks(W(WORKERS[c.w]!), expected[(c.w + i) % expected.length]!);
      } else if (c.t === 'removeDp') {
        idx.removeDpRank(W(WORKERS[c.w]!), c.dp);
        ref.removeDpRank(WORKERS[c.w]!, c.dp);
      } else {
        const last = sent.get(`${c.w}:${c.dp}`);
        const id = c.withId ? last : undefined;
        idx.resync(W(WORKERS[c.w]!), c.dp, now, id);
        ref.resync(WORKERS[c.w]!, c.dp, now, id);
      }
      // Apply results are compared on every event; the full match comparison every `checkEvery`.
      if (i % checkEvery === 0 || i === cmds.length - 1) check(idx, ref, where);
      // A restart: the index continues from its own snapshot; or it compacts in place.
      if (rebuildAt.has(i)) {
        if (i % 2 === 1) idx.compact();
        else idx = PrefixIndex.restore(idx.snapshot());
        check(idx, ref, `${where}, rebuilt`);
      }
    });
    return { idx, ref };
  }

  describe('differential: the index vs the reference model', () => {
    it('agrees on every apply result, match, tier count and counter over random streams', () => {
      fc.assert(
        fc.property(fc.array(cmdArb, { maxLength: 60 }), (cmds) => {
          const { idx } = runStream(cmds);
          // Dropping every publisher must free every node: no leak through cuts, moves or aliases.
          for (const w of WORKERS) idx.removeWorker(W(w));
          expect(idx.stats().nodes).toBe(0);
          expect(idx.totalBlocks).toBe(0);
        }),
        STREAMS,
      );
    });

    it('agrees after snapshots restored (and compactions) at random points of random streams', () => {
      fc.assert(
        fc.property(fc.array(cmdArb, { maxLength: 60 }), fc.uniqueArray(fc.integer({ min: 0, max: 59 }), { maxLength: 4 }), (cmds, at) => {
          const { idx } = runStream(cmds, 1, null, new Set(at));
          for (const w of WORKERS) idx.removeWorker(W(w));
          expect(idx.stats().nodes).toBe(0);
          expect(idx.totalBlocks).toBe(0);
        }),
        { seed: STREAMS.seed + 7, numRuns: STREAMS.numRuns },
      );
    });

    it('agrees after restores on streams dense in ids sharing a block (two workers, two local hashes)', () => {
      // Many ids of one worker at one block, removed one at a time while the other worker keeps the
      // block: the tier bits a restore must replay apart from the ids (Dynamo drops the worker).
      const dense: fc.Arbitrary<Cmd> = fc.record({
        t: fc.constant('ev' as const),
        w: fc.integer({ min: 0, max: 1 }),
        dp: fc.constant(0),
        tier: fc.constantFrom(0, 0, 1),
        step: fc.constant(1),
        kind: fc.constantFrom('stored' as const, 'stored' as const, 'removed' as const),
        parent: fc.option(fc.integer({ min: 0, max: 3 }), { freq: 3, nil: null }),
        blocks: fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 1 })), { minLength: 1, maxLength: 2 }),
      });
      fc.assert(
        fc.property(fc.array(dense, { minLength: 10, maxLength: 40 }), fc.uniqueArray(fc.integer({ min: 5, max: 39 }), { minLength: 1, maxLength: 3 }), (cmds, at) => {
          runStream(cmds, 1, null, new Set(at));
        }),
        { seed: STREAMS.seed + 11, numRuns: STREAMS.numRuns },
      );
      // About 4 s on an idle 2-core host; CPU-bound, so it stretches with the machine's load.
    }, 60_000);

    it('agrees on long streams (deeper trees, more churn)', () => {
      fc.assert(
        fc.property(fc.array(cmdArb, { minLength: 150, maxLength: 300 }), (cmds) => {
          runStream(cmds, 20);
        }),
        { seed: 0x5eed_0002, numRuns: 25 },
      );
    });

    it('expectBlocks (pre-sized and mid-stream grown block-id tables) changes no answer', () => {
      fc.assert(
        fc.property(fc.array(cmdArb, { maxLength: 80 }), fc.array(fc.integer({ min: 0, max: 300 }), { minLength: 3, maxLength: 3 }), (cmds, expected) => {
          runStream(cmds, 1, expected);
        }),
        { seed: 0x5eed_0004, numRuns: 200 },
      );
    });

    it('expectBlocks allocates a publisher table once: filling it up to the hint allocates nothing more', () => {
      const w = W(7);
      const ids = new BigUint64Array(1000).map((_, i) => BigInt(i + 1) * 0x9e37_79b9_7f4a_7c15n);
      // 1,000 blocks in a chain (the node table's first 1,024 records hold them, so only the block-id table can grow).
      const fill = (idx: PrefixIndex): { first: number; last: number } => {
        let first = 0;
        for (let k = 0; k < ids.length; k++) {
          const parentHash = (k === 0 ? null : ids[k - 1]!) as ExternalHash | null;
          idx.apply({ workerId: w, dpRank: 0, storageTier: 'device', eventId: BigInt(k + 1), data: { kind: 'stored', parentHash, startPosition: k, blockHashes: ids.subarray(k, k + 1), tokensHashes: ids.subarray(k, k + 1) } }, 0);
          if (k === 0) first = idx.stats().arrayBytes;
        }
        return { first, last: idx.stats().arrayBytes };
      };
      const hinted = new PrefixIndex(16);
      hinted.expectBlocks(w, 1000);
      const h = fill(hinted);
      const u = fill(new PrefixIndex(16));
      expect(h.last).toBe(h.first);
      expect(u.last).toBeGreaterThan(u.first);
      expect(h.first).toBeGreaterThan(u.first);
      expect(hinted.match(ids).workers[0]!.deviceBlocks).toBe(1000);
    });

    it('a table reserved by expectBlocks doubles in place: answers, removals and snapshots as without the hint', () => {
      // 3 publishers, each filled past half its reservation (the in-place doubling), then evicting
      // in random order (backward shifts across the doubled table) and storing again.
      let seed = 0x1234_5678;
      const rnd = (): number => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        return seed;
      };
      const hinted = new PrefixIndex(16);
      const plain = new PrefixIndex(16);
      for (let w = 1; w <= 3; w++) hinted.expectBlocks(W(w), 600);
      const both = (e: KvEvent): void => {
        expect(normApply(hinted.apply(e, 0))).toEqual(normApply(plain.apply(e, 0)));
      };
      const held = new Map<number, bigint[]>();
      const paths: BigUint64Array[] = [];
      const ids = new Map<number, number>();
      const next = (w: number): number => {
        const id = (ids.get(w) ?? 0) + 1;
        ids.set(w, id);
        return id;
      };
      for (let round = 0; round < 2; round++) {
        for (let c = 0; c < 40; c++) {
          for (let w = 1; w <= 3; w++) {
            const locs = Array.from({ length: 12 }, (_, i) => BigInt(c % 7) * 1000n + BigInt(i + 1) + BigInt(round) * 100_000n);
            const exts = locs.map(() => (BigInt(rnd()) << 32n) | BigInt(rnd()));
            held.set(w, [...(held.get(w) ?? []), ...exts]);
            both(stored(w, next(w), null, exts.map((x, i) => [x, locs[i]!] as const)));
            if (w === 1) paths.push(BigUint64Array.from(locs));
          }
        }
        for (let w = 1; w <= 3; w++) {
          const mine = held.get(w)!;
          const out: bigint[] = [];
          for (let k = 0; k < 200; k++) out.push(mine.splice(rnd() % mine.length, 1)[0]!);
          both(removed(w, next(w), out));
        }
      }
      expect(hinted.totalBlocks).toBe(plain.totalBlocks);
      const norm = (r: MatchResult): unknown => [...r.workers].sort((x, y) => Number(x.workerId - y.workerId));
      for (const q of paths) expect(norm(hinted.match(q))).toEqual(norm(plain.match(q)));
      expect({ ...hinted.stats(), arrayBytes: 0 }).toEqual({ ...plain.stats(), arrayBytes: 0 });
      const bytes = hinted.snapshot();
      const back = PrefixIndex.restore(bytes);
      // Node counts differ only by chains that hang from nothing (no match reaches them), which an
      // image restores once per publisher holding them (README, "Snapshot format").
      const plainStats = (x: PrefixIndex): unknown => ({ ...x.stats(), arrayBytes: 0, nodes: 0 });
      expect(plainStats(back)).toEqual(plainStats(plain));
      for (const q of paths) expect(norm(back.match(q))).toEqual(norm(plain.match(q)));
    });

    it('the harness can fail: a deliberately wrong model is caught and shrunk', () => {
      // Guard against a vacuous harness: a reference that ignores removals must be caught, and
      // fast-check must shrink the failing stream to a couple of events.
      const out = fc.check(
        fc.property(fc.array(cmdArb, { maxLength: 40 }), (cmds) => {
          const idx = new PrefixIndex(16);
          const ref = new ReferenceIndex();
          const sent = new Map<string, bigint>();
          for (const c of cmds) {
            if (c.t !== 'ev') continue;
            const ev = toEvent(c, sent);
            idx.apply(ev, 0);
            // Wrong model: treats every removal as a no-op.
            if (ev.data.kind !== 'removed') ref.apply(ev, 0);
            else ref.apply({ ...ev, data: { kind: 'removed', blockHashes: new BigUint64Array(0) } }, 0);
            for (const q of queries(ref)) {
              const got = normImpl(idx.match(q)).map((m) => m.any);
              const want = ref.match([...q]).map((m) => m.any);
              if (got.join() !== want.join()) return false;
            }
          }
          return true;
        }),
        { seed: 0x5eed_0003, numRuns: 300 },
      );
      expect(out.failed).toBe(true);
      expect(out.counterexample?.[0].length).toBeLessThanOrEqual(4);
    });
  });
});
