import { describe, expect, it } from 'vitest';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { LazyCounter, LazyGauge, LazyHistogram } from '../src/lazy-metrics';

const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Two registries with the same default labels: one with prom-client's metrics, one with the lazy ones. */
function pair(): { prom: Registry; lazy: Registry } {
  const prom = new Registry();
  const lazy = new Registry();
  prom.setDefaultLabels({ service: 'svc' });
  lazy.setDefaultLabels({ service: 'svc' });
  return { prom, lazy };
}

describe('lazy metrics', () => {
  it('a histogram exposes exactly what prom-client exposes for the same observations', async () => {
    const { prom, lazy } = pair();
    const p = new Histogram({ name: 'h_seconds', help: 'h', labelNames: ['pool', 'outcome'], buckets: LATENCY_BUCKETS, registers: [prom] });
    const l = new LazyHistogram(lazy, 'h_seconds', 'h', ['pool', 'outcome'], LATENCY_BUCKETS);
    // Values on, between, below and above the bounds.
    const values = [0, 0.00005, 0.0001, 0.00011, 0.001, 0.0015, 0.0049, 0.005, 0.3, 1, 1.5, 42];
    for (const [i, v] of values.entries()) {
      const pool = i % 3 === 0 ? 'a' : 'b';
      const outcome = i % 2 === 0 ? 'ok' : 'timeout';
      p.observe({ pool, outcome }, v);
      l.observe(v, pool, outcome);
    }
    expect(await lazy.metrics()).toBe(await prom.metrics());
    expect(await lazy.getMetricsAsJSON()).toEqual(await prom.getMetricsAsJSON());
    // Reset: both list nothing until the next observation.
    prom.resetMetrics();
    lazy.resetMetrics();
    expect(await lazy.metrics()).toBe(await prom.metrics());
    p.observe({ pool: 'a', outcome: 'ok' }, 0.002);
    l.series('a', 'ok').observe(0.002);
    expect(await lazy.metrics()).toBe(await prom.metrics());
  });

  it('counters and gauges expose the plain numbers when scraped', async () => {
    const { prom, lazy } = pair();
    const pc = new Counter({ name: 'c_total', help: 'c', labelNames: ['reason', 'variant', 'choice'], registers: [prom] });
    const lc = new LazyCounter(lazy, 'c_total', 'c', ['reason', 'variant', 'choice']);
    const pn = new Counter({ name: 'n_total', help: 'n', registers: [prom] });
    const ln = new LazyCounter(lazy, 'n_total', 'n');
    const pg = new Gauge({ name: 'g', help: 'g', labelNames: ['model'], registers: [prom] });
    const lg = new LazyGauge(lazy, 'g', 'g', ['model']);
    const pu = new Gauge({ name: 'u', help: 'u', registers: [prom] });
    const lu = new LazyGauge(lazy, 'u', 'u');
    for (let i = 0; i < 5; i++) {
      pc.inc({ reason: 'overrode', variant: 'cache', choice: 'capable' });
      lc.inc('overrode', 'cache', 'capable');
    }
    pc.inc({ reason: 'kept_no_trigger', variant: 'cache', choice: 'efficient' });
    lc.series('kept_no_trigger', 'cache', 'efficient').n++;
    pn.inc(3);
    ln.series().n += 3;
    pg.set({ model: 'm-8b' }, 7);
    lg.series('m-8b').n = 7;
    pg.set({ model: 'm-70b' }, 0);
    lg.series('m-70b').n = 0;
    pu.set(-2.5);
    lu.series().n = -2.5;
    expect(await lazy.metrics()).toBe(await prom.metrics());
    // Values keep counting after a scrape.
    pc.inc({ reason: 'overrode', variant: 'cache', choice: 'capable' });
    lc.inc('overrode', 'cache', 'capable');
    pg.set({ model: 'm-8b' }, 6);
    lg.series('m-8b').n = 6;
    pu.set(4);
    lu.series().n = 4;
    expect(await lazy.metrics()).toBe(await prom.metrics());
  });
});
