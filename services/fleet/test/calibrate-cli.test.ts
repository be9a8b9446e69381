// The calibrate tool's --plan-only output read through a pipe, as `calibrate --plan-only | jq` reads it:
// the whole plan arrives (the full preset's plan is several pipe buffers long).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../../../', import.meta.url));

describe('calibrate --plan-only', () => {
  it('writes the whole plan to a pipe before it exits', { timeout: 60_000 }, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'services/fleet/src/calibrate.ts', '--preset', 'full', '--plan-only'], { cwd: repo, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(65_536);
    const plan = JSON.parse(r.stdout) as { preset: string; totals: { runs: number } };
    expect(plan.preset).toBe('full');
    expect(plan.totals.runs).toBeGreaterThan(0);
  });
});
