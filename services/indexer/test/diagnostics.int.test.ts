/**
 * The observe handler's step timings reach a subscriber of its diagnostics channel in the live
 * service: the indexer runs with the benchmark's subscriber (bench/step-times.ts) preloaded, and
 * every window of answered requests, per reply encoding, becomes one line of its file. Without the
 * subscriber nothing is timed (the handler checks `hasSubscribers`).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { REPO_ROOT } from '@vantage/infra';
import { natsUrl, uniqueName } from '@vantage/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { observe, spawnIndexer, type IndexerChild } from './helpers';

const WINDOW = 10;

describe('indexer: observe step timings on a diagnostics channel', () => {
  let nc: NatsConnection;
  let child: IndexerChild;
  let dir = '';
  const pool = uniqueName('diag').replace(/-/g, '_');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vantage-steps-'));
    nc = await connect({ servers: natsUrl() });
    child = await spawnIndexer({
      natsUrl: natsUrl(),
      pools: [{ name: pool, blockSize: 16, namespace: pool }],
      nodeArgs: ['--import', 'tsx', '--import', join(REPO_ROOT, 'services/indexer/bench/step-times.ts')],
      env: { STEP_TIMES_FILE: join(dir, 'steps.txt'), STEP_TIMES_WINDOW: String(WINDOW) },
    });
  });
  afterAll(async () => {
    expect(await child?.stop()).toBe(0);
    await nc?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('writes one line per window of requests and encoding, each step a positive time', async () => {
    // `observe` alternates binary and JSON replies: 2 * WINDOW + 1 requests fill one window of each.
    for (let i = 0; i < 2 * WINDOW + 1; i++) await observe(nc, pool, BigUint64Array.of(1n, 2n, BigInt(i + 3)), 48);
    const lines = readFileSync(join(dir, 'steps.txt'), 'utf8').trim().split('\n');
    expect(lines.map((l) => l.split(' ')[0]).sort()).toEqual(['binary', 'json']);
    for (const l of lines) {
      const m = /^(binary|json) 10 requests, p50\/p99 µs: decode ([\d.]+)\/([\d.]+) \| answer ([\d.]+)\/([\d.]+) \| respond ([\d.]+)\/([\d.]+) \| total ([\d.]+)\/([\d.]+)$/.exec(l);
      expect(m, l).not.toBeNull();
      const [dec, , ans, , resp, , total] = m!.slice(2).map(Number);
      expect(ans!).toBeGreaterThan(0);
      // Each request's total is at least each of its steps, so each step's p50 is at most the total's.
      for (const step of [dec!, ans!, resp!]) expect(total!).toBeGreaterThanOrEqual(step);
    }
  });
});
