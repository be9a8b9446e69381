// The pool's `discovery` section picks its store at start-up: none, the file backend on its
// directory, or etcd with its endpoints (and optional root, user, TLS files). A section that cannot
// work is a configuration error (CONFIG_INVALID), never a pool silently without workers.
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '@vantage/runtime';
import { indexerConfigSchema } from '../src/index';
import { discoveryStoreFor, type PoolConfig } from '@vantage/ingest';

function pool(discovery: Record<string, unknown>): PoolConfig {
  const cfg = loadConfig(indexerConfigSchema, { env: { VANTAGE_SERVICE: 'indexer', VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: 'p', namespace: 'dynamo', discovery }]) } });
  return cfg.indexer.pools[0]!;
}

describe('indexer discovery configuration', () => {
  it('none: no store; file: the file backend on its directory', async () => {
    expect(discoveryStoreFor(pool({}))).toBeNull();
    const s = discoveryStoreFor(pool({ backend: 'file', dir: '/nonexistent-dir' }));
    expect(s?.backend).toBe('file');
    await s?.close();
  });

  it('refuses file without a directory as CONFIG_INVALID', () => {
    let err: unknown;
    try {
      discoveryStoreFor(pool({ backend: 'file' }));
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe('CONFIG_INVALID');
  });

  it('builds an etcd store from the endpoints', async () => {
    const p = pool({ backend: 'etcd', endpoints: ['http://127.0.0.1:2379'] });
    expect(p.discovery).toMatchObject({ backend: 'etcd', endpoints: ['http://127.0.0.1:2379'], root: '', username: '', passwordFile: '' });
    const store = discoveryStoreFor(p);
    expect(store?.backend).toBe('etcd');
    await store?.close();
  });

  it('refuses etcd without endpoints, a user without a password, and a TLS file it cannot read', () => {
    expect(() => discoveryStoreFor(pool({ backend: 'etcd' }))).toThrow(/discovery\.backend "etcd" needs discovery\.endpoints/);
    expect(() => discoveryStoreFor(pool({ backend: 'etcd', endpoints: ['http://127.0.0.1:2379'], username: 'u' }))).toThrow(/username and discovery\.passwordFile go together/);
    expect(() => discoveryStoreFor(pool({ backend: 'etcd', endpoints: ['http://127.0.0.1:2379'], username: 'u', passwordFile: '/nonexistent/pw' }))).toThrow(/discovery\.passwordFile: cannot read the file it names \(ENOENT\)/);
    // The path of a file that may hold a key is not repeated in the error.
    expect(() => discoveryStoreFor(pool({ backend: 'etcd', endpoints: ['http://127.0.0.1:2379'], keyFile: '/nonexistent/key.pem' }))).toThrow(/^pool p: discovery\.keyFile: cannot read the file it names \(ENOENT\)$/);
    try {
      discoveryStoreFor(pool({ backend: 'etcd' }));
    } catch (e) {
      expect((e as { code?: string }).code).toBe('CONFIG_INVALID');
    }
  });

  it('reads TLS files and takes a root and credentials', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'disc-cfg-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n');
      writeFileSync(join(dir, 'pw'), 'secret\n', { mode: 0o600 });
      const p = pool({ backend: 'etcd', endpoints: ['https://127.0.0.1:2379'], root: 'tenant/', username: 'u', passwordFile: join(dir, 'pw'), caFile: join(dir, 'ca.pem') });
      const store = discoveryStoreFor(p);
      expect(store?.backend).toBe('etcd');
      await store?.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rejects an unknown backend at load time', () => {
    expect(() => pool({ backend: 'kubernetes' })).toThrow();
  });
});
