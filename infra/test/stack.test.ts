import { describe, expect, it } from 'vitest';
import { indexerTunables, stackServices } from '../src/stack';

describe('the indexer processes of the stack', () => {
  it('run with glibc.malloc.hugetlb=1 added to the GLIBC_TUNABLES they inherit, never twice', () => {
    expect(indexerTunables(undefined)).toBe('glibc.malloc.hugetlb=1');
    expect(indexerTunables('')).toBe('glibc.malloc.hugetlb=1');
    expect(indexerTunables('glibc.malloc.arena_max=2')).toBe('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1');
    expect(indexerTunables('glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2')).toBe('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1');
    const pool = { name: 'p', component: 'c', workers: 2, speed: 1 };
    const specs = stackServices({
      natsUrl: 'nats://127.0.0.1:1',
      kafkaBrokers: '127.0.0.1:2',
      paramsFile: '/dev/null',
      logDir: '/tmp',
      pools: { efficient: pool, capable: { ...pool, name: 'q' } },
      timeScale: 1,
      log: () => {},
    });
    const indexers = specs.filter((s) => s.name.startsWith('indexer-'));
    expect(indexers).toHaveLength(2);
    for (const s of indexers) expect(s.env?.GLIBC_TUNABLES?.split(':')).toContain('glibc.malloc.hugetlb=1');
    // The other services keep their inherited environment.
    for (const s of specs.filter((x) => !x.name.startsWith('indexer-'))) expect(s.env?.GLIBC_TUNABLES).toBeUndefined();
  });
});
