import { performance } from 'node:perf_hooks';
import { beforeAll, describe, expect, it } from 'vitest';
import { paced, pacingOf } from '../pacing';

/**
 * Sends of one schedule: index and main-thread time (ms) of each, and whether each was sent in the
 * same synchronous run as the one before (no microtask ran between them: one tick of the pacer).
 */
async function schedule(
  pacing: 'even' | 'timer',
  total: number,
  rate: number,
  during?: (k: number) => void,
): Promise<{ start: number; ks: number[]; at: number[]; sameTick: boolean[] }> {
  const ks: number[] = [];
  const at: number[] = [];
  const sameTick: boolean[] = [];
  let yielded = true;
  const start = performance.now();
  await paced(pacing, total, rate, (k) => {
    ks.push(k);
    at.push(performance.now());
    sameTick.push(!yielded);
    yielded = false;
    queueMicrotask(() => (yielded = true));
    during?.(k);
  });
  return { start, ks, at, sameTick };
}

const inOrder = (n: number): number[] => Array.from({ length: n }, (_, k) => k);

describe('open-loop pacing (the indexer benchmark)', () => {
  // The metronome thread starts on first use; started here, its start-up does not pad the first schedule.
  beforeAll(() => paced('even', 1, 1000, () => {}));

  for (const pacing of ['even', 'timer'] as const) {
    it(`${pacing}: sends every request once, in order, none before its time`, async () => {
      // A period longer than the metronome's 1 ms wake spacing, which would hide a schedule early by less.
      const total = 30;
      const rate = 500;
      const { start, ks, at } = await schedule(pacing, total, rate);
      expect(ks).toEqual(inOrder(total));
      // A lower bound only: a late send is the machine's doing, an early one the schedule's.
      for (let k = 0; k < total; k++) expect(at[k]! - start).toBeGreaterThanOrEqual((k * 1000) / rate - 0.01);
    });
  }

  it('even: what fell due while the sender was busy goes out at once, nothing lost, and the schedule goes on', async () => {
    const total = 40;
    const rate = 1000;
    // The sender's thread is blocked for 12 ms at request 5: requests 6..17 fall due meanwhile.
    const { start, ks, at, sameTick } = await schedule('even', total, rate, (k) => {
      if (k !== 5) return;
      const until = performance.now() + 12;
      while (performance.now() < until);
    });
    expect(ks).toEqual(inOrder(total));
    expect(at[6]! - at[5]!).toBeGreaterThanOrEqual(12);
    // The backlog went out in one tick: request 6 with those due by then (7..16, 7..9 checked, due
    // at least 8 ms before the block ended, so that a slow metronome thread cannot miss them).
    expect(sameTick[6]).toBe(false);
    expect(sameTick.slice(7, 10)).toEqual([true, true, true]);
    for (let k = 0; k < total; k++) expect(at[k]! - start).toBeGreaterThanOrEqual((k * 1000) / rate - 0.01);
  });

  it('runs one schedule after another on the same metronome', async () => {
    for (const total of [5, 17, 1]) expect((await schedule('even', total, 5000)).ks).toEqual(inOrder(total));
  });

  it('takes even or timer, and says what it takes otherwise', () => {
    expect(pacingOf(undefined)).toBe('even');
    expect(pacingOf('timer')).toBe('timer');
    expect(() => pacingOf('poisson')).toThrow(/'even' or 'timer'/);
  });
});
