import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ObserveHistogram } from '../src/metrics';

describe('ObserveHistogram', () => {
  it("exposes the same text as prom-client's Histogram for the same observations", async () => {
    const buckets = [0.00002, 0.0001, 0.001, 0.01];
    const mine = new Registry();
    const ref = new Registry();
    const h = new ObserveHistogram(mine, 'x_seconds', 'help text', buckets);
    const r = new Histogram({ name: 'x_seconds', help: 'help text', labelNames: ['pool', 'outcome'], buckets, registers: [ref] });
    const obs: [string, string, number][] = [
      ['a', 'ok', 0.00001],
      ['a', 'ok', 0.0001],
      ['a', 'ok', 0.5],
      ['b', 'bad_request', 0.002],
      ['a', 'ok', 0.00002],
    ];
    const okA = h.series('a', 'ok');
    for (const [pool, outcome, v] of obs) {
      if (pool === 'a' && outcome === 'ok') okA.observe(v);
      else h.observe({ pool, outcome }, v);
      r.observe({ pool, outcome }, v);
    }
    expect(await mine.metrics()).toBe(await ref.metrics());
    h.reset();
    r.reset();
    h.series('c', 'ok');
    expect(await mine.metrics()).toBe(await ref.metrics());
  });
});
