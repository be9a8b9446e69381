/**
 * Worker endpoints from registrations, handed to the gateway in route replies: a trust boundary
 * (README, "Worker endpoints": which URLs are kept, the allow-list, the per-pool bound).
 */

interface EndpointPolicy {
  /** Allowed URL schemes, without the colon (`http`, `https`, `grpc`, ...). */
  readonly schemes: readonly string[];
  /**
   * Allowed hosts; empty allows any. Entries: `host`, `host:port`, `*.domain` (any host under the
   * domain) or `*.domain:port`. Host names compare case-insensitively; IPv6 hosts in brackets.
   */
  readonly allow: readonly string[];
}

type EndpointCheck = { ok: true; endpoint: string } | { ok: false; code: 'endpoint_invalid' | 'endpoint_scheme' | 'endpoint_not_allowed'; reason: string };

const DEFAULT_PORTS: Record<string, string> = { http: '80', https: '443', ws: '80', wss: '443' };

/** Checks an endpoint against the policy; the accepted form is the URL as written. */
export function checkEndpoint(raw: string, policy: EndpointPolicy): EndpointCheck {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return { ok: false, code: 'endpoint_invalid', reason: 'not a URL' };
  }
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (!policy.schemes.includes(scheme)) return { ok: false, code: 'endpoint_scheme', reason: `scheme ${JSON.stringify(scheme.slice(0, 32))} is not allowed` };
  if (u.username !== '' || u.password !== '') return { ok: false, code: 'endpoint_invalid', reason: 'user-info is not allowed in an endpoint' };
  const host = u.hostname.toLowerCase();
  if (host === '') return { ok: false, code: 'endpoint_invalid', reason: 'no host' };
  // URL() already refuses ports past 65535; port 0 and a missing port without a scheme default are refused here.
  const port = u.port !== '' ? u.port : DEFAULT_PORTS[scheme];
  if (port === undefined || port === '0') return { ok: false, code: 'endpoint_invalid', reason: `no usable port (got ${JSON.stringify(u.port)})` };
  if (policy.allow.length > 0 && !policy.allow.some((a) => allowed(a.toLowerCase(), host, port))) {
    return { ok: false, code: 'endpoint_not_allowed', reason: `host ${host.slice(0, 128)}:${port} is not on the allow-list` };
  }
  return { ok: true, endpoint: raw };
}

function allowed(entry: string, host: string, port: string): boolean {
  let h = entry;
  let p: string | undefined;
  // `host:port`, but not the colons of an unbracketed IPv6 address.
  const m = /^(.*):(\d{1,5})$/.exec(entry);
  if (m !== null && (!m[1]!.includes(':') || m[1]!.startsWith('['))) {
    h = m[1]!;
    p = m[2];
  }
  if (p !== undefined && p !== port) return false;
  if (h.startsWith('*.')) return host.length > h.length - 1 && host.endsWith(h.slice(1));
  return host === h;
}

/** Outcome of offering a registration's endpoint to the table. */
type EndpointOffer = 'stored' | 'unchanged' | 'removed' | Extract<EndpointCheck, { ok: false }>['code'] | 'endpoints_per_pool';

/** Endpoints per pool, bounded. */
export class EndpointTable {
  readonly #pools = new Map<string, Map<bigint, string>>();

  constructor(
    private readonly policy: EndpointPolicy,
    private readonly maxPerPool: number,
  ) {}

  get(pool: string, workerId: bigint): string | null {
    return this.#pools.get(pool)?.get(workerId) ?? null;
  }

  /** A registration or heartbeat with an endpoint (null: none advertised, the old one is dropped). */
  offer(pool: string, workerId: bigint, endpoint: string | null): { outcome: EndpointOffer; reason?: string } {
    let t = this.#pools.get(pool);
    if (t === undefined) this.#pools.set(pool, (t = new Map()));
    if (endpoint === null) return { outcome: t.delete(workerId) ? 'removed' : 'unchanged' };
    const c = checkEndpoint(endpoint, this.policy);
    if (!c.ok) {
      // A worker that now advertises a refused endpoint must not keep routing to its old one either.
      t.delete(workerId);
      return { outcome: c.code, reason: c.reason };
    }
    if (!t.has(workerId) && t.size >= this.maxPerPool) return { outcome: 'endpoints_per_pool', reason: `${t.size} endpoints held for pool ${pool}` };
    if (t.get(workerId) === c.endpoint) return { outcome: 'unchanged' };
    t.set(workerId, c.endpoint);
    return { outcome: 'stored' };
  }

  remove(pool: string, workerId: bigint): void {
    this.#pools.get(pool)?.delete(workerId);
  }
}
