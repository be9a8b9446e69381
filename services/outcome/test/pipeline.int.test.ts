// The outcome service in-process against the shared test brokers: joins,
// timeouts, dead letters, and independent decoding of what lands in Kafka.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run as cli } from '@vantage/cli';
import { decodeSingleObject, DECISION_REGISTRY, type OutcomeRecord } from '@vantage/records';
import { GatewayClient } from '@vantage/gateway-client';
import { eventually, kafkaBrokers, natsUrl, uniqueName } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decision, decodeOutcomes as outcomes, inProcess, names, Publisher, readTopic, REPO_ROOT, serviceEnv, type Names } from './helpers';

describe('outcome service (in-process, shared brokers)', () => {
  let n: Names;
  let pub: Publisher;
  let h: Awaited<ReturnType<typeof inProcess>>;
  const brokers = (): string => kafkaBrokers().join(',');

  beforeAll(async () => {
    n = names('pipe');
    h = await inProcess(serviceEnv(n, natsUrl(), brokers(), { VANTAGE_OUTCOME_JOIN_WINDOW_MS: '1500', VANTAGE_OUTCOME_MAX_MESSAGE_BYTES: '100000' }));
    pub = await Publisher.open(natsUrl(), n);
  });
  afterAll(async () => {
    await pub?.close();
    await h?.svc.stop('test done');
  });

  it('joins N decisions with their lifecycle events into N outcome records, fields right', async () => {
    const N = 200;
    const ds = Array.from({ length: N }, (_, i) => decision(i, 'happy'));
    // Lifecycle events first for some requests: arrival order across streams must not matter.
    await Promise.all(ds.map(async (d, i) => (i % 5 === 0 ? (await pub.event(d, 'first_token', 120), await pub.decision(d)) : pub.decision(d))));
    await Promise.all(ds.map((d, i) => (i % 5 === 0 ? Promise.resolve() : pub.event(d, 'first_token', 120))));
    await Promise.all(ds.map((d) => pub.event(d, 'done', 900, 'small', { usage: { inputTokens: 1000, outputTokens: 50, cachedTokens: 600 } })));

    let got: OutcomeRecord[] = [];
    await eventually('N outcomes in Kafka', async () => (got = outcomes(await readTopic(brokers(), n.topics.outcomes))).length >= N, 30_000, 250);
    expect(got).toHaveLength(N);
    expect(new Set(got.map((o) => o.requestId)).size).toBe(N);
    const o = got.find((x) => x.requestId === 'r-happy-3');
    expect(o).toMatchObject({
      status: 'completed',
      sessionId: 's-happy-3',
      ttftMs: 120,
      latencyMs: 900,
      inputTokens: 1000,
      outputTokens: 50,
      cachedTokens: 600,
      uncachedInputTokens: 400,
      routingOverheadUs: 1500,
      servedPool: 'small',
      join: { hasDecision: true, hasFirstToken: true, hasTerminal: true, hasUsage: true, eventCount: 2, closedBy: 'complete' },
    });
    expect(o?.decision?.recordId).toBe('d-happy-3');
    expect(o?.sources.map((s) => s.part).sort()).toEqual(['decision', 'done', 'first_token']);

    // Every decision once, as-is, keyed by session, with its source position.
    const decs = await readTopic(brokers(), n.topics.decisions);
    expect(decs).toHaveLength(N);
    const dd = decs.map((r) => decodeSingleObject(r.value ?? Buffer.alloc(0), DECISION_REGISTRY));
    expect(dd.every((x) => x.ok)).toBe(true);
    expect(decs.every((r) => r.headers['vantage-source-stream'] === n.decisionsStream && /^\d+$/.test(r.headers['vantage-source-seq'] ?? ''))).toBe(true);

    // Replay tool: JSON Lines and CSV of the same topic.
    const dir = mkdtempSync(join(tmpdir(), 'replay-'));
    const err: string[] = [];
    const io = { stdout: () => {}, stderr: (t: string) => void err.push(t), readStdin: () => Promise.resolve(new Uint8Array()), readFile: () => Promise.resolve(new Uint8Array()) };
    expect(await cli(['replay', '--brokers', brokers(), '--topic', n.topics.outcomes, '--from-beginning', '--format', 'jsonl', '--out', join(dir, 'o.jsonl')], io)).toBe(0);
    const rows = readFileSync(join(dir, 'o.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows).toHaveLength(N);
    expect(rows.find((r) => r['requestId'] === 'r-happy-3')).toMatchObject({ status: 'completed', ttftMs: 120, 'decision.recordId': 'd-happy-3' });
    expect(await cli(['replay', '--brokers', brokers(), '--topic', n.topics.decisions, '--format', 'csv', '--out', join(dir, 'd.csv')], io)).toBe(0);
    expect(readFileSync(join(dir, 'd.csv'), 'utf8').trim().split('\n')).toHaveLength(N + 1);
    expect(err.join('')).toMatch(/done, 200 records/);
  });

  it('writes a decision without lifecycle events as incomplete after the window', async () => {
    const d = decision(0, 'lonely');
    const t0 = Date.now();
    await pub.decision(d);
    let o: OutcomeRecord | undefined;
    await eventually('incomplete outcome', async () => (o = outcomes(await readTopic(brokers(), n.topics.outcomes)).find((x) => x.requestId === d.requestId)) !== undefined, 20_000, 250);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1500);
    expect(o).toMatchObject({ status: 'incomplete', ttftMs: null, join: { hasDecision: true, eventCount: 0, closedBy: 'deadline' } });
    // And a decision with a first token but no terminal event: timeout.
    const d2 = decision(1, 'lonely');
    await pub.decision(d2);
    await pub.event(d2, 'first_token', 80);
    await eventually('timeout outcome', async () => (o = outcomes(await readTopic(brokers(), n.topics.outcomes)).find((x) => x.requestId === d2.requestId)) !== undefined, 20_000, 250);
    expect(o).toMatchObject({ status: 'timeout', ttftMs: 80, join: { closedBy: 'deadline' } });
    const text = await h.svc.ctx.registry.metrics();
    expect(text).toMatch(/vantage_outcome_join_timeouts_total\{status="incomplete",service="outcome"\} [1-9]/);
  });

  it('joins the failed event exactly as GatewayClient.failed() publishes it (error object, workerId, dpRank)', async () => {
    // The gateway client publishes on core NATS to vantage.v1.lifecycle.{pool}
    // (the real broker); take its messages off that subject and put their
    // bytes, unchanged, on this test's lifecycle stream.
    // A unique request id: the subject is shared with anything else on the broker.
    const d = decision(0, uniqueName('gwfail'));
    const sent: { subject: string; data: Uint8Array }[] = [];
    const sub = pub.nc.subscribe('vantage.v1.lifecycle.small', {
      callback: (err, m) => {
        if (err === null && m.string().includes(d.requestId)) sent.push({ subject: m.subject, data: m.data });
      },
    });
    await pub.nc.flush();
    const pool = { model: 'm', pool: 'small', blockSize: 16 };
    const gw = new GatewayClient({ nc: pub.nc, pools: { efficient: pool, capable: { ...pool, model: 'm2', pool: 'large' } } });
    const p = { requestId: d.requestId, sessionId: d.sessionId, pool: 'small', workerId: 18_446_744_073_709_551_557n as WorkerId, dpRank: 2 };
    gw.firstToken(p, d.timestampMs + 95);
    gw.failed(p, { code: 'ENGINE_ERROR', message: 'worker exited mid-stream' }, d.timestampMs + 400);
    await eventually('gateway events on NATS', () => sent.length >= 2, 5_000, 10);
    sub.unsubscribe();
    expect(sent.map((x) => x.subject)).toEqual(['vantage.v1.lifecycle.small', 'vantage.v1.lifecycle.small']);
    expect(JSON.parse(Buffer.from(sent[1]!.data).toString('utf8'))).toMatchObject({ error: { code: 'ENGINE_ERROR', message: 'worker exited mid-stream' }, workerId: '18446744073709551557', dpRank: 2 });
    await pub.decision(d);
    for (const x of sent) await pub.pub(`${n.lifecyclePrefix}.small`, x.data);

    let o: OutcomeRecord | undefined;
    await eventually('failed outcome', async () => (o = outcomes(await readTopic(brokers(), n.topics.outcomes)).find((x) => x.requestId === d.requestId)) !== undefined, 20_000, 250);
    expect(o).toMatchObject({
      status: 'failed',
      error: 'ENGINE_ERROR: worker exited mid-stream',
      ttftMs: 95,
      endMs: d.timestampMs + 400,
      latencyMs: null,
      background: false,
      servedPool: 'small',
      join: { hasDecision: true, hasFirstToken: true, hasTerminal: true, eventCount: 2, closedBy: 'complete' },
    });
    const dlq = await readTopic(brokers(), n.topics.deadLetter);
    expect(dlq.filter((r) => (r.headers['vantage-dlq-detail'] ?? '').includes(d.requestId) || Buffer.from(r.value ?? []).toString('utf8').includes(d.requestId))).toEqual([]);
  });

  it('writes background (competing) traffic on its terminal event, without a decision and without waiting for the window', async () => {
    // No decision by design: the events carry background and the arrival time.
    const a = decision(0, 'bg');
    const b = decision(1, 'bg');
    const c = decision(2, 'bg');
    const req = { background: true, arrivalMs: a.timestampMs - 40 };
    await pub.event(a, 'first_token', 60, 'small', req);
    await pub.event(a, 'done', 700, 'small', { ...req, usage: { inputTokens: 2000, outputTokens: 30, cachedTokens: 1500 } });
    // Usage in a separate report within the grace; and a failure.
    await pub.event(b, 'first_token', 50, 'small', { background: true, arrivalMs: b.timestampMs });
    await pub.event(b, 'done', 500, 'small', { background: true, arrivalMs: b.timestampMs });
    await pub.event(b, 'usage', 501, 'small', { background: true, arrivalMs: b.timestampMs, usage: { inputTokens: 10, outputTokens: 3, cachedTokens: null } });
    await pub.event(c, 'failed', 90, 'small', { background: true, arrivalMs: c.timestampMs, error: { code: 'ENGINE_ERROR', message: null } });
    // A background-marked request whose decision does come: the decision stays authoritative.
    const e = decision(3, 'bg');
    await pub.decision(e);
    await pub.event(e, 'first_token', 30, 'small', { background: true, arrivalMs: e.timestampMs - 999 });
    await pub.event(e, 'done', 300, 'small', { background: true, arrivalMs: e.timestampMs - 999, usage: { inputTokens: 1, outputTokens: 1, cachedTokens: 0 } });

    let got: OutcomeRecord[] = [];
    const ids = [a, b, c, e].map((x) => x.requestId);
    await eventually('background outcomes', async () => (got = outcomes(await readTopic(brokers(), n.topics.outcomes)).filter((x) => ids.includes(x.requestId))).length >= 4, 20_000, 100);
    const by = new Map(got.map((x) => [x.requestId, x]));
    expect(got).toHaveLength(4);
    expect(by.get(a.requestId)).toMatchObject({ status: 'completed', background: true, decision: null, arrivalMs: a.timestampMs - 40, ttftMs: 100, latencyMs: 740, uncachedInputTokens: 500, join: { hasDecision: false, closedBy: 'complete' } });
    expect(by.get(b.requestId)).toMatchObject({ status: 'completed', background: true, ttftMs: 50, inputTokens: 10, cachedTokens: null, join: { hasUsage: true, closedBy: 'complete' } });
    expect(by.get(c.requestId)).toMatchObject({ status: 'failed', background: true, error: 'ENGINE_ERROR', ttftMs: null, join: { closedBy: 'complete' } });
    expect(by.get(e.requestId)).toMatchObject({ status: 'completed', background: false, arrivalMs: e.timestampMs, ttftMs: 30, join: { hasDecision: true, closedBy: 'complete' } });
    // Closed by their terminal event (plus the 200 ms usage grace at most), not by the 1.5 s window.
    for (const x of [a, b, c]) expect(by.get(x.requestId)?.join.joinLatencyMs ?? Infinity).toBeLessThan(1_500);
  });

  it('dead-letters malformed and hostile input with the reason; valid records around them are unaffected', async () => {
    const before = outcomes(await readTopic(brokers(), n.topics.outcomes)).length;
    const ok1 = decision(1, 'around');
    const ok2 = decision(2, 'around');
    await pub.request(ok1);
    const bad: [string, Uint8Array, string][] = [
      [n.decisionsSubject, Buffer.from('{"not":"avro"}'), 'RECORD_BAD_MARKER'],
      [n.decisionsSubject, Buffer.from([0xc3, 0x01, 1, 2, 3]), 'RECORD_TRUNCATED'],
      [n.decisionsSubject, Buffer.from([0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0]), 'RECORD_UNKNOWN_FINGERPRINT'],
      [n.decisionsSubject, Buffer.alloc(200_007, 0x41), 'OVERSIZED'],
      [`${n.lifecyclePrefix}.small`, Buffer.from('not json {'), 'LIFECYCLE_NOT_JSON'],
      [`${n.lifecyclePrefix}.small`, Buffer.from(JSON.stringify({ v: 2, requestId: 'x', sessionId: 's', pool: 'small', kind: 'done', atMs: 1 })), 'LIFECYCLE_UNKNOWN_VERSION'],
      [`${n.lifecyclePrefix}.small`, Buffer.from(JSON.stringify({ v: 1, requestId: 7, sessionId: 's', pool: 'small', kind: 'done', atMs: 1 })), 'LIFECYCLE_INVALID'],
      [`${n.lifecyclePrefix}.small`, Buffer.from(JSON.stringify({ v: 1, requestId: 'x', sessionId: 's', pool: 'small', kind: 'done', atMs: 'soon' })), 'LIFECYCLE_INVALID'],
      [`${n.lifecyclePrefix}.small`, Buffer.from(JSON.stringify({ v: 1, requestId: 'x', sessionId: 's', pool: 'other', kind: 'done', atMs: 1 })), 'LIFECYCLE_INVALID'],
      [`${n.lifecyclePrefix}.small`, Buffer.from([0xff, 0xfe, 0x00]), 'LIFECYCLE_NOT_JSON'],
    ];
    // A valid decision whose body is cut short: marker and fingerprint right.
    const { encodeSingleObject, DECISION_RECORD_CURRENT } = await import('@vantage/records');
    const full = encodeSingleObject(DECISION_RECORD_CURRENT, decision(9, 'cut'));
    bad.push([n.decisionsSubject, full.subarray(0, full.length - 5), 'RECORD_TRUNCATED']);
    for (const [subject, data] of bad) await pub.pub(subject, data);
    await pub.request(ok2);

    let dlq: Awaited<ReturnType<typeof readTopic>> = [];
    await eventually('dead letters', async () => (dlq = await readTopic(brokers(), n.topics.deadLetter)).length >= bad.length, 20_000, 250);
    expect(dlq).toHaveLength(bad.length);
    const reasons = dlq.map((r) => r.headers['vantage-dlq-reason']).sort();
    expect(reasons).toEqual(bad.map((b) => b[2]).sort());
    for (const r of dlq) {
      expect(r.headers['vantage-source-subject']).toMatch(/^t\./);
      expect(Number(r.headers['vantage-source-seq'])).toBeGreaterThan(0);
      expect(r.headers['vantage-dlq-detail']?.length).toBeGreaterThan(0);
    }
    const big = dlq.find((r) => r.headers['vantage-dlq-reason'] === 'OVERSIZED');
    expect(big?.headers['vantage-truncated']).toBe('true');
    expect(big?.value?.length).toBe(64 * 1024);
    // Both non-JSON lifecycle messages keep their original bytes (dead letters from several partitions come in any order).
    const notJson = dlq.filter((r) => r.headers['vantage-dlq-reason'] === 'LIFECYCLE_NOT_JSON').map((r) => Buffer.from(r.value ?? []).toString('hex')).sort();
    expect(notJson).toEqual([Buffer.from('not json {').toString('hex'), 'fffe00'].sort());

    await eventually('valid neighbours joined', async () => outcomes(await readTopic(brokers(), n.topics.outcomes)).length >= before + 2, 20_000, 250);
    const got = outcomes(await readTopic(brokers(), n.topics.outcomes)).filter((o) => o.requestId.startsWith('r-around-'));
    expect(got.map((o) => o.status)).toEqual(['completed', 'completed']);
    const text = await h.svc.ctx.registry.metrics();
    expect(text).toContain('vantage_outcome_dead_letters_total{reason="OVERSIZED",service="outcome"} 1');

    // The dead-letter topic through the replay tool: JSON with the reason.
    const out: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: () => {}, readStdin: () => Promise.resolve(new Uint8Array()), readFile: () => Promise.resolve(new Uint8Array()) };
    expect(await cli(['replay', '--brokers', brokers(), '--topic', n.topics.deadLetter], io)).toBe(0);
    const rows = out.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.map((r) => r['reason']).sort()).toEqual(reasons);
  });

  it('records read back from Kafka decode identically with fastavro', async () => {
    const records = await readTopic(brokers(), n.topics.outcomes);
    const sample = records.slice(0, 50);
    const py = execFileSync('bash', [join(REPO_ROOT, 'packages/records/scripts/ensure-fastavro.sh')], { encoding: 'utf8' }).trim().split('\n').pop() ?? '';
    const dir = mkdtempSync(join(tmpdir(), 'fastavro-'));
    const input = join(dir, 'in.b64');
    writeFileSync(input, sample.map((r) => (r.value ?? Buffer.alloc(0)).toString('base64')).join('\n') + '\n');
    const outText = execFileSync(py, [join(REPO_ROOT, 'packages/records/scripts/decode_with_fastavro.py'), '--schemas', join(REPO_ROOT, 'schemas/avro'), '--base64-lines'], {
      input: readFileSync(input),
      encoding: 'utf8',
    });
    const theirs = outText.trim().split('\n').map((l) => JSON.parse(l) as { ok: boolean; schema: string; value: unknown });
    expect(theirs).toHaveLength(sample.length);
    const ours = outcomes(sample).map((v) => JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString(10) : x))) as unknown);
    for (let i = 0; i < sample.length; i++) {
      expect(theirs[i]?.ok).toBe(true);
      expect(theirs[i]?.schema).toBe('outcome-record.v2.avsc');
      expect(theirs[i]?.value).toEqual(ours[i]);
    }
  });
});
