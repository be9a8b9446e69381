// The outcome service and the replay tool against a real Kafka broker whose only client
// listener is SASL_SSL (TLS with a throwaway CA; SCRAM users created at format time, PLAIN
// users in the broker's JAAS configuration). One broker for the whole file.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { run, type CliIo } from '@vantage/cli';
import { randomSecret, type KafkaSecurity } from '@vantage/infra';
import { connectKafka, createLogger, VantageError, type KafkaSettings } from '@vantage/runtime';
import { eventually, natsUrl, ownKafka, secretFile, testTlsMaterial, uniqueName } from '@vantage/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decision, inProcess, names, Publisher, serviceEnv } from './helpers';

const tls = testTlsMaterial('kafka-test');
const rogue = testTlsMaterial('kafka-rogue');
const secrets = join(tls.dir, 'secrets');
const users = {
  outcome: { name: 'outcome', password: randomSecret(), mechanism: 'SCRAM-SHA-512' as const },
  reader256: { name: 'reader256', password: randomSecret(), mechanism: 'SCRAM-SHA-256' as const },
  replay: { name: 'replay', password: randomSecret() },
};
const security: KafkaSecurity = {
  tls,
  scramUsers: [users.outcome, users.reader256],
  plainUsers: [users.replay],
  brokerUser: { name: 'broker', password: randomSecret() },
};

const pwFile = (pw: string): string => secretFile(secrets, `${uniqueName('pw')}.txt`, `${pw}\n`);
const silent = createLogger({ service: 'test', instanceId: 't', level: 'silent' });

let kafka: Awaited<ReturnType<typeof ownKafka>>;

beforeAll(async () => {
  kafka = await ownKafka({ security });
}, 120_000);

afterAll(async () => {
  await kafka?.cleanup();
  rmSync(tls.dir, { recursive: true, force: true });
  rmSync(rogue.dir, { recursive: true, force: true });
});

function settings(over: Partial<KafkaSettings>): KafkaSettings {
  return { brokers: [kafka.brokers], clientId: 'sec-test', connectionTimeoutMs: 3000, requestTimeoutMs: 5000, retries: 1, ...over };
}

