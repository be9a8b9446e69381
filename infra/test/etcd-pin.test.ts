// The etcd version infra stamps its build with is the one infra/etcd/go.mod makes it build.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ETCD_MODULE_DIR, ETCD_VERSION } from '../src/install';

describe('etcd pin', () => {
  it('ETCD_VERSION equals the go.etcd.io/etcd/server/v3 version go.mod requires, and go.sum holds it', () => {
    const mod = readFileSync(join(ETCD_MODULE_DIR, 'go.mod'), 'utf8');
    expect(mod).toMatch(/^tool go\.etcd\.io\/etcd\/server\/v3$/m);
    const required = /^\s*go\.etcd\.io\/etcd\/server\/v3 (v\S+)/m.exec(mod)?.[1];
    expect(required).toBe(ETCD_VERSION);
    const sum = readFileSync(join(ETCD_MODULE_DIR, 'go.sum'), 'utf8');
    expect(sum).toContain(`go.etcd.io/etcd/server/v3 ${ETCD_VERSION} h1:`);
  });
});
