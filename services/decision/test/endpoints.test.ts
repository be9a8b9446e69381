import { describe, expect, it } from 'vitest';
import { EndpointTable, checkEndpoint } from '../src/endpoints';

const open = { schemes: ['http', 'https', 'grpc'], allow: [] };

describe('worker endpoints', () => {
  it('accepts URLs with an allowed scheme, a host and a port', () => {
    expect(checkEndpoint('http://10.0.0.5:8000/v1', open)).toEqual({ ok: true, endpoint: 'http://10.0.0.5:8000/v1' });
    expect(checkEndpoint('https://worker-3.pool.svc', open).ok).toBe(true); // the scheme's default port
    expect(checkEndpoint('grpc://[::1]:50051', open).ok).toBe(true);
  });

  it('refuses anything else with a code and a reason', () => {
    const code = (e: string): string | undefined => {
      const c = checkEndpoint(e, open);
      return c.ok ? undefined : c.code;
    };
    expect(code('not a url')).toBe('endpoint_invalid');
    expect(code('file:///etc/passwd')).toBe('endpoint_scheme');
    expect(code('javascript:alert(1)')).toBe('endpoint_scheme');
    expect(code('http://user:secret@10.0.0.5:8000')).toBe('endpoint_invalid');
    expect(code('grpc://10.0.0.5')).toBe('endpoint_invalid'); // no port, and grpc has no default
    expect(code('http://10.0.0.5:0')).toBe('endpoint_invalid');
    expect(code('http://10.0.0.5:65536')).toBe('endpoint_invalid');
  });

  it('restricts hosts to the allow-list when one is configured', () => {
    const policy = { schemes: ['http', 'grpc'], allow: ['10.0.0.5', '*.pool.svc:8000', '[::1]:50051'] };
    expect(checkEndpoint('http://10.0.0.5:9999', policy).ok).toBe(true);
    expect(checkEndpoint('http://w1.pool.svc:8000', policy).ok).toBe(true);
    expect(checkEndpoint('http://W1.POOL.SVC:8000', policy).ok).toBe(true);
    expect(checkEndpoint('grpc://[::1]:50051', policy).ok).toBe(true);
    expect(checkEndpoint('http://w1.pool.svc:8001', policy)).toMatchObject({ ok: false, code: 'endpoint_not_allowed' });
    expect(checkEndpoint('http://pool.svc:8000', policy)).toMatchObject({ ok: false, code: 'endpoint_not_allowed' });
    expect(checkEndpoint('http://evilpool.svc:8000', policy)).toMatchObject({ ok: false, code: 'endpoint_not_allowed' });
    expect(checkEndpoint('http://10.0.0.6:9999', policy)).toMatchObject({ ok: false, code: 'endpoint_not_allowed' });
  });

  it('bounds the table per pool and drops an endpoint replaced by a refused one', () => {
    const t = new EndpointTable(open, 2);
    expect(t.offer('p', 1n, 'http://a:1').outcome).toBe('stored');
    expect(t.offer('p', 2n, 'http://b:1').outcome).toBe('stored');
    expect(t.offer('p', 3n, 'http://c:1').outcome).toBe('endpoints_per_pool');
    expect(t.offer('q', 3n, 'http://c:1').outcome).toBe('stored'); // per pool
    expect(t.offer('p', 1n, 'http://a:2').outcome).toBe('stored'); // a known worker may change its endpoint
    expect(t.get('p', 1n)).toBe('http://a:2');
    expect(t.offer('p', 1n, 'ftp://a:2').outcome).toBe('endpoint_scheme');
    expect(t.get('p', 1n)).toBeNull();
    expect(t.get('p', 2n)).toBe('http://b:1'); // the other worker's endpoint stays
  });
});
