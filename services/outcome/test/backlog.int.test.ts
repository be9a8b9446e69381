// A backlog read after an outage: while the service was down, thousands of
// requests were published; on start it reads both streams in many small
// batches, and one stream's messages arrive well ahead of the other's. The
// joins must complete, not close `incomplete` by the wall clock while their
// lifecycle events still wait in the inbox or in JetStream.
import type { OutcomeRecord } from '@vantage/records';
import { eventually, kafkaBrokers, natsUrl } from '@vantage/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { countBy, decision, decodeOutcomes, inProcess, names, Publisher, readTopic, serviceEnv } from './helpers';

describe('outcome service reading a backlog', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  // Each case's services and connections go before the next case starts (its brokers' load would skew the next read).
  afterEach(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    cleanups.length = 0;
  });

  // Where the unread backlog waits while a join is held: in the inbox (it holds the whole backlog), or
  // mostly in JetStream (a small inbox; the read position then comes from the ack subject's pending count).
  it.each<{ where: string; over: Record<string, string> }>([
    { where: 'the inbox', over: {} },
    { where: 'JetStream', over: { VANTAGE_OUTCOME_MAX_INBOX: '300', VANTAGE_OUTCOME_NATS_FETCH_BATCH: '100' } },
  ])('completes every join although the streams are read far apart in time (backlog in $where)', { timeout: 240_000 }, async ({ where, over }) => {
    const brokers = kafkaBrokers().join(',');
    const n = names('backlog');
    const env = serviceEnv(n, natsUrl(), brokers, {
      // A window far shorter than reading the backlog takes: 9,000 messages in transactions of 100 records.
      VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1000',
      VANTAGE_OUTCOME_MAX_BATCH_RECORDS: '100',
      VANTAGE_OUTCOME_LINGER_MS: '0',
      // Ownership (half of this) bounds how long a join may be held for the other stream (README,
      // "Joins after an outage"): here at most 55.8 s past its deadline, several times what reading
      // this backlog takes on a busy 2-core host (about 15 s).
      VANTAGE_OUTCOME_NATS_ACK_WAIT_MS: '120000',
      ...over,
    });
    // First start creates the streams and the durable consumers, then the service goes away.
    const first = await inProcess(env);
    await first.svc.stop('outage');

    const pub = await Publisher.open(natsUrl(), n);
    cleanups.push(() => pub.close());
    const N = 3000;
    const ds = Array.from({ length: N }, (_, i) => decision(i, 'bl'));
    // Each request's decision, first token and done published together, as live traffic is: the
    // lifecycle stream holds twice as many messages, so reading it falls behind the decisions'. The
    // three go out back to back (in order on one connection) rather than each after the previous
    // one's ack: on a loaded host a request's awaited publishes could land more than a window apart,
    // and its join would then rightly close without them.
    const usage = { usage: { inputTokens: 1000, outputTokens: 50, cachedTokens: 600 } };
    const request = (d: (typeof ds)[number]) => Promise.all([pub.decision(d), pub.event(d, 'first_token', 120), pub.event(d, 'done', 900, 'small', usage)]);
    for (let i = 0; i < N; i += 100) await Promise.all(ds.slice(i, i + 100).map(request));

    const t0 = Date.now();
    const second = await inProcess(env);
    cleanups.push(() => second.svc.stop('test done'));
    let got: OutcomeRecord[] = [];
    await eventually('N outcomes', async () => (got = decodeOutcomes(await readTopic(brokers, n.topics.outcomes))).length >= N, 120_000, 500);
    const readMs = Date.now() - t0;
    const statuses = Object.fromEntries(countBy(got, (o) => o.status));
    process.stderr.write(`[backlog] (in ${where}) ${N} requests read in ${readMs} ms; statuses ${JSON.stringify(statuses)}\n`);
    // The backlog really took longer to read than the join window.
    expect(readMs).toBeGreaterThan(1000);
    expect(new Set(got.map((o) => o.requestId)).size).toBe(N);
    expect(statuses).toEqual({ completed: N });
    expect(await readTopic(brokers, n.topics.deadLetter)).toEqual([]);
  });
});
