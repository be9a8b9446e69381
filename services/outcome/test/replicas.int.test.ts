// Two replicas sharing the work: both consume the same durable JetStream
// consumers (one queue of work) with their own transactional ids. Both must
// write (the progress log names each transaction's writer), and every request
// id must be in the outcomes topic exactly once, every decision once in the
// decisions topic. Then one replica is killed with SIGKILL mid-stream and not
// restarted: the other gets its unacked messages after ack_wait and, through
// the progress log, neither loses nor repeats any of them.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { decodeSingleObject, DECISION_REGISTRY, OUTCOME_REGISTRY } from '@vantage/records';
import { eventually, ownKafka, ownNats } from '@vantage/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { child, decision, names, Publisher, readTopic, serviceEnv, waitExit } from './helpers';
import { parseProgress } from '../src/progress';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function countBy<T>(xs: T[], key: (x: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of xs) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
  return m;
}

// KNOWN LIMITATION, recorded as an expected failure (`it.fails`): a request's
// decision and lifecycle events are delivered to whichever replica pulls them,
// so with two replicas a join is often split; each half closes at the join
// window and both replicas write an `incomplete` outcome for the same request
// id (duplicates in the outcomes topic). Until the work is partitioned by
// request id (README, "Replicas"), run one replica per stream pair. Turn this
// back into `it` when that lands: the assertions are the requirement.
describe('two replicas share the work', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it.fails('both write, every request once, also after one is killed', { timeout: 300_000 }, async () => {
    const [nats, kafka] = await Promise.all([ownNats(), ownKafka()]);
    cleanups.push(nats.cleanup, kafka.cleanup);
    const n = names('replicas');
    const dir = mkdtempSync(join(tmpdir(), 'outcome-replicas-'));
    const base = {
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '2000',
      VANTAGE_OUTCOME_TERMINAL_GRACE_MS: '200',
      VANTAGE_OUTCOME_NATS_ACK_WAIT_MS: '10000',
      VANTAGE_OUTCOME_TRANSACTION_TIMEOUT_MS: '8000',
      // Small pulls, so both replicas get a share of a modest stream.
      VANTAGE_OUTCOME_NATS_FETCH_BATCH: '50',
      VANTAGE_LOG_LEVEL: 'info',
    };
    const replicas = ['a', 'b'].map((r) => {
      const logFile = join(dir, `service-${r}.log`);
      writeFileSync(logFile, '');
      const env = serviceEnv(n, nats.url, kafka.brokers, { ...base, VANTAGE_OUTCOME_TRANSACTIONAL_ID: `txn-${n.decisionsStream}-${r}` });
      return { name: r, writer: env['VANTAGE_OUTCOME_TRANSACTIONAL_ID'] as string, logFile, proc: null as ChildProcess | null };
    });
    // Start one after the other: both ensure the same streams, consumers and topics.
    for (const r of replicas) {
      r.proc = child(serviceEnv(n, nats.url, kafka.brokers, { ...base, VANTAGE_OUTCOME_TRANSACTIONAL_ID: r.writer }), r.logFile);
      const p = r.proc;
      cleanups.push(async () => {
        p.kill('SIGKILL');
        await waitExit(p);
      });
      await eventually(`replica ${r.name} started`, () => readFileSync(r.logFile, 'utf8').includes('"service started"'), 90_000, 100);
    }

    const pub = await Publisher.open(nats.url, n);
    cleanups.push(() => pub.close());
    const N = 1800;
    const ds = Array.from({ length: N }, (_, i) => decision(i, 'rep'));
    let published = 0;
    const publishing = (async () => {
      // ~200 requests/s.
      for (let i = 0; i < N; i += 20) {
        const t = Date.now();
        await Promise.all(ds.slice(i, i + 20).map((d) => pub.request(d)));
        published = Math.min(N, i + 20);
        await sleep(Math.max(0, 100 - (Date.now() - t)));
      }
    })();

    // Both replicas are committing work: each writer appears in the progress log with sources.
    const writers = async (): Promise<Map<string, number>> => {
      const recs = (await readTopic(kafka.brokers, n.topics.progress)).map((r) => parseProgress(r.value));
      const withWork = recs.filter((p) => p !== null && Object.keys(p.done).length + Object.keys(p.decisions).length > 0);
      return countBy(withWork, (p) => p!.writer);
    };
    await eventually('half published', () => published >= N / 2, 120_000, 50);
    const shared = await writers();
    process.stderr.write(`[replicas] transactions per writer while both ran: ${JSON.stringify(Object.fromEntries(shared))}\n`);
    for (const r of replicas) expect(shared.get(r.writer) ?? 0).toBeGreaterThan(0);

    // Kill replica b mid-stream; a alone finishes, including b's unacked messages.
    const b = replicas[1]!;
    b.proc!.kill('SIGKILL');
    await waitExit(b.proc!);
    await publishing;

    let outcomes: { requestId: string; status: string }[] = [];
    const decodeAll = (rs: Awaited<ReturnType<typeof readTopic>>): { requestId: string; status: string }[] =>
      rs.map((r) => {
        const d = decodeSingleObject(r.value ?? Buffer.alloc(0), OUTCOME_REGISTRY);
        if (!d.ok) throw new Error(d.reason);
        return d.value;
      });
    await eventually('all outcomes', async () => (outcomes = decodeAll(await readTopic(kafka.brokers, n.topics.outcomes))).length >= N, 180_000, 1_000);
    // Let late redeliveries (ack_wait) play out, then count again.
    await sleep(12_000);
    outcomes = decodeAll(await readTopic(kafka.brokers, n.topics.outcomes));
    const perRequest = countBy(outcomes, (o) => o.requestId);
    expect([...perRequest].filter(([, c]) => c > 1)).toEqual([]);
    expect(perRequest.size).toBe(N);
    const statuses = countBy(outcomes, (o) => o.status);
    process.stderr.write(`[replicas] outcome statuses: ${JSON.stringify(Object.fromEntries(statuses))}\n`);
    expect([...statuses.keys()].every((s) => ['completed', 'incomplete', 'timeout'].includes(s))).toBe(true);

    const decisions = (await readTopic(kafka.brokers, n.topics.decisions)).map((r) => {
      const d = decodeSingleObject(r.value ?? Buffer.alloc(0), DECISION_REGISTRY);
      if (!d.ok) throw new Error(d.reason);
      return d.value.recordId;
    });
    const perDecision = countBy(decisions, (x) => x);
    expect([...perDecision].filter(([, c]) => c > 1)).toEqual([]);
    expect(perDecision.size).toBe(N);
    const dlq = await readTopic(kafka.brokers, n.topics.deadLetter);
    expect(dlq.filter((r) => r.headers['vantage-dlq-reason'] !== 'JOIN_LATE')).toEqual([]);

    const a = replicas[0]!;
    a.proc!.kill('SIGTERM');
    expect(await waitExit(a.proc!)).toBe(0);
  });
});
