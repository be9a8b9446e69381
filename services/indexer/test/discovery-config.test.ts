// The pool's `discovery` section picks its store at start-up; a section that cannot work is a
// configuration error (CONFIG_INVALID), never a pool silently without workers.
import { describe, expect, it } from 'vitest';
import { VantageError } from '@vantage/runtime';
import { discoveryStoreFor } from '../src/runner';
import type { PoolConfig } from '../src/config';

const pool = (discovery: Partial<PoolConfig['discovery']>): PoolConfig =>
  ({
    name: 'p',
    namespace: 'dynamo',
    component: 'backend',
    endpoint: 'generate',
    discovery: { backend: 'none', dir: '', endpoints: [], pollMs: 200, ...discovery },
  }) as unknown as PoolConfig;

describe('discoveryStoreFor', () => {
  it('none: no store; file: the file backend on its directory', async () => {
    expect(discoveryStoreFor(pool({}))).toBeNull();
    const s = discoveryStoreFor(pool({ backend: 'file', dir: '/nonexistent-dir' }));
    expect(s?.backend).toBe('file');
    await s?.close();
  });

  it('file without a directory, and etcd (not in this build), are refused as CONFIG_INVALID', () => {
    for (const d of [{ backend: 'file' as const }, { backend: 'etcd' as const, endpoints: ['http://127.0.0.1:2379'] }]) {
      let err: unknown;
      try {
        discoveryStoreFor(pool(d));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(VantageError);
      expect((err as VantageError).code).toBe('CONFIG_INVALID');
    }
  });
});
