import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PrefixIndex, RunIndex, SnapshotError } from '@vantage/prefix-index';
import { ReferenceIndex } from './reference-model';
import { W, locals, removed, stored } from './events';
import { WORKERS, cmdArb, normApply, normImpl, queries, toEvent } from './streams';
import type { Cmd } from './streams';
import { v1Streams } from './v1-streams';
import { IMPLEMENTATIONS } from './impls';
import { emptyCounters, openWriter, sealWriter, writeCounters, writePublisherHead, type PublisherHead } from '../src/index-base';
import { ROOT_REF, writeTree, type TreeDump } from '../src/tree-dump';

/** Apply one command to an index (and the reference, which only supplies query paths). */
function step(idx: PrefixIndex, c: Cmd, sent: Map<string, bigint>, now: number, ref?: ReferenceIndex): unknown {
  if (c.t === 'ev') {
    const ev = toEvent(c, sent);
    ref?.apply(ev, now);
    return normApply(idx.apply(ev, now));
  }
  const w = WORKERS[c.w]!;
  if (c.t === 'removeWorker') {
    ref?.removeWorker(w);
    return idx.removeWorker(W(w));
  }
  if (c.t === 'removeDp') {
    ref?.removeDpRank(w, c.dp);
    return idx.removeDpRank(W(w), c.dp);
  }
  const id = c.withId ? sent.get(`${c.w}:${c.dp}`) : undefined;
  ref?.resync(w, c.dp, now, id);
  idx.resync(W(w), c.dp, now, id);
  return null;
}

