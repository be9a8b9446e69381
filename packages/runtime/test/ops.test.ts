import { afterEach, describe, expect, it } from 'vitest';
import { Counter, Registry } from 'prom-client';
import { createRegistry, startOpsServer, type HealthResult, type OpsServer } from '../src/ops';

const servers: OpsServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(health: () => HealthResult | Promise<HealthResult>, registry: Registry = createRegistry('test')) {
  const srv = await startOpsServer({ port: 0, registry, health });
  servers.push(srv);
  return { srv, base: `http://127.0.0.1:${srv.port}` };
}

describe('ops server', () => {
  it('binds 127.0.0.1 on an ephemeral port by default', async () => {
    const { srv } = await start(() => ({ ok: true }));
    expect(srv.host).toBe('127.0.0.1');
    expect(srv.port).toBeGreaterThan(0);
  });

  it('serves Prometheus metrics including Node defaults and service metrics', async () => {
    const registry = createRegistry('indexer');
    const c = new Counter({ name: 'vantage_test_events_total', help: 'test', registers: [registry] });
    c.inc(3);
    const { base } = await start(() => ({ ok: true }), registry);
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const body = await res.text();
    expect(body).toContain('vantage_test_events_total{service="indexer"} 3');
    expect(body).toContain('process_cpu_user_seconds_total');
    expect(body).toContain('nodejs_eventloop_lag_seconds');
  });

  it('answers /healthz 200 when healthy and 503 with details when not', async () => {
    let state: HealthResult = { ok: true, details: { nats: 'connected' } };
    const { base } = await start(() => state);
    let res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, details: { nats: 'connected' } });
    state = { ok: false, details: { nats: 'disconnected' } };
    res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ok: false, details: { nats: 'disconnected' } });
  });

  it('reports a throwing health check as 503, not 500', async () => {
    const { base } = await start(() => Promise.reject(new Error('check exploded')));
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ok: false, details: { error: 'check exploded' } });
  });

  it('404s unknown paths and 405s other methods', async () => {
    const { base } = await start(() => ({ ok: true }));
    expect((await fetch(`${base}/nope`)).status).toBe(404);
    expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(405);
  });

  it('close() returns even with an idle keep-alive connection open', async () => {
    const { srv, base } = await start(() => ({ ok: true }));
    await (await fetch(`${base}/healthz`, { keepalive: true })).text();
    servers.splice(servers.indexOf(srv), 1);
    await expect(srv.close()).resolves.toBeUndefined();
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });

  it('fails clearly when the port is taken', async () => {
    const { srv } = await start(() => ({ ok: true }));
    await expect(startOpsServer({ port: srv.port, registry: new Registry(), health: () => ({ ok: true }) })).rejects.toThrow(/EADDRINUSE/);
  });
});
