// The permission set and the operators' example generated from it: the shipped files are
// current, and the set says what the issue asks of each role (read by a NATS subject matcher).
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../src/paths';
import { exampleKafkaProperties, exampleNatsConfig, JOB_POOLS, natsServerConfig, rolePermissions, secureDeployment, type RolePermissions } from '../src/secure';
import { secureServiceEnv, stackServices } from '../src/stack';

/** NATS subject matching: `*` one token, `>` one or more trailing tokens. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}
const may = (r: RolePermissions, op: 'publish' | 'subscribe', subject: string): boolean => r[op].allow.some((a) => matches(a, subject));

const roles = rolePermissions(JOB_POOLS);
const role = (name: string): RolePermissions => {
  const r = roles.find((x) => x.role === name);
  if (r === undefined) throw new Error(`no role ${name}`);
  return r;
};

describe('least-privilege NATS permissions', () => {
  it('only the decision service may publish bookings and decision records', () => {
    for (const r of roles) {
      const expected = r.role === 'decision' || r.role === 'admin';
      expect(may(r, 'publish', 'vantage.v1.bookings.efficient'), r.role).toBe(expected);
      expect(may(r, 'publish', 'vantage.v1.decisions'), r.role).toBe(expected);
    }
  });

  it('a worker publishes only its own pool\'s KV events, load and registrations', () => {
    const w = role('worker-efficient');
    expect(may(w, 'publish', 'namespace.dynamo.component.efficient.kv-events')).toBe(true);
    expect(may(w, 'publish', 'namespace.dynamo.kv_metrics')).toBe(true);
    expect(may(w, 'publish', 'vantage.v1.workers.efficient')).toBe(true);
    expect(may(w, 'publish', 'namespace.dynamo.component.capable.kv-events')).toBe(false);
    expect(may(w, 'publish', 'vantage.v1.workers.capable')).toBe(false);
    expect(may(w, 'publish', 'vantage.v1.lifecycle.efficient')).toBe(false);
    expect(may(w, 'publish', 'vantage.v1.route')).toBe(false);
  });

  it('a gateway may request route and publish lifecycle, nothing else of ours', () => {
    const g = role('gateway');
    expect(may(g, 'publish', 'vantage.v1.route')).toBe(true);
    expect(may(g, 'publish', 'vantage.v1.lifecycle.capable')).toBe(true);
    expect(may(g, 'publish', 'vantage.v1.observe.efficient')).toBe(false);
    expect(may(g, 'publish', 'vantage.v1.workers.efficient')).toBe(false);
    expect(may(g, 'subscribe', 'vantage.v1.route')).toBe(false);
  });

  it('only the outcome service (and admin) may write the lease key', () => {
    for (const r of roles) expect(may(r, 'publish', '$KV.vantage_outcome_leader.outcome-txn'), r.role).toBe(r.role === 'outcome' || r.role === 'admin');
  });

  it('request-reply servers may answer (allow_responses), others may not', () => {
    expect(role('decision').allowResponses).toBe(true);
    expect(role('indexer-efficient').allowResponses).toBe(true);
    expect(role('gateway').allowResponses).toBe(false);
    expect(natsServerConfig({ port: 1, monitorPort: 2, storeDir: '/x', auth: { kind: 'users', users: [{ name: 'decision', auth: { kind: 'password', password: 'p' }, permissions: role('decision') }] } })).toContain('allow_responses: true');
  });
});

describe('operators\' example (infra/secure)', () => {
  it('is what the permission set generates (npm run secure:example rewrites it)', () => {
    expect(readFileSync(join(REPO_ROOT, 'infra', 'secure', 'nats-server.conf'), 'utf8')).toBe(exampleNatsConfig());
    expect(readFileSync(join(REPO_ROOT, 'infra', 'secure', 'kafka-sasl-ssl.properties'), 'utf8')).toBe(exampleKafkaProperties());
  });

  it('reads every password from the environment, none written in the file', () => {
    const text = exampleNatsConfig();
    for (const r of roles) expect(text).toContain(`user: "${r.role}", password: $VANTAGE_PW_`);
    expect(text).not.toMatch(/password: "/);
  });
});

describe('secured deployment (infra up --secure)', () => {
  it('makes certificates and secret files once (0600) and gives every stack service its own role', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vantage-secure-'));
    try {
      const a = secureDeployment(dir, JOB_POOLS);
      const b = secureDeployment(dir, JOB_POOLS);
      // Kept across runs: Kafka's SCRAM users exist only from the first format.
      expect(b.kafka.scramUsers).toEqual(a.kafka.scramUsers);
      expect(readFileSync(b.tls.caFile, 'utf8')).toBe(readFileSync(a.tls.caFile, 'utf8'));
      const pwFile = a.natsEnv('decision')['VANTAGE_NATS_PASSWORD_FILE']!;
      expect(statSync(pwFile).mode & 0o777).toBe(0o600);
      expect(statSync(a.tls.serverKeyFile).mode & 0o777).toBe(0o600);
      const services = stackServices({ natsUrl: 'x', kafkaBrokers: 'y', paramsFile: 'p', logDir: dir, timeScale: 1, log: () => {}, pools: { efficient: { name: 'efficient', component: 'efficient', speed: 1, workers: 1 }, capable: { name: 'capable', component: 'capable', speed: 1, workers: 1 } } });
      const users = services.map((s) => secureServiceEnv(a, s.name)['VANTAGE_NATS_USER']);
      expect(users).toEqual(['indexer-efficient', 'indexer-capable', 'decision', 'outcome', 'fleet']);
      expect(secureServiceEnv(a, 'outcome')['VANTAGE_KAFKA_SASL_USERNAME']).toBe('outcome');
      expect(secureServiceEnv(a, 'decision')['VANTAGE_KAFKA_SASL_USERNAME']).toBeUndefined();
      // The generated server configuration holds each role's password and requires client certificates.
      const conf = natsServerConfig({ port: 1, monitorPort: 2, storeDir: '/s', ...a.nats });
      expect(conf).toContain('verify: true');
      expect(conf).toContain(readFileSync(pwFile, 'utf8').trim());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
