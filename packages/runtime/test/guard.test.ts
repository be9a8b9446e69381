import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { OutageClock, RateLimitedLog } from '../src/guard';

function capture(): { log: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const dest = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'info' }, dest), lines };
}

describe('RateLimitedLog', () => {
  it('logs the first line of a key at once, then one per interval with the count left out', () => {
    let now = 1_000;
    const { log, lines } = capture();
    const rl = new RateLimitedLog(log, { intervalMs: 100, now: () => now });
    expect(rl.warn('a', { n: 1 }, 'refused')).toBe(true);
    for (let i = 0; i < 5; i++) expect(rl.warn('a', { n: 2 + i }, 'refused')).toBe(false);
    // Another key is not held back by the first.
    expect(rl.warn('b', { n: 0 }, 'refused')).toBe(true);
    now += 100;
    expect(rl.warn('a', { n: 9 }, 'refused')).toBe(true);
    expect(lines.map((l) => [l['n'], l['suppressed']])).toEqual([
      [1, 0],
      [0, 0],
      [9, 5],
    ]);
  });

  it('bounds the keys it remembers', () => {
    const { log, lines } = capture();
    const rl = new RateLimitedLog(log, { intervalMs: 1e9, maxKeys: 2, now: () => 0 });
    rl.warn('a', {}, 'x');
    rl.warn('b', {}, 'x');
    rl.warn('c', {}, 'x'); // forgets a
    expect(rl.warn('a', {}, 'x')).toBe(true);
    expect(rl.warn('c', {}, 'x')).toBe(false);
    expect(lines.length).toBe(4);
  });
});

describe('OutageClock', () => {
  it('turns unhealthy only after the threshold, with the reason, and healthy at once on recovery', () => {
    let now = 0;
    const c = new OutageClock(1_000, () => now);
    expect(c.health().ok).toBe(true);
    c.fail('kafka down');
    now = 999;
    expect(c.health().ok).toBe(true);
    expect(c.failing).toBe(true);
    now = 1_000;
    c.fail('kafka still down'); // a continuing outage keeps its start
    const h = c.health({ extra: 1 });
    expect(h.ok).toBe(false);
    expect(h.details).toEqual({ extra: 1, reason: 'kafka still down', failingForMs: 1_000, thresholdMs: 1_000 });
    c.ok();
    expect(c.health().ok).toBe(true);
    expect(c.failing).toBe(false);
  });
});
