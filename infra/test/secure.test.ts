// The permission set and the operators' example generated from it: the shipped files are
// current, and the set says what the issue asks of each role (read by a NATS subject matcher).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../src/paths';
import { exampleKafkaProperties, exampleNatsConfig, JOB_LAYOUT, natsServerConfig, rolePermissions, type RolePermissions } from '../src/secure';

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

const roles = rolePermissions(JOB_LAYOUT);
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