/** Restoring `bytes` throws a SnapshotError with `code` and a message matching `msg`. */
function expectRefused(Index: { restore(bytes: Uint8Array): unknown }, bytes: Uint8Array, code: SnapshotError['code'], msg: RegExp): void {
  let err: unknown;
  try {
    Index.restore(bytes);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(SnapshotError);
  expect((err as SnapshotError).code).toBe(code);
  expect((err as SnapshotError).message).toMatch(msg);
}

describe('snapshot', () => {
  it('restore(snapshot(x)) answers every match and every later event exactly like x', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { maxLength: 50 }), fc.array(cmdArb, { maxLength: 30 }), (before, after) => {
        const a = new PrefixIndex(32);
        const ref = new ReferenceIndex();
        const sentA = new Map<string, bigint>();
        before.forEach((c, i) => step(a, c, sentA, i, ref));
        const bytes = a.snapshot();
        const b = PrefixIndex.restore(bytes);
        expect(b.blockSize).toBe(32);
        // A snapshot of the restored index is byte-identical: nothing was lost or reinterpreted.
        expect(b.snapshot()).toEqual(bytes);
        expect(b.stats()).toEqual(a.stats());
        const sentB = new Map(sentA);
        after.forEach((c, i) => {
          const now = 10_000 + i;
          expect(step(b, c, sentB, now)).toEqual(step(a, c, sentA, now, ref));
          for (const q of queries(ref)) expect(normImpl(b.match(q))).toEqual(normImpl(a.match(q)));
        });
        expect(b.stats()).toEqual(a.stats());
      }),
      { seed: 0x5eed_0004, numRuns: 200 },
    );
  });

  it('keeps suspect flags, last event ids and detached chains', () => {
    const a = new PrefixIndex(16);
    a.apply(stored(1, 1, null, [[100, 1]]), 0);
    a.apply(stored(1, 4, 999, [[101, 2]]), 77); // gap and unknown parent
    a.apply(stored(2, 9, null, [[200, 1]], { tier: 'disk' }), 80); // missed start
    const b = PrefixIndex.restore(a.snapshot());
    const m = b.match(locals(1, 2));
    expect(m).toEqual(a.match(locals(1, 2)));
    const w1 = m.workers.find((x) => x.workerId === 1n)!;
    expect(w1.suspect).toEqual({ reason: 'event_gap', sinceMs: 77, incidents: 2 });
    expect(w1.lastEventId).toBe(4n);
    expect(b.apply(stored(1, 4, null, [[100, 1]]), 0).status).toBe('duplicate');
    expect(b.apply(stored(1, 5, 101, [[102, 3]]), 0).unknownParent).toBe(false);
  });

  it.each(IMPLEMENTATIONS)('$name refuses foreign, corrupt, truncated and newer snapshots with a clear error', ({ Index }) => {
    const a = new Index(16);
    for (let i = 1; i <= 20; i++) a.apply(stored(i % 3, Math.ceil(i / 3), null, [[i, i % 4]]), 0);
    const good = a.snapshot();
    const expectError = (bytes: Uint8Array, code: SnapshotError['code'], msg: RegExp): void => expectRefused(Index, bytes, code, msg);
    expectError(new Uint8Array(3), 'bad_magic', /not a prefix-index snapshot/);
    const foreign = good.slice();
    foreign[0] = 0x7b; // '{'
    expectError(foreign, 'bad_magic', /bad magic/);
    const newer = good.slice();
    new DataView(newer.buffer).setUint32(4, 4, true);
    expectError(newer, 'unsupported_version', /version 4 is not supported/);
    expectError(good.subarray(0, good.length - 1), 'corrupt', /length/);
    for (const at of [24, Math.floor(good.length / 2), good.length - 1]) {
      const flipped = good.slice();
      flipped[at]! ^= 0x10;
      expectError(flipped, 'corrupt', /checksum/);
    }
    expect(() => Index.restore(good)).not.toThrow();
  });

  it('restores version-1 images (written before the compact layout) to an index that behaves identically', () => {
    const fixture = JSON.parse(readFileSync(new URL('./fixtures/snapshot-v1.json', import.meta.url), 'utf8')) as {
      blockSize: number;
      images: string[];
    };
    const streams = v1Streams();
    expect(fixture.images.length).toBe(streams.length);
    const withoutBytes = (x: PrefixIndex): unknown => ({ ...x.stats(), arrayBytes: 0 });
    streams.forEach(([before, after], k) => {
      const bytes = new Uint8Array(Buffer.from(fixture.images[k]!, 'base64'));
      expect(new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true)).toBe(1);
      const old = PrefixIndex.restore(bytes);
      const fresh = new PrefixIndex(fixture.blockSize);
      const ref = new ReferenceIndex();
      const sentF = new Map<string, bigint>();
      before.forEach((c, i) => step(fresh, c, sentF, i, ref));
      expect(withoutBytes(old)).toEqual(withoutBytes(fresh));
      // A re-snapshot is written in the current version and restores to the same index.
      const again = PrefixIndex.restore(old.snapshot());
      expect(again.snapshot()).toEqual(old.snapshot());
      const sentO = new Map(sentF);
      for (const q of queries(ref)) expect(normImpl(old.match(q))).toEqual(normImpl(fresh.match(q)));
      after.forEach((c, i) => {
        const now = 10_000 + i;
        expect(step(old, c, sentO, now), `image ${k}, command ${i} after restore`).toEqual(step(fresh, c, sentF, now, ref));
        for (const q of queries(ref)) expect(normImpl(old.match(q))).toEqual(normImpl(fresh.match(q)));
      });
      expect(withoutBytes(old)).toEqual(withoutBytes(fresh));
    });
  });

  it('converts between layouts: RunIndex restores version-1 and version-2 images, PrefixIndex version-3 ones, each behaving identically', () => {
    const fixture = JSON.parse(readFileSync(new URL('./fixtures/snapshot-v1.json', import.meta.url), 'utf8')) as {
      blockSize: number;
      images: string[];
    };
    const asPrefix = (x: RunIndex): PrefixIndex => x as unknown as PrefixIndex;
    // Statistics without array bytes and node counts (chains that hang from nothing are restored
    // once per publisher holding them: tree-dump.ts).
    const logical = (x: PrefixIndex): unknown => ({ ...x.stats(), arrayBytes: 0, nodes: 0 });
    v1Streams().forEach(([before, after], k) => {
      const fresh = new PrefixIndex(fixture.blockSize);
      const ref = new ReferenceIndex();
      const sent = new Map<string, bigint>();
      before.forEach((c, i) => step(fresh, c, sent, i, ref));
      const v1 = new Uint8Array(Buffer.from(fixture.images[k]!, 'base64'));
      const v2 = fresh.snapshot();
      const fromV1 = asPrefix(RunIndex.restore(v1));
      const fromV2 = asPrefix(RunIndex.restore(v2));
      const v3 = fromV2.snapshot();
      expect(new DataView(v3.buffer, v3.byteOffset).getUint32(4, true)).toBe(3);
      const fromV3 = PrefixIndex.restore(v3);
      const copies = [fromV1, fromV2, fromV3, asPrefix(RunIndex.restore(v3))];
      const sents = copies.map(() => new Map(sent));
      const same = (where: string): void => {
        for (const [j, x] of copies.entries()) {
          expect(logical(x), `${where}, copy ${j}`).toEqual(logical(fresh));
          for (const q of queries(ref)) expect(normImpl(x.match(q)), `${where}, copy ${j}`).toEqual(normImpl(fresh.match(q)));
        }
      };
      same(`image ${k}`);
      after.forEach((c, i) => {
        const now = 10_000 + i;
        const want = step(fresh, c, sent, now, ref);
        copies.forEach((x, j) => expect(step(x, c, sents[j]!, now), `image ${k}, command ${i}, copy ${j}`).toEqual(want));
      });
      same(`image ${k} after its commands`);
    });
  });

  it.each(IMPLEMENTATIONS)('$name restores a worker dropped from a block by one of its two ids while another worker keeps the block', ({ Index }) => {
    const dev = (x: PrefixIndex, q: readonly number[]): string =>
      x
        .match(locals(...q))
        .workers.map((w) => `${w.workerId}:${w.deviceBlocks}`)
        .join(' ');
    const a = new Index(16);
    a.apply(stored(1, 1, null, [[1, 10]]), 0);
    a.apply(stored(1, 2, null, [[2, 10]]), 0);
    a.apply(stored(2, 1, null, [[9, 10]]), 0);
    // Dynamo drops worker 1 from the block although its id 2 still names it; worker 2 keeps it in the tree.
    a.apply(removed(1, 3, [1]), 0);
    a.apply(stored(1, 4, 2, [[3, 11]]), 0);
    // Restored by its own layout, and converted into the other.
    const b = Index.restore(a.snapshot());
    const other = (Index as unknown) === RunIndex ? PrefixIndex : (RunIndex as unknown as typeof PrefixIndex);
    const c = other.restore(a.snapshot());
    for (const x of [a, b, c]) {
      expect(dev(x, [10, 11])).toBe('1:0 2:1');
      // Worker 1 stores the block again: its child below the block is reached again.
      x.apply(stored(1, 5, null, [[4, 10]]), 0);
      expect(dev(x, [10, 11])).toBe('1:2 2:1');
    }
  });

  it.each(IMPLEMENTATIONS)('$name refuses a version-3 image whose checksum is right but whose tree is not', ({ Index }) => {
    // A two-block chain held by one worker, written with the image's own writers, then spoilt one way at a time.
    const head = (tierBlocks: number[]): PublisherHead => ({
      workerId: W(7),
      dpRank: 0,
      slot: 0,
      lastEventId: 2n,
      expectStart: false,
      suspect: null,
      lastEventMs: 0,
      tierBlocks: Uint32Array.from(tierBlocks),
    });
    const image = (o: { blockSize?: number; parent?: number[]; ids?: number[]; pos?: number[]; tiers?: number[]; tierBlocks?: number[] }): Uint8Array => {
      const { w, start } = openWriter(3);
      w.u32(o.blockSize ?? 16);
      writeCounters(w, emptyCounters());
      w.u32(1);
      writePublisherHead(w, head(o.tierBlocks ?? [2, 0, 0, 0]));
      const ids = o.ids ?? [1, 2];
      const dump: TreeDump = {
        parent: Int32Array.from(o.parent ?? [ROOT_REF, 0]),
        lo: Int32Array.of(10, 11),
        hi: Int32Array.of(0, 0),
        entries: [{ idLo: Int32Array.from(ids), idHi: Int32Array.of(0, 0), pos: Int32Array.from(o.pos ?? [0, 1]), tiers: Uint8Array.from(o.tiers ?? [0x11, 0x11]) }],
      };
      writeTree(w, dump);
      return sealWriter(w, start);
    };
    const good = Index.restore(image({}));
    expect(good.match(locals(10, 11)).workers.map((x) => x.deviceBlocks)).toEqual([2]);
    const refused = (bytes: Uint8Array, msg: RegExp): void => expectRefused(Index, bytes, 'corrupt', msg);
    refused(image({ blockSize: 0 }), /block size/);
    refused(image({ parent: [ROOT_REF, 1] }), /position 1 has parent 1/);
    refused(image({ pos: [0, 2] }), /names position 2/);
    refused(image({ tiers: [0x11, 0x10] }), /has no tier/);
    refused(image({ ids: [1, 1] }), /block id twice/);
    refused(image({ tiers: [0x11, 0x31] }), /holds tiers at position 1 that none of its ids has/);
    refused(image({ tierBlocks: [3, 0, 0, 0] }), /holds 2 blocks on tier 0, its header says 3/);
  });
});
