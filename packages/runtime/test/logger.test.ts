import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

describe('the default log destination', () => {
  it('is one per process, flushed at exit: every line of every logger comes out whole', () => {
    const N = 2000;
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(__dirname, 'fixtures/two-loggers-exit.ts'), String(N)], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { service: string; i?: number; listeners?: number; msg: string });
    for (const service of ['a', 'b']) {
      const is = lines.filter((l) => l.service === service && l.msg === 'line').map((l) => l.i);
      expect(is).toEqual(Array.from({ length: N }, (_, i) => i));
    }
    const done = lines[lines.length - 1]!;
    expect(done.msg).toBe('done');
    // The second logger shares the first one's destination and its exit listener.
    expect(done.listeners).toBe(0);
  });
});
