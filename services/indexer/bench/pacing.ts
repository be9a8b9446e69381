/**
 * When an open loop's requests go out (the indexer benchmark's BENCH_PACING):
 * - `even`: the k-th request at start + k / rate, as a steady stream of queries at that rate. A
 *   metronome thread sleeps to each send time (`Atomics.wait`, sub-millisecond) and wakes this
 *   thread's event loop, which sends what is due, so at 1,000/s requests go out one at a time. The
 *   metronome's wakes are scheduled at least 1 ms apart (above 1,000/s requests go out in groups of
 *   those due by then), and a wake that finds the previous one not yet taken up only raises the
 *   count due (what is due goes out at once, as with the timer, when this thread falls behind).
 * - `timer`: a 1 ms timer sends whatever is due. Node runs a 1 ms timer about every 2 ms on the
 *   development machine, so at 1,000/s about half the requests go out in back-to-back pairs, and the
 *   second of a pair waits for the responder to finish the first (the indexer README's ninth round).
 */
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';

export type Pacing = 'even' | 'timer';

export function pacingOf(value: string | undefined): Pacing {
  const p = value ?? 'even';
  if (p !== 'even' && p !== 'timer') throw new Error(`BENCH_PACING=${p}: 'even' or 'timer'`);
  return p;
}

/**
 * The metronome thread. Told (total, rate, cells), it keeps `cells[0]` = the number of requests due
 * so far (the k-th at k / rate after it was told) and posts a message whenever it raises it while
 * `cells[1]`, the flag the main thread clears when it takes the count up, is clear.
 */
const METRONOME = `
const { parentPort } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const QUANTUM_MS = 1;
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const sleepUntil = (start, t) => {
  const ms = start + t - performance.now();
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms);
};
parentPort.on('message', ({ total, rate, cells }) => {
  const c = new Int32Array(cells);
  const start = performance.now();
  let k = 0;
  let at = 0; // send time of request k, ms after the start
  let wake = 0; // this wake's scheduled time (on the schedule, so that late wakes do not add up)
  while (k < total) {
    sleepUntil(start, wake);
    const now = performance.now() - start;
    while (k < total && at <= now) {
      k++;
      at = (k * 1000) / rate;
    }
    Atomics.store(c, 0, k);
    if (Atomics.exchange(c, 1, 1) === 0) parentPort.postMessage(0);
    wake = Math.max(at, wake + QUANTUM_MS);
  }
});
`;
let metronome: Worker | null = null;

function metronomeThread(): Worker {
  if (metronome === null) {
    metronome = new Worker(METRONOME, { eval: true });
    metronome.unref();
  }
  return metronome;
}

/**
 * Calls `send(k)` for k = 0 .. total − 1, in order, each no earlier than k / rate after the call;
 * resolves once the last has been sent. One schedule at a time.
 */
export function paced(pacing: Pacing, total: number, rate: number, send: (k: number) => void): Promise<void> {
  let sent = 0;
  if (pacing === 'even') {
    const m = metronomeThread();
    const cells = new Int32Array(new SharedArrayBuffer(8));
    return new Promise<void>((resolve) => {
      const onTick = (): void => {
        Atomics.store(cells, 1, 0);
        const due = Atomics.load(cells, 0);
        for (; sent < due; sent++) send(sent);
        if (sent >= total) {
          m.off('message', onTick);
          resolve();
        }
      };
      m.on('message', onTick);
      m.postMessage({ total, rate, cells: cells.buffer });
    });
  }
  const start = performance.now();
  return new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000));
      for (; sent < due; sent++) send(sent);
      if (sent >= total) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
}