async function refused(cfg: KafkaSettings): Promise<VantageError> {
  const t0 = Date.now();
  const e = await connectKafka(cfg, silent).then(
    async (c) => {
      await c.close();
      throw new Error('expected the connect to be refused');
    },
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(VantageError);
  // Bounded: a couple of retries of a short timeout, never a silent loop.
  expect(Date.now() - t0).toBeLessThan(30_000);
  return e as VantageError;
}

describe('Kafka SASL_SSL', () => {
  it('SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over TLS connect', async () => {
    for (const [mechanism, u] of [
      ['scram-sha-512', users.outcome],
      ['scram-sha-256', users.reader256],
      ['plain', users.replay],
    ] as const) {
      const c = await connectKafka(settings({ ssl: { caFile: tls.caFile }, sasl: { mechanism, username: u.name, passwordFile: pwFile(u.password) } }), silent);
      expect((await c.admin.describeCluster()).brokers.length).toBe(1);
      await c.close();
    }
  });

  it('a wrong password fails with KAFKA_AUTH_FAILED (not retryable), without the password in the message', async () => {
    const e = await refused(settings({ ssl: { caFile: tls.caFile }, sasl: { mechanism: 'scram-sha-512', username: 'outcome', passwordFile: pwFile('wrong-kafka-pw') } }));
    expect(e.code).toBe('KAFKA_AUTH_FAILED');
    expect(e.retryable).toBe(false);
    expect(e.message).not.toContain('wrong-kafka-pw');
    const p = await refused(settings({ ssl: { caFile: tls.caFile }, sasl: { mechanism: 'plain', username: 'replay', passwordFile: pwFile('nope') } }));
    expect(p.code).toBe('KAFKA_AUTH_FAILED');
  });

  it('a broker certificate from another CA fails with KAFKA_TLS_FAILED', async () => {
    const e = await refused(settings({ ssl: { caFile: rogue.caFile }, sasl: { mechanism: 'scram-sha-512', username: 'outcome', passwordFile: pwFile(users.outcome.password) } }));
    expect(e.code).toBe('KAFKA_TLS_FAILED');
    expect(e.message).toMatch(/not trusted/);
  });

  it('the outcome service produces through SCRAM-SHA-512; the replay tool reads the records back through PLAIN', async () => {
    const n = names('sasl');
    const env = serviceEnv(n, natsUrl(), kafka.brokers, {
      VANTAGE_KAFKA_SSL_CA_FILE: tls.caFile,
      VANTAGE_KAFKA_SASL_MECHANISM: 'scram-sha-512',
      VANTAGE_KAFKA_SASL_USERNAME: users.outcome.name,
      VANTAGE_KAFKA_SASL_PASSWORD_FILE: pwFile(users.outcome.password),
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1000',
    });
    const { svc } = await inProcess(env);
    const pub = await Publisher.open(natsUrl(), n);
    const tag = uniqueName('s');
    const ds = Array.from({ length: 5 }, (_, i) => decision(i, tag));
    try {
      for (const d of ds) await pub.request(d);
      const replay = async (password: string): Promise<{ code: number; out: string; err: string }> => {
        let out = '';
        let err = '';
        const io: CliIo = { stdout: (t) => void (out += t), stderr: (t) => void (err += t), readStdin: () => Promise.resolve(new Uint8Array()), readFile: () => Promise.reject(new Error('no files')) };
        const saved = { ...process.env };
        Object.assign(process.env, {
          VANTAGE_KAFKA_SSL_CA_FILE: tls.caFile,
          VANTAGE_KAFKA_SASL_MECHANISM: 'plain',
          VANTAGE_KAFKA_SASL_USERNAME: users.replay.name,
          VANTAGE_KAFKA_SASL_PASSWORD_FILE: pwFile(password),
          VANTAGE_KAFKA_RETRIES: '1',
        });
        try {
          const code = await run(['replay', '--brokers', kafka.brokers, '--topic', n.topics.outcomes, '--from-beginning', '--format', 'jsonl'], io);
          return { code, out, err };
        } finally {
          for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
        }
      };
      let rows: Record<string, unknown>[] = [];
      let last: { code: number; out: string; err: string } | undefined;
      await eventually(
        'five outcome records readable through the replay tool',
        async () => {
          const r = await replay(users.replay.password);
          last = r;
          if (r.code !== 0) return false;
          rows = r.out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);
          return rows.length >= ds.length;
        },
        60_000,
        1000,
      ).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}; last replay: exit ${last?.code}, ${last?.err.slice(-500)}`);
      });
      // Exactly one outcome record per request, decoded by the replay tool from what the service wrote.
      expect(rows).toHaveLength(ds.length);
      expect(new Set(rows.map((r) => r['requestId']))).toEqual(new Set(ds.map((d) => d.requestId)));

      const bad = await replay('not-it');
      expect(bad.code).not.toBe(0);
      expect(bad.err).toContain('KAFKA_AUTH_FAILED');
      expect(bad.err).not.toContain('not-it');
    } finally {
      await pub.close();
      await svc.stop('test done');
    }
  });

  it('the outcome service with a wrong password fails start-up with KAFKA_AUTH_FAILED', async () => {
    const n = names('saslbad');
    const env = serviceEnv(n, natsUrl(), kafka.brokers, {
      VANTAGE_KAFKA_SSL_CA_FILE: tls.caFile,
      VANTAGE_KAFKA_SASL_MECHANISM: 'scram-sha-512',
      VANTAGE_KAFKA_SASL_USERNAME: users.outcome.name,
      VANTAGE_KAFKA_SASL_PASSWORD_FILE: pwFile('bad-outcome-pw'),
      VANTAGE_KAFKA_RETRIES: '1',
    });
    const e = await inProcess(env).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(VantageError);
    expect((e as VantageError).code).toBe('KAFKA_AUTH_FAILED');
  });
});
