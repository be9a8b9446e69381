import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PrefixIndex, SnapshotError } from '@vantage/prefix-index';
import { ReferenceIndex } from './reference-model';
import { W, locals, removed, stored } from './events';
import { WORKERS, cmdArb, normApply, normImpl, queries, toEvent } from './streams';
import type { Cmd } from './streams';
import { ROOT_REF, SNAPSHOT_VERSION, writeImage, type PublisherHead, type TreeDump } from '../src/snapshot-io';

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

/** Statistics that a restore keeps (see the first test). */
const logical = (x: PrefixIndex): unknown => ({ ...x.stats(), arrayBytes: 0, nodes: 0 });

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
        // A restore rebuilds the tables in its own order, so its image need not be byte-identical;
        // it holds the same index (statistics without array bytes and node counts, which differ
        // only by chains that hang from nothing: README, "Snapshot format"), and restores to it again.
        expect(logical(b)).toEqual(logical(a));
        expect(logical(PrefixIndex.restore(b.snapshot()))).toEqual(logical(a));
        const sentB = new Map(sentA);
        after.forEach((c, i) => {
          const now = 10_000 + i;
          expect(step(b, c, sentB, now)).toEqual(step(a, c, sentA, now, ref));
          for (const q of queries(ref)) expect(normImpl(b.match(q))).toEqual(normImpl(a.match(q)));
        });
        expect(logical(b)).toEqual(logical(a));
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

  it('refuses foreign, corrupt, truncated and newer snapshots with a clear error', () => {
    const Index = PrefixIndex;
    const a = new Index(16);
    for (let i = 1; i <= 20; i++) a.apply(stored(i % 3, Math.ceil(i / 3), null, [[i, i % 4]]), 0);
    const good = a.snapshot();
    const expectError = (bytes: Uint8Array, code: SnapshotError['code'], msg: RegExp): void => expectRefused(Index, bytes, code, msg);
    expectError(new Uint8Array(3), 'bad_magic', /not a prefix-index snapshot/);
    const foreign = good.slice();
    foreign[0] = 0x7b; // '{'
    expectError(foreign, 'bad_magic', /bad magic/);
    const newer = good.slice();
    new DataView(newer.buffer).setUint32(4, 2, true);
    expectError(newer, 'unsupported_version', /version 2 is not supported/);
    const older = good.slice();
    new DataView(older.buffer).setUint32(4, 0, true);
    expectError(older, 'unsupported_version', /version 0 is not supported/);
    expectError(good.subarray(0, good.length - 1), 'corrupt', /length/);
    for (const at of [24, Math.floor(good.length / 2), good.length - 1]) {
      const flipped = good.slice();
      flipped[at]! ^= 0x10;
      expectError(flipped, 'corrupt', /checksum/);
    }
    expect(() => Index.restore(good)).not.toThrow();
  });

  it('refuses as corrupt the images of the removed per-block layout, which carried the same version number', () => {
    const fixture = JSON.parse(readFileSync(new URL('./fixtures/old-layout-v1.json', import.meta.url), 'utf8')) as { images: string[] };
    expect(fixture.images.length).toBe(4);
    for (const b64 of fixture.images) {
      const bytes = new Uint8Array(Buffer.from(b64, 'base64'));
      expect(new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true)).toBe(SNAPSHOT_VERSION);
      expectRefused(PrefixIndex, bytes, 'corrupt', /truncated|inconsistent/);
    }
  });

  it('restores a worker dropped from a block by one of its two ids while another worker keeps the block', () => {
    const Index = PrefixIndex;
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
    // Restored, and restored from the restored index's own image.
    const b = Index.restore(a.snapshot());
    const c = Index.restore(b.snapshot());
    for (const x of [a, b, c]) {
      expect(dev(x, [10, 11])).toBe('1:0 2:1');
      // Worker 1 stores the block again: its child below the block is reached again.
      x.apply(stored(1, 5, null, [[4, 10]]), 0);
      expect(dev(x, [10, 11])).toBe('1:2 2:1');
    }
  });

  it('refuses an image whose checksum is right but whose tree is not', () => {
    const Index = PrefixIndex;
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
      const ids = o.ids ?? [1, 2];
      const dump: TreeDump = {
        parent: Int32Array.from(o.parent ?? [ROOT_REF, 0]),
        lo: Int32Array.of(10, 11),
        hi: Int32Array.of(0, 0),
        entries: [{ idLo: Int32Array.from(ids), idHi: Int32Array.of(0, 0), pos: Int32Array.from(o.pos ?? [0, 1]), tiers: Uint8Array.from(o.tiers ?? [0x11, 0x11]) }],
      };
      return writeImage(o.blockSize ?? 16, new Index(16).stats().counters, [head(o.tierBlocks ?? [2, 0, 0, 0])], dump);
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
