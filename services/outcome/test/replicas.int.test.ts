// Two replicas, active–standby: both run against the same durable JetStream
// consumers with ONE shared transactional id; only the holder of the
// leadership lease (JetStream KV) consumes. The leader is killed with SIGKILL
// mid-stream and not restarted: its lease lapses, the standby takes over
// (fencing the dead leader's transactional id, reading its committed progress)
// and finishes, including the dead leader's unacked messages once JetStream
// redelivers them. Every request id must be in the outcomes topic exactly
// once and every decision once in the decisions topic, counted read_committed.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { eventually, ownKafka, ownNats } from '@vantage/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { child, decision, expectEachOnce, names, Publisher, readTopic, serviceEnv, waitExit } from './helpers';
import { parseProgress } from '../src/progress';

describe('two replicas, active–standby', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it('one leader writes; after kill -9 of the leader the standby takes over; every request once', { timeout: 300_000 }, async () => {
    const [nats, kafka] = await Promise.all([ownNats(), ownKafka()]);
    cleanups.push(nats.cleanup, kafka.cleanup);
    const n = names('replicas');
    const dir = mkdtempSync(join(tmpdir(), 'outcome-replicas-'));
    const base = {
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '2000',
      VANTAGE_OUTCOME_TERMINAL_GRACE_MS: '200',
      VANTAGE_OUTCOME_NATS_ACK_WAIT_MS: '10000',
      VANTAGE_OUTCOME_TRANSACTION_TIMEOUT_MS: '8000',
      VANTAGE_OUTCOME_NATS_FETCH_BATCH: '50',
      VANTAGE_LOG_LEVEL: 'info',
      // ONE transactional id shared by the replicas (and the lease key derived from it).
      VANTAGE_OUTCOME_TRANSACTIONAL_ID: `txn-${n.decisionsStream}`,
    };
    const replicas = ['a', 'b'].map((r) => {
      const logFile = join(dir, `service-${r}.log`);
      writeFileSync(logFile, '');
      return { name: r, logFile, proc: null as ChildProcess | null };
    });
    const logOf = (r: (typeof replicas)[number]): string => readFileSync(r.logFile, 'utf8');
    const becameLeader = (r: (typeof replicas)[number]): number => logOf(r).split('\n').filter((l) => l.includes('leader: lease acquired')).length;
    // Start one after the other: both ensure the same streams, consumers and topics.
    for (const r of replicas) {
      r.proc = child(serviceEnv(n, nats.url, kafka.brokers, base), r.logFile);
      const p = r.proc;
      cleanups.push(async () => {
        p.kill('SIGKILL');
        await waitExit(p);
      });
      await eventually(`replica ${r.name} started`, () => readFileSync(r.logFile, 'utf8').includes('"service started"'), 90_000, 100);
    }

    // The lease holder fences, reads the progress log back, then consumes.
    await eventually('a leader consuming', () => replicas.some((r) => logOf(r).includes('progress log read back; consuming')), 90_000, 100);

    const pub = await Publisher.open(nats.url, n);
    cleanups.push(() => pub.close());
    const N = 1800;
    const ds = Array.from({ length: N }, (_, i) => decision(i, 'rep'));
    let published = 0;
    // ~200 requests/s.
    const publishing = pub.paced(ds, 20, (k) => (published = k));

    // Exactly one leader; the other is standby and writes nothing.
    await eventually('half published', () => published >= N / 2, 120_000, 50);
    const leaders = replicas.filter((r) => becameLeader(r) > 0);
    expect(leaders).toHaveLength(1);
    const leader = leaders[0]!;
    const standby = replicas.find((r) => r !== leader)!;
    expect(logOf(standby)).toContain('standby: another replica holds the leadership lease');
    const progress = (await readTopic(kafka.brokers, n.topics.progress)).map((r) => parseProgress(r.value)).filter((p) => p !== null && Object.keys(p.done).length > 0);
    expect(progress.length).toBeGreaterThan(0);
    expect(new Set(progress.map((p) => p!.writer))).toEqual(new Set([`txn-${n.decisionsStream}`]));

    // Kill the leader mid-stream; the standby takes over and finishes, including the dead leader's unacked messages.
    const killedAt = Date.now();
    leader.proc!.kill('SIGKILL');
    await waitExit(leader.proc!);
    await eventually('standby took over', () => becameLeader(standby) > 0, 60_000, 100);
    process.stderr.write(`[replicas] ${standby.name} took over ${Date.now() - killedAt} ms after kill -9 of ${leader.name}\n`);
    await publishing;

    // The takeover must not split a join.
    await expectEachOnce(kafka.brokers, n, N, 12_000, 'replicas');

    standby.proc!.kill('SIGTERM');
    expect(await waitExit(standby.proc!)).toBe(0);
    expect(logOf(standby)).toContain('standby: leadership released');
  });
});
