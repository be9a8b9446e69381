/**
 * The route and lifecycle contracts are language-neutral: the Python gateway client in
 * `examples/python-gateway/` (public `nats-py` only) routes a request through the real services
 * and reports its lifecycle, and the outcome record lands in Kafka.
 *
 * The services are the main job's own stack as child processes (infra's `Stack`: one indexer per
 * pool, the decision service, the outcome service, the simulated fleet) on a private nats-server
 * (they use the fixed `vantage.v1.*` subjects) and the shared Kafka with topics unique to this
 * test, as `test/e2e/study.int.test.ts` runs them. Every message the Python client puts on the
 * wire is captured from NATS and validated against `schemas/protocol/*.json`; the reply it read is
 * validated against the reply schema.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as vantageCli } from '@vantage/cli';
import { GatewayClient } from '@vantage/gateway-client';
import { calibrationParameterSet } from '@vantage/evaluation';
import { REPO_ROOT, Stack, writeParameterSet } from '@vantage/infra';
import { eventually, kafkaBrokers, ownNats, uniqueName } from '@vantage/testkit';

const EXAMPLE_DIR = join(REPO_ROOT, 'examples', 'python-gateway');
const SCHEMA_DIR = join(REPO_ROOT, 'schemas', 'protocol');

function schema(name: string): ValidateFunction {
  const ajv = new Ajv({ allErrors: true, strict: false });
  return ajv.compile(JSON.parse(readFileSync(join(SCHEMA_DIR, name), 'utf8')) as object);
}

/** The interpreter of the test setup's Python venv (Dynamo 1.6.1 and nats-py), installing it if needed. */
function python(): string {
  const r = spawnSync('bash', [join(REPO_ROOT, 'packages/testkit/scripts/ensure-dynamo-py.sh')], { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`ensure-dynamo-py.sh failed: ${r.stderr}`);
  return r.stdout.trim().split('\n').pop()!;
}

function runPython(py: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(py, args, { cwd: EXAMPLE_DIR, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

interface Captured {
  readonly subject: string;
  readonly text: string;
}

function capture(nc: NatsConnection, subject: string, into: Captured[]): Subscription {
  const sub = nc.subscribe(subject);
  void (async () => {
    for await (const m of sub) into.push({ subject: m.subject, text: new TextDecoder().decode(m.data) });
  })();
  return sub;
}

/** Outcome rows read back from Kafka with `vantage replay` (the project's own reader). */
async function outcomes(topic: string): Promise<Record<string, unknown>[]> {
  let out = '';
  const code = await vantageCli(['replay', '--brokers', kafkaBrokers().join(','), '--topic', topic, '--from-beginning', '--format', 'jsonl', '--kind', 'outcome'], {
    stdout: (t) => void (out += t),
    stderr: () => {},
    readStdin: () => Promise.resolve(new Uint8Array(0)),
    readFile: (p) => Promise.resolve(new Uint8Array(readFileSync(p))),
  });
  if (code !== 0) throw new Error(`vantage replay exited with ${code}`);
  return out
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('Python gateway client (examples/python-gateway) against the real services', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-pygw-'));
  const paramsFile = join(dir, 'params.json');
  const topics = { outcomes: uniqueName('outcomes'), decisions: uniqueName('decisions') };
  let nats: Awaited<ReturnType<typeof ownNats>>;
  let stack: Stack;
  let nc: NatsConnection;
  let py: string;
  const routeMsgs: Captured[] = [];
  const lifecycleMsgs: Captured[] = [];

  beforeAll(async () => {
    py = python();
    nats = await ownNats();
    writeParameterSet(paramsFile, calibrationParameterSet(8, 'pygw'));
    stack = new Stack({
      natsUrl: nats.url,
      kafkaBrokers: kafkaBrokers().join(','),
      paramsFile,
      logDir: join(dir, 'logs'),
      pools: {
        efficient: { name: 'efficient', component: 'efficient', speed: 1.0, workers: 2 },
        capable: { name: 'capable', component: 'capable', speed: 0.6, workers: 2 },
      },
      timeScale: 4,
      joinWindowMs: 3_000,
      extraEnv: {
        decision: { VANTAGE_DECISION_OBSERVE_TIMEOUT_MS: '500' },
        outcome: {
          VANTAGE_OUTCOME_TOPICS_OUTCOMES: topics.outcomes,
          VANTAGE_OUTCOME_TOPICS_DECISIONS: topics.decisions,
          VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: uniqueName('dlq'),
          VANTAGE_OUTCOME_TOPICS_PROGRESS: uniqueName('progress'),
          VANTAGE_OUTCOME_TRANSACTIONAL_ID: uniqueName('outcome-tx'),
          VANTAGE_OUTCOME_TOPICS_PARTITIONS: '2',
        },
      },
      log: () => {},
    });
    await stack.start();
    nc = await connect({ servers: nats.url });
    capture(nc, 'vantage.v1.route', routeMsgs);
    capture(nc, 'vantage.v1.lifecycle.>', lifecycleMsgs);
    // Routes answer with a worker once the indexers have seen the fleet's workers.
    const ts = new GatewayClient({
      nc,
      routeTimeoutMs: 3_000,
      pools: { efficient: { model: 'efficient', pool: 'efficient', blockSize: 64 }, capable: { model: 'capable', pool: 'capable', blockSize: 64 } },
    });
    let n = 0;
    await eventually(
      'a route answered with a worker',
      async () => {
        const reply = await ts.route({ requestId: `warm-${n++}`, sessionId: 'warm', stageProposal: 'efficient', prompts: { efficient: { tokenIds: [1, 2, 3] }, capable: { tokenIds: [1, 2, 3] } } }).catch(() => null);
        return reply !== null && reply.workerId !== null && reply.reason !== 'fallback';
      },
      60_000,
      500,
    );
  }, 180_000);

  afterAll(async () => {
    await nc?.close();
    await stack?.stop();
    await nats?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('passes its own unit tests (encoders, reply decoder)', async () => {
    const r = await runPython(py, ['-m', 'unittest', 'test_vantage_gateway']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/Ran \d+ tests[\s\S]*OK/);
  });

  it('routes, reports first token and done exactly per the schemas, and the outcome record lands in Kafka', async () => {
    const requestId = uniqueName('py-req');
    const sessionId = uniqueName('py-session');
    const r = await runPython(py, [
      'route_once.py',
      '--nats', nats.url,
      '--request-id', requestId,
      '--session-id', sessionId,
      '--stage', 'efficient',
      '--efficient', 'efficient:efficient',
      '--capable', 'capable:capable',
      '--tokens', '300',
      '--deadline-ms', '400',
      '--first-token-ms', '40',
      '--done-ms', '60',
      '--output-tokens', '12',
      '--cached-tokens', '64',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
      reply: Record<string, unknown>;
      placement: { requestId: string; sessionId: string; pool: string; workerId: string | null; dpRank: number | null };
      events: { kind: string; atMs: number }[];
    };

    // The reply the Python client read is a v1 route reply for its request, with a worker.
    const replyValid = schema('route-reply.v1.json');
    expect(replyValid(result.reply), JSON.stringify(replyValid.errors)).toBe(true);
    expect(result.reply['requestId']).toBe(requestId);
    expect(result.reply['reason']).not.toBe('fallback');
    expect(result.placement.workerId).toMatch(/^(0|[1-9][0-9]{0,19})$/);
    expect(result.placement.workerId).toBe(result.reply['workerId']);
    expect(['efficient', 'capable']).toContain(result.placement.pool);

    // What it put on the wire: one route request, two lifecycle events, each valid per its schema.
    await eventually('both lifecycle events captured', () => lifecycleMsgs.filter((m) => m.text.includes(requestId)).length === 2);
    const mine = routeMsgs.filter((m) => m.text.includes(requestId));
    expect(mine).toHaveLength(1);
    const reqValid = schema('route-request.v1.json');
    const req = JSON.parse(mine[0]!.text) as Record<string, unknown>;
    expect(reqValid(req), JSON.stringify(reqValid.errors)).toBe(true);
    expect(req).toMatchObject({ v: 1, requestId, sessionId, stageProposal: 'efficient', deadlineMs: 400 });
    const lifeValid = schema('lifecycle-event.v1.json');
    const events = lifecycleMsgs.filter((m) => m.text.includes(requestId));
    expect(events.map((e) => e.subject)).toEqual([`vantage.v1.lifecycle.${result.placement.pool}`, `vantage.v1.lifecycle.${result.placement.pool}`]);
    const parsed = events.map((e) => JSON.parse(e.text) as Record<string, unknown>);
    for (const e of parsed) expect(lifeValid(e), JSON.stringify(lifeValid.errors)).toBe(true);
    expect(parsed.map((e) => e['kind'])).toEqual(['first_token', 'done']);
    for (const e of parsed) expect(e).toMatchObject({ requestId, sessionId, pool: result.placement.pool, workerId: result.placement.workerId, dpRank: result.placement.dpRank });
    expect(parsed[1]!['usage']).toEqual({ inputTokens: 300, outputTokens: 12, cachedTokens: 64 });
    // A worker id is text in the JSON, not a number a reader could round.
    expect(events[0]!.text).toContain(`"workerId":"${result.placement.workerId}"`);

    // The outcome service joined the decision with the Python client's events and wrote the record.
    let row: Record<string, unknown> | undefined;
    await eventually(
      'the outcome record in Kafka',
      async () => {
        row = (await outcomes(topics.outcomes)).find((o) => o['requestId'] === requestId);
        return row !== undefined;
      },
      60_000,
      1_000,
    );
    const first = result.events.find((e) => e.kind === 'first_token')!.atMs;
    const done = result.events.find((e) => e.kind === 'done')!.atMs;
    expect(row).toMatchObject({ requestId, sessionId, status: 'completed', firstTokenMs: first, endMs: done, inputTokens: 300, outputTokens: 12, cachedTokens: 64 });
    // The record's decision half is this route's (`vantage replay` flattens nested fields with dots).
    expect(row).toMatchObject({
      'decision.requestId': requestId,
      'decision.chosenWorkerId': result.placement.workerId,
      'decision.chosenDpRank': result.placement.dpRank,
      'join.hasDecision': true,
      'join.hasFirstToken': true,
      'join.hasTerminal': true,
      'join.eventCount': 2,
      'join.duplicateEvents': 0,
      servedPool: result.placement.pool,
    });
    expect(row!['ttftMs']).toBe(first - (row!['decision.timestampMs'] as number));
    expect(row!['latencyMs']).toBe(done - (row!['decision.timestampMs'] as number));
  });

  it('reports no decision service and a refused request as RouteError kinds', async () => {
    const none = await runPython(py, [
      'route_once.py', '--nats', nats.url, '--request-id', uniqueName('py-none'), '--session-id', 's',
      '--efficient', 'efficient:efficient', '--capable', 'capable:capable', '--route-subject', `${uniqueName('nobody')}.route`,
    ]);
    expect(none.code, none.stderr).toBe(3);
    expect(JSON.parse(none.stdout)).toMatchObject({ error: { kind: 'no_responders', code: 'NATS_NO_RESPONDERS', retryable: true } });

    // A candidate naming a pool this decision service does not serve: BAD_REQUEST in the error headers.
    const refused = await runPython(py, [
      'route_once.py', '--nats', nats.url, '--request-id', uniqueName('py-bad'), '--session-id', 's',
      '--efficient', 'efficient:not-served', '--capable', 'capable:capable',
    ]);
    expect(refused.code, refused.stderr).toBe(3);
    const err = (JSON.parse(refused.stdout) as { error: { kind: string; code: string; retryable: boolean; message: string } }).error;
    expect(err).toMatchObject({ kind: 'service', code: 'BAD_REQUEST', retryable: false });
    expect(err.message).toContain('not-served');

    // Arguments the schema refuses never reach the wire.
    const before = routeMsgs.length;
    const bad = await runPython(py, ['route_once.py', '--nats', nats.url, '--request-id', 'x', '--session-id', 's', '--efficient', 'efficient:efficient', '--capable', 'capable:capable', '--token-ids', '1,-2']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('token_ids[1]');
    await new Promise((res) => setTimeout(res, 200));
    expect(routeMsgs.length).toBe(before);
  });
});
