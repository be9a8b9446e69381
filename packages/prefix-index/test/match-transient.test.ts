import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PrefixIndex, type WorkerMatch } from '@vantage/prefix-index';
import { W } from './events';
import { ReferenceIndex } from './reference-model';
import { WORKERS, cmdArb, queries, toEvent } from './streams';

/** Every field of a match answer, in a form `toEqual` compares exactly (the record objects themselves differ). */
const plain = (ws: readonly WorkerMatch[]): WorkerMatch[] => ws.map((w) => ({ ...w }));

describe('matchTransient', () => {
  it('answers exactly what match answers, in records the index reuses query after query', () => {
    fc.assert(
      fc.property(fc.array(cmdArb, { maxLength: 80 }), (cmds) => {
        const idx = new PrefixIndex(16);
        const ref = new ReferenceIndex();
        const sent = new Map<string, bigint>();
        cmds.forEach((c, i) => {
          const now = 1000 + i;
          if (c.t === 'ev') {
            const ev = toEvent(c, sent);
            idx.apply(ev, now);
            ref.apply(ev, now);
          } else if (c.t === 'removeWorker') {
            idx.removeWorker(W(WORKERS[c.w]!));
            ref.removeWorker(WORKERS[c.w]!);
          } else if (c.t === 'removeDp') {
            idx.removeDpRank(W(WORKERS[c.w]!), c.dp);
            ref.removeDpRank(WORKERS[c.w]!, c.dp);
          } else {
            idx.resync(W(WORKERS[c.w]!), c.dp, now, c.withId ? sent.get(`${c.w}:${c.dp}`) : undefined);
            ref.resync(WORKERS[c.w]!, c.dp, now, c.withId ? sent.get(`${c.w}:${c.dp}`) : undefined);
          }
          let previous: readonly WorkerMatch[] | null = null;
          for (const q of queries(ref)) {
            const t = idx.matchTransient(q);
            const m = idx.match(q);
            expect([t.blockSize, t.requestBlocks]).toEqual([m.blockSize, m.requestBlocks]);
            expect(plain(t.workers)).toEqual(plain(m.workers));
            // The same publisher's record is the same object in the next transient answer.
            if (previous !== null) for (let k = 0; k < t.workers.length; k++) expect(t.workers[k]).toBe(previous[k]);
            previous = [...t.workers];
          }
        });
      }),
      { numRuns: 150 },
    );
  });
});
