// Exactly once across failures: the service (a child process) is killed with
// SIGKILL and restarted, the Kafka broker is restarted, and nats-server is
// killed and restarted, all while requests are being published. Afterwards
// every request id is in the outcomes topic exactly once and every decision
// in the decisions topic exactly once (read_committed).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { eventually, ownKafka, ownNats } from '@vantage/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { child, decision, expectEachOnce, names, Publisher, serviceEnv, sleep, waitExit } from './helpers';

describe('exactly once across kill -9, Kafka restart and nats-server restart', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it('writes every request once', { timeout: 420_000 }, async () => {
    const [nats, kafka] = await Promise.all([ownNats(), ownKafka()]);
    cleanups.push(nats.cleanup, kafka.cleanup);
    const n = names('recovery');
    const dir = mkdtempSync(join(tmpdir(), 'outcome-recovery-'));
    const logFile = join(dir, 'service.log');
    writeFileSync(logFile, '');
    const env = serviceEnv(n, nats.url, kafka.brokers, {
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '2000',
      VANTAGE_OUTCOME_TERMINAL_GRACE_MS: '200',
      // Ownership (half of this, README rule 5) outlasts the Kafka outage below (10-15 s on a loaded
      // host), so messages held through it stay ours and join in full. With 10 s, ownership (5 s)
      // lapsed mid-outage: held messages were dropped and each stream's were redelivered an ack wait
      // after their own delivery, seconds apart, and a few joins then closed incomplete (13 of 2,400
      // in one CI run). Exactly once does not depend on it; the statuses below do.
      VANTAGE_OUTCOME_NATS_ACK_WAIT_MS: '40000',
      VANTAGE_OUTCOME_TRANSACTION_TIMEOUT_MS: '8000',
      VANTAGE_LOG_LEVEL: 'info',
    });
    let svc: ChildProcess = child(env, logFile);
    cleanups.push(async () => {
      svc.kill('SIGKILL');
      await waitExit(svc);
    });
    // Up = leading and consuming: a restarted instance first waits out its killed predecessor's
    // lease (TTL), then fences and reads the progress log; the failures below must hit a running pipeline.
    const serviceUp = (): Promise<void> =>
      eventually('service consuming', () => readFileSync(logFile, 'utf8').split('\n').filter((l) => l.includes('progress log read back; consuming')).length > starts, 90_000, 100);
    let starts = 0;
    await serviceUp();
    starts++;

    const pub = await Publisher.open(nats.url, n);
    cleanups.push(() => pub.close());
    const N = 2400;
    const ds = Array.from({ length: N }, (_, i) => decision(i, 'rec'));
    let published = 0;
    // ~150 requests/s, so each failure lands mid-stream.
    const publishing = pub.paced(ds, 15, (k) => (published = k));

    await eventually('some published', () => published >= 300, 60_000, 50);
    svc.kill('SIGKILL');
    await waitExit(svc);
    svc = child(env, logFile);
    await serviceUp();
    starts++;

    await eventually('more published', () => published >= 900, 60_000, 50);
    await kafka.stop();
    await sleep(1_000);
    await kafka.start();

    await eventually('more published', () => published >= 1500, 120_000, 50);
    await nats.kill9();
    await sleep(500);
    await nats.start();

    await publishing;
    // Messages held through an outage are naked or redelivered, never written half-joined.
    const dlq = await expectEachOnce(kafka.brokers, n, N, 42_000, 'recovery');
    // A dead-lettered straggler is a redelivery of an event already joined, each at most once.
    expect(new Set(dlq.map((r) => r.headers['vantage-source-stream'] + ':' + r.headers['vantage-source-seq'])).size).toBe(dlq.length);

    const log = readFileSync(logFile, 'utf8');
    // The failures really happened to the service, not only around it.
    expect(log).toMatch(/kafka transaction failed|progress sync failed/);
    expect(log).toMatch(/nats disconnected/);
    svc.kill('SIGTERM');
    expect(await waitExit(svc)).toBe(0);
  });
});
