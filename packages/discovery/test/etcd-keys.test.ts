// The mapping between Dynamo's logical discovery keys and etcd's keys, and the key range of a prefix (etcd3's Range.prefix).
import { describe, expect, it } from 'vitest';
import { Range } from 'etcd3';
import { logicalKeyOf } from '@vantage/discovery';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

// Keys as Dynamo 1.6.1's mocker wrote them to etcd (DYN_DISCOVERY_BACKEND=etcd), one per bucket.
const MEASURED = [
  'v1/mdc/dynamo/backend/generate/390da2333bc05404',
  'v1/instances/dynamo/backend/generate/390da2333bc05404',
  'v1/instances/dynamo/backend/worker_kv_query_source_1727e001e21b21/390da2333bc05404',
  'v1/event_channels/namespace/dynamo/component/backend/endpoint/generate/topic/kv-events/1727e001e21b21',
  'v1/event_channels/namespace/dynamo/component/backend/endpoint/generate/topic/forward-pass-metrics/1e117288680844',
  'v1/event_sources/namespace/dynamo/component/backend/endpoint/generate/topic/kv-events/1727e001e21b21',
];

describe('etcd key mapping', () => {
  it('maps the keys Dynamo 1.6.1 writes to the same logical keys', () => {
    for (const k of MEASURED) expect(logicalKeyOf(bytes(k))).toEqual({ ok: true, key: k });
  });

  it('strips a root', () => {
    const k = MEASURED[0]!;
    expect(logicalKeyOf(bytes(`tenant-a/${k}`), 'tenant-a/')).toEqual({ ok: true, key: k });
    const outside = logicalKeyOf(bytes(`tenant-b/${k}`), 'tenant-a/');
    expect(outside).toMatchObject({ ok: false, code: 'key_outside_root' });
    expect(!outside.ok && outside.reason).toContain('tenant-b/v1/mdc');
  });

  it('keeps keys in other scripts exact', () => {
    expect(logicalKeyOf(bytes('v1/mdc/名前/ü/1'))).toEqual({ ok: true, key: 'v1/mdc/名前/ü/1' });
  });

  it('refuses keys that are not UTF-8 with a reason that shows the bytes', () => {
    const bad = Uint8Array.of(...bytes('v1/mdc/'), 0xc3, 0x28); // a broken two-byte sequence
    const r = logicalKeyOf(bad);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.code).toBe('key_not_utf8');
    expect(r.reason).toContain('7631');
    expect(r.reason).toContain('c328');
    expect(r.reason).toContain('(9 bytes');
    // A long key is cut in the reason, not in what it says about the length.
    const long = Uint8Array.of(...bytes('v1/'.padEnd(300, 'x')), 0xff);
    const rl = logicalKeyOf(long);
    expect(!rl.ok && rl.reason.length).toBeLessThan(400);
    expect(!rl.ok && rl.reason).toContain('(301 bytes');
  });

  it('puts exactly the keys with the prefix inside the range', () => {
    const { start, end } = Range.prefix('v1/mdc/');
    const inRange = (k: string): boolean => {
      const b = Buffer.from(bytes(k));
      return Buffer.compare(b, Buffer.from(start)) >= 0 && Buffer.compare(b, Buffer.from(end)) < 0;
    };
    expect(inRange('v1/mdc/')).toBe(true);
    expect(inRange('v1/mdc/\u{10ffff}')).toBe(true);
    expect(inRange('v1/mdc')).toBe(false);
    expect(inRange('v1/mdc0')).toBe(false);
    expect(inRange('v1/mdcx/a')).toBe(false);
    expect(inRange('v1/instances/a')).toBe(false);
  });
});
