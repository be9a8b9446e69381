// Per-service operations endpoint: Prometheus `/metrics` and `/healthz`.
// Bound to 127.0.0.1 unless configured otherwise: metrics reveal topology and
// load, so exposing them is an explicit deployment decision.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Logger } from 'pino';
import { errorMessage } from './errors';

export interface HealthResult {
  ok: boolean;
  details?: Record<string, unknown>;
}

export type HealthCheck = () => HealthResult | Promise<HealthResult>;

/**
 * What `check` says. A check that throws is itself a failure to report, not a 500: orchestrators
 * act on 503 (take out of rotation), not on 500.
 */
export async function runHealthCheck(check: HealthCheck): Promise<HealthResult> {
  try {
    return await check();
  } catch (e) {
    return { ok: false, details: { error: errorMessage(e) } };
  }
}

interface OpsServerOptions {
  host?: string;
  /** 0 = ephemeral; the bound port is returned. */
  port: number;
  registry: Registry;
  health: HealthCheck;
  log?: Logger;
}

export type OpsServer = Awaited<ReturnType<typeof startOpsServer>>;

/** A registry with Node's default process metrics and a `service` label on every series. */
export function createRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

async function handle(req: IncomingMessage, res: ServerResponse, opts: OpsServerOptions): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  if (path === '/metrics') {
    const body = await opts.registry.metrics();
    res.writeHead(200, { 'content-type': opts.registry.contentType }).end(req.method === 'HEAD' ? undefined : body);
    return;
  }
  if (path === '/healthz') {
    const result = await runHealthCheck(opts.health);
    const body = JSON.stringify({ ok: result.ok, details: result.details ?? {} });
    res.writeHead(result.ok ? 200 : 503, { 'content-type': 'application/json' }).end(req.method === 'HEAD' ? undefined : body);
    return;
  }
  res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /metrics or /healthz\n');
}

export async function startOpsServer(opts: OpsServerOptions) {
  const host = opts.host ?? '127.0.0.1';
  const server = createServer((req, res) => {
    handle(req, res, opts).catch((e: unknown) => {
      opts.log?.error({ err: e, url: req.url }, 'ops endpoint failed');
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  // Scrapes are tiny; a stuck client must not hold a socket (or shutdown) forever.
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  opts.log?.info({ host, port }, 'ops server listening');

  return {
    host,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Keep-alive scrape connections would otherwise hold close() open.
        server.closeAllConnections();
      }),
  };
}
