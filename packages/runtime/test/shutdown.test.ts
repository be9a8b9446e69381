import { afterEach, describe, expect, it } from 'vitest';
import { createShutdown, type Shutdown } from '../src/shutdown';
import { captureLogger } from './helpers';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const made: Shutdown[] = [];
function make(deadlineMs: number, signals: readonly NodeJS.Signals[] = []) {
  const cap = captureLogger();
  const exits: number[] = [];
  const sd = createShutdown({ deadlineMs, log: cap.log, exit: (c) => void exits.push(c), signals });
  made.push(sd);
  return { sd, exits, cap };
}
afterEach(() => {
  for (const sd of made.splice(0)) sd.dispose();
});

describe('shutdown', () => {
  it('runs phases in order intake → drain → flush → close and exits 0', async () => {
    const { sd, exits } = make(1000);
    const order: string[] = [];
    const states: string[] = [];
    // Registered out of order on purpose: phase, not registration, decides.
    sd.register('kafka', 'close', () => void order.push('close:kafka'));
    sd.register('producer', 'flush', async () => {
      states.push(sd.state);
      await sleep(5);
      order.push('flush:producer');
    });
    sd.register('handlers', 'drain', async () => {
      await sleep(10);
      order.push('drain:handlers');
    });
    sd.register('subscription', 'intake', () => {
      states.push(sd.state);
      order.push('intake:subscription');
    });
    sd.register('nats', 'close', () => {
      states.push(sd.state);
      order.push('close:nats');
    });
    expect(sd.state).toBe('running');
    const report = await sd.trigger('test');
    expect(order.slice(0, 3)).toEqual(['intake:subscription', 'drain:handlers', 'flush:producer']);
    expect(order.slice(3).sort()).toEqual(['close:kafka', 'close:nats']);
    expect(states).toEqual(['draining', 'flushing', 'flushing']);
    expect(sd.state).toBe('closed');
    expect(report.exitCode).toBe(0);
    expect(exits).toEqual([0]);
  });

  it('is idempotent: a second trigger returns the same run', async () => {
    const { sd, exits } = make(1000);
    let runs = 0;
    sd.register('once', 'close', () => void runs++);
    const [a, b] = await Promise.all([sd.trigger('one'), sd.trigger('two')]);
    expect(a).toBe(b);
    expect(runs).toBe(1);
    expect(exits).toEqual([0]);
  });

  it('stops at the deadline, reports what did not finish and exits 1', async () => {
    const { sd, exits, cap } = make(150);
    let flushed = false;
    sd.register('quick', 'intake', () => {});
    sd.register('hangs', 'drain', () => new Promise(() => {}));
    sd.register('finishes', 'drain', () => sleep(5));
    sd.register('flush', 'flush', () => void (flushed = true));
    const t0 = Date.now();
    const report = await sd.trigger('test');
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(140);
    expect(took).toBeLessThan(1000);
    expect(report.exitCode).toBe(1);
    expect(exits).toEqual([1]);
    expect(flushed).toBe(false);
    expect(report.unfinished).toEqual([
      { name: 'hangs', phase: 'drain', status: 'running' },
      { name: 'flush', phase: 'flush', status: 'not started' },
    ]);
    const line = cap.lines.find((l) => l['msg'] === 'shutdown deadline exceeded');
    expect(line?.['level']).toBe('error');
    expect(JSON.stringify(line?.['unfinished'])).toContain('hangs');
  });

  it('continues after a failing step but exits 1', async () => {
    const { sd, exits } = make(1000);
    let closed = false;
    sd.register('broken', 'flush', () => {
      throw new Error('kafka said no');
    });
    sd.register('close', 'close', () => void (closed = true));
    const report = await sd.trigger('test');
    expect(closed).toBe(true);
    expect(report.failed).toEqual([{ name: 'broken', phase: 'flush', error: 'kafka said no' }]);
    expect(exits).toEqual([1]);
  });

  it('exits 1 when triggered by a failure even if every step succeeds', async () => {
    const { sd, exits } = make(1000);
    await sd.trigger('start-up failed', 1);
    expect(exits).toEqual([1]);
  });

  it('late steps whose phase passed run at once', async () => {
    const { sd } = make(1000);
    let late = false;
    sd.register('slow-intake', 'intake', () => sleep(20));
    const p = sd.trigger('test');
    await sleep(5);
    sd.register('late-intake', 'intake', () => void (late = true));
    await p;
    expect(late).toBe(true);
  });

  it('a configured signal triggers shutdown; a second one exits 1 at once (SIGUSR2 stands in for SIGTERM)', async () => {
    const { sd, exits } = make(1000, ['SIGUSR2']);
    sd.register('slow', 'drain', () => sleep(50));
    process.emit('SIGUSR2', 'SIGUSR2');
    expect(sd.state).toBe('draining');
    process.emit('SIGUSR2', 'SIGUSR2');
    expect(exits).toEqual([1]);
    const report = await sd.trigger('again');
    expect(report.reason).toBe('signal SIGUSR2');
  });
});
