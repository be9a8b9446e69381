/**
 * Differential test against Dynamo's own `RadixTree` (the published `dynamo-kv-router` crate, run by
 * the oracle program of `@vantage/dynamo-oracle`, which its `scripts/ensure-dynamo-oracle.sh` builds): seeded
 * random event streams from several workers and dp ranks go to both indexes, and at checkpoints
 * every (worker, dp rank)'s leading device-tier blocks must be the same for every query prompt.
 *
 * The streams are what engines send: each event id once, in order, nothing lost. They include what
 * makes an index hard:
 * - chains sharing prefixes, and equal local hashes under different parents;
 * - evictions of blocks with their held descendants, and re-stores of held blocks;
 * - stores whose parent the worker no longer holds (Dynamo drops the event; we keep an unreachable
 *   chain: equal answers);
 * - self-referencing stores, a block id equal to the event's parent (Dynamo's RadixTree refuses the
 *   event, and so do we);
 * - clears per dp rank, and workers and dp ranks leaving and coming back;
 * - worker ids with the top bit set.
 * Engine ids are a function of the parent's id and the tokens, as Dynamo's sequence hashes are.
 *
 * Left out on purpose:
 * - our one documented divergence (a block id re-stored at a new position after its old one was
 *   cut: README, "Semantics"), which such ids cannot produce;
 * - lost or reordered events (we ignore old ids and flag gaps; Dynamo applies whatever arrives);
 * - the two cases where Dynamo 1.6.1's path-compressed tree departs from the per-block semantics
 *   both follow (reference §3): removing a block from the middle of a held chain, and two engine
 *   ids for the same tokens. Each is pinned below with both answers, so a release of the crate that
 *   changes either shows up here.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mulberry32 } from '@vantage/random';
import type { ExternalHash, KvEvent, WorkerId } from '@vantage/types';
import { PrefixIndex } from '@vantage/prefix-index';
import { decodeAnswers, deviceOverlap, encodeEvents, encodeQueries, ORACLE_BUILD_TIMEOUT_MS, oracleBinary, type Leave } from '@vantage/dynamo-oracle';
import { locals, removed, stored } from './events';

let bin = '';
let dir = '';

beforeAll(() => {
  bin = oracleBinary();
  dir = mkdtempSync(join(tmpdir(), 'vantage-dynamo-diff-'));
}, ORACLE_BUILD_TIMEOUT_MS);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Dynamo's RadixTree answers after applying `events`: sorted "worker:dp:blocks" per query. */
describe('PrefixIndex', () => {
  function dynamo(events: ReadonlyArray<KvEvent | Leave>, queries: readonly BigUint64Array[]): { answers: string[][]; rejected: number } {
    writeFileSync(join(dir, 'e'), encodeEvents(events));
    writeFileSync(join(dir, 'q'), encodeQueries(queries));
    const r = spawnSync(bin, ['--check-only', '--queries', join(dir, 'q'), '--answers', join(dir, 'a'), `check=${join(dir, 'e')}`], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`dynamo oracle failed (${r.status ?? r.signal}): ${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { rejected: number };
    return { answers: decodeAnswers(readFileSync(join(dir, 'a'))), rejected: out.rejected };
  }

  function ours(idx: PrefixIndex, q: BigUint64Array): string[] {
    return deviceOverlap(idx.match(q));
  }

  /** A 64-bit mix of a parent id and a local hash (splitmix64's finaliser): distinct pairs, distinct ids. */
  function seqId(parent: bigint, local: bigint): bigint {
    const M = (1n << 64n) - 1n;
    let z = (parent * 0x9e3779b97f4a7c15n + local + 0x632be59bd9b4e019n) & M;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
    return z ^ (z >> 31n);
  }

  interface Block {
    readonly local: bigint;
    readonly ext: bigint;
  }

  /** A seeded stream with checkpoints: the events and, every `every` events, the query prompts. */
  function scenario(seed: number, nEvents: number) {
    const r = mulberry32(seed);
    const int = (n: number): number => Math.floor(r() * n);
    const u64 = (): bigint => (BigInt(int(2 ** 32)) << 32n) | BigInt(int(2 ** 32));
    // Paths: later ones share a prefix of an earlier one; some reuse a local hash of another path
    // under a different parent (same tokens at another position: a different node).
    const locals: bigint[] = [];
    const paths: Block[][] = [];
    for (let p = 0; p < 14; p++) {
      const base = paths.length > 0 && r() < 0.7 ? paths[int(paths.length)]! : [];
      const keep = base.slice(0, int(base.length + 1));
      const len = 3 + int(30);
      const path = [...keep];
      while (path.length < len) {
        const local = locals.length > 0 && r() < 0.15 ? locals[int(locals.length)]! : u64();
        locals.push(local);
        // The engine's block id is a function of the parent's id and the block's tokens, as
        // Dynamo's sequence hash is: the same tokens under the same parent always get the same id.
        path.push({ local, ext: seqId(path.length > 0 ? path[path.length - 1]!.ext : 0n, local) });
      }
      paths.push(path);
    }
    const pubs = [
      { w: 1n, dp: 0 },
      { w: 0x8000_0000_0000_0001n, dp: 0 },
      { w: 0xffff_ffff_ffff_fff0n, dp: 0 },
      { w: 0xffff_ffff_ffff_fff0n, dp: 1 },
      { w: 42n, dp: 0 },
      { w: 42n, dp: 1 },
      { w: 42n, dp: 2 },
    ].map((p) => ({ ...p, id: 0n, held: new Set<bigint>() }));
    const events: Array<KvEvent | Leave> = [];
    for (let i = 0; i < nEvents; i++) {
      if (r() < 0.015) {
        // A worker, or one of its dp ranks, leaves the pool; when it publishes again it starts over
        // (event ids from 1, an empty cache), as a restarted worker does.
        const q = pubs[int(pubs.length)]!;
        const whole = r() < 0.5;
        events.push(whole ? { leave: 'worker', workerId: q.w as WorkerId } : { leave: 'dp_rank', workerId: q.w as WorkerId, dpRank: q.dp });
        for (const o of pubs) {
          if (o.w !== q.w || (!whole && o.dp !== q.dp)) continue;
          o.held.clear();
          o.id = 0n;
        }
        continue;
      }
      const p = pubs[int(pubs.length)]!;
      const base = { workerId: p.w as WorkerId, dpRank: p.dp, storageTier: 'device' as const, eventId: ++p.id };
      const x = r();
      const heldPaths = paths.filter((path) => p.held.has(path[0]!.ext));
      if (x < 0.5 || p.held.size === 0) {
        // Store blocks a..b of a path under block a-1: held by this publisher (usually), or not
        // (Dynamo drops such an event; we keep it unreachable).
        const path = paths[int(paths.length)]!;
        let a = int(path.length);
        if (r() < 0.9) while (a > 0 && !p.held.has(path[a - 1]!.ext)) a--;
        const b = a + 1 + int(path.length - a);
        const parentKnown = a === 0 || p.held.has(path[a - 1]!.ext);
        const blocks = path.slice(a, b);
        // Now and then a self-referencing store: its last block names the parent's id again.
        const selfRef = a > 0 && r() < 0.03;
        if (selfRef) blocks.push({ local: u64(), ext: path[a - 1]!.ext });
        events.push({
          ...base,
          data: {
            kind: 'stored',
            parentHash: a === 0 ? null : (path[a - 1]!.ext as ExternalHash),
            startPosition: null,
            blockHashes: BigUint64Array.from(blocks.map((k) => k.ext)),
            tokensHashes: BigUint64Array.from(blocks.map((k) => k.local)),
          },
        });
        if (parentKnown && !selfRef) for (const k of blocks) p.held.add(k.ext);
      } else if (x < 0.93) {
        // Remove (evict) blocks together with every block this publisher holds below them, as a
        // cache evicts leaves before their parents: a held chain's last blocks, or any held block
        // and its held descendants. (Removing a block from the middle of a held chain is left out:
        // Dynamo 1.6.1's path-compressed tree then forgets the publisher's blocks after it in the
        // same tree node, which the README describes; the reference-model test covers it for us.)
        const pick: bigint[] = [];
        if (r() < 0.6 && heldPaths.length > 0) {
          const path = heldPaths[int(heldPaths.length)]!;
          let end = 0;
          while (end < path.length && p.held.has(path[end]!.ext)) end++;
          for (let k = Math.max(0, end - 1 - int(4)); k < end; k++) pick.push(path[k]!.ext);
        } else {
          const all = [...p.held];
          for (let k = 0; k < 1 + int(3); k++) pick.push(all[int(all.length)]!);
        }
        const gone = new Set(pick);
        for (const path of paths) {
          const k = path.findIndex((b) => gone.has(b.ext));
          if (k >= 0) for (const b of path.slice(k + 1)) if (p.held.has(b.ext)) gone.add(b.ext);
        }
        // Named in an order a cache could evict them in: descendants first.
        const order = [...gone].reverse();
        events.push({ ...base, data: { kind: 'removed', blockHashes: BigUint64Array.from(order) } });
        for (const e of gone) p.held.delete(e);
      } else {
        events.push({ ...base, data: { kind: 'cleared' } });
        p.held.clear();
      }
    }
    // Queries: every path whole, a prefix of each, and each with a foreign tail.
    const queries: BigUint64Array[] = [];
    for (const path of paths) {
      const loc = path.map((k) => k.local);
      queries.push(BigUint64Array.from(loc));
      queries.push(BigUint64Array.from(loc.slice(0, 1 + int(loc.length))));
      queries.push(BigUint64Array.from([...loc.slice(0, int(loc.length)), u64(), ...loc.slice(0, 3)]));
    }
    return { events, queries };
  }

  describe("where Dynamo 1.6.1's RadixTree departs from the per-block semantics", () => {
    it('removing a block from the middle of a chain another worker shares: Dynamo forgets the rest of the chain in that node', () => {
      // Worker 1 removes block 2 only and stores it again: it never removed blocks 3 to 5, and block
      // 2's node stays in the tree (worker 2 holds it), so worker 1 holds all five leading blocks.
      const events = [
        stored(2, 1, null, [[1, 101], [2, 102], [3, 103]]),
        stored(1, 1, null, [[1, 101], [2, 102], [3, 103], [4, 104], [5, 105]]),
        removed(1, 2, [2]),
        stored(1, 3, 1, [[2, 102]]),
      ];
      const q = locals(101, 102, 103, 104, 105);
      const idx = new PrefixIndex(16);
      events.forEach((e, i) => idx.apply(e, i));
      expect(ours(idx, q)).toEqual(['1:0:5', '2:0:3']);
      expect(dynamo(events, [q]).answers[0]).toEqual(['1:0:2', '2:0:3']);
    });

    it('two engine ids for the same tokens under one parent: Dynamo rejects the second id\'s removal and keeps the worker on the block', () => {
      const events = [
        stored(2, 1, null, [[1, 101], [2, 102], [30, 103]]),
        stored(1, 1, null, [[1, 101], [2, 102], [31, 103]]),
        removed(1, 2, [31]),
      ];
      const q = locals(101, 102, 103);
      const idx = new PrefixIndex(16);
      events.forEach((e, i) => idx.apply(e, i));
      expect(ours(idx, q)).toEqual(['1:0:2', '2:0:3']);
      const d = dynamo(events, [q]);
      expect(d.answers[0]).toEqual(['1:0:3', '2:0:3']);
      expect(d.rejected).toBe(1);
    });
  });

  describe('self-referencing stored events', () => {
    // Worker 2 shares the first two blocks; worker 1 holds 1 to 3 and then sends stores that name a
    // block id twice. Probes run over that chain and its would-be extensions.
    const base = [stored(2, 1, null, [[101, 1], [102, 2]]), stored(1, 1, null, [[101, 1], [102, 2], [103, 3]])];
    const probes = [locals(1, 2, 3), locals(1, 2, 3, 4, 5), locals(1, 2, 4, 5), locals(1, 2, 3, 6), locals(1, 7, 8), locals(7, 8)];

    it("a block id equal to the parent: Dynamo's RadixTree refuses the event, we refuse it, and the answers agree", () => {
      const events = [
        ...base,
        stored(1, 2, 103, [[104, 4], [103, 5]]),
        stored(1, 3, 102, [[104, 4], [102, 5]]),
        // The next store continues normally.
        stored(1, 4, 103, [[106, 6]]),
      ];
      const idx = new PrefixIndex(16);
      const statuses = events.map((e, i) => idx.apply(e, i).status);
      expect(statuses).toEqual(['applied', 'applied', 'rejected', 'rejected', 'applied']);
      const d = dynamo(events, probes);
      expect(d.rejected).toBe(2);
      expect(probes.map((q) => ours(idx, q))).toEqual(d.answers);
      expect(d.answers[0]).toEqual(['1:0:3', '2:0:2']);
      expect(d.answers[3]).toEqual(['1:0:4', '2:0:2']);
    });

    it("a block id repeated within the event: refused as Dynamo's event path refuses it, before its RadixTree", () => {
      // Dynamo's RadixTree checks only the parent; the repeat within the blocks is caught upstream,
      // where an engine's event becomes a RouterEvent (zmq_wire convert_event: the event is replaced
      // by an empty removal with the same id). Fed that replacement, the RadixTree answers as we do.
      const bad = stored(1, 2, 103, [[104, 4], [105, 5], [104, 7]]);
      const fromRoot = stored(1, 3, null, [[201, 7], [201, 8]]);
      const next = stored(1, 4, 103, [[104, 4]]);
      const idx = new PrefixIndex(16);
      for (const [i, e] of [...base, bad, fromRoot, next].entries()) idx.apply(e, i);
      expect(idx.stats().publishers.find((p) => p.workerId === 1n)?.blocks).toBe(4);
      const asForwarded = [...base, removed(1, 2, []), removed(1, 3, []), next];
      const d = dynamo(asForwarded, probes);
      expect(d.rejected).toBe(0);
      expect(probes.map((q) => ours(idx, q))).toEqual(d.answers);
      expect(d.answers[1]).toEqual(['1:0:4', '2:0:2']);
      // The RadixTree given the events unfiltered takes them: it then answers otherwise (pinned, so
      // a release that moves the check into the tree shows up here).
      const raw = dynamo([...base, bad, fromRoot, next], probes);
      expect(raw.rejected).toBe(0);
      expect(raw.answers).not.toEqual(d.answers);
    });
  });

  describe("match answers equal Dynamo's RadixTree", () => {
    for (let seed = 1; seed <= 12; seed++) {
      it(`seed ${seed}: at every checkpoint of 1,000 events`, () => {
        const { events, queries } = scenario(seed, 1000);
        const idx = new PrefixIndex(16);
        let compared = 0;
        let rejected = 0;
        let selfReferencing = 0;
        for (let end = 50; end <= events.length; end += 50) {
          for (let i = end - 50; i < end; i++) {
            const e = events[i]!;
            if (!('leave' in e)) {
              if (idx.apply(e, i).rejection === 'self_referencing') selfReferencing++;
            }
            else if (e.leave === 'worker') idx.removeWorker(e.workerId);
            else idx.removeDpRank(e.workerId, e.dpRank);
          }
          const d = dynamo(events.slice(0, end), queries);
          rejected = d.rejected;
          for (let q = 0; q < queries.length; q++) {
            const mine = ours(idx, queries[q]!);
            if (mine.join(' ') !== d.answers[q]!.join(' ')) {
              throw new Error(`seed ${seed}, after ${end} events, query ${q} (${queries[q]!.length} blocks):\n dynamo ${d.answers[q]!.join(' ')}\n ours   ${mine.join(' ')}`);
            }
            compared++;
          }
        }
        expect(compared).toBe(20 * queries.length);
        // The streams do exercise the paths that differ inside the two indexes.
        expect(rejected).toBeGreaterThan(selfReferencing);
        expect(selfReferencing).toBeGreaterThan(0);
        expect(idx.stats().counters.unknownParents).toBeGreaterThan(0);
        expect(events.filter((e) => 'leave' in e).length).toBeGreaterThan(0);
      });
    }
  });
});
