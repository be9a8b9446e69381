/**
 * What a test process starts ends with it: an attached broker (its process group) and a process
 * registered with `endAtExit` are killed when the Node process that started them exits without
 * stopping them; one forgotten with `forgetAtExit` is left alone.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { INFRA_DIR, REPO_ROOT, waitFor } from '@vantage/infra';
import { uniqueName } from '@vantage/testkit';
import { describe, expect, it } from 'vitest';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('processes that end with the Node process that started them', () => {
  it('kills an attached broker and a registered process at exit, not a forgotten one', async () => {
    const dir = join(INFRA_DIR, 'test', uniqueName('exit-early'));
    mkdirSync(dir, { recursive: true });
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test/infra/fixtures/exit-early.ts'), dir], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const pids = JSON.parse(r.stdout.trim().split('\n').pop()!) as { nats: number; etcd: number; ended: number; kept: number };
    try {
      expect(pids.nats).toBeGreaterThan(0);
      expect(pids.etcd).toBeGreaterThan(0);
      await waitFor('the attached nats-server, etcd and the registered process gone', async () => !alive(pids.nats) && !alive(pids.etcd) && !alive(pids.ended), 10_000);
      expect(alive(pids.kept)).toBe(true);
    } finally {
      for (const p of [pids.nats, pids.etcd, pids.ended, pids.kept]) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
