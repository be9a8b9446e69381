/**
 * In-process profile of one `route` as the decision service runs it, on `bench:decision`'s
 * workload (two local pools of 64 workers filled as the benchmark fills them, 32k-token prompts as
 * block hashes, variant cache, records on), without the load generator's noise.
 *
 * Run: node --import tsx services/decision/bench/route-steps.ts [iterations] [steps]
 * (a private nats-server is started; the service runs in this process through `runService`).
 *
 * `route` is the service's handler end to end: `Router.handle`, then the turn's outbox write
 * (booking, and the held records once a batch is due) and the record build; each route's `done`
 * is published from a second connection, as the benchmark's gateway does, and applied by the
 * service in the same loop (so bookings do not pile up). The other lines are the handler's steps
 * alone, called as it calls them on one fixed request: `decode`, `observe efficient|capable`,
 * `decide`, `booking encode`, `book` (the local pool's booking, released at once), `reply`
 * (observations mapped and the reply encoded), `record` (built and Avro-encoded; then each part alone).
 * EXP_BK=1 adds the booking encode's parts (wire object, JSON text, base64 of the hashes).
 *
 * Per line: CPU µs per iteration (process user + system, median of 5 batches; the cheapest batch
 * too), and heap bytes allocated per iteration (the V8 heap's growth between samples, samples
 * across a collection left out) plus array-buffer bytes (Buffers, typed arrays).
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync, mkdirSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { connect } from '@nats-io/transport-node';
import { GatewayClient } from '@vantage/gateway-client';
import { ensureNatsServer, freePort, INFRA_DIR, tcpOpen, waitFor } from '@vantage/infra';
import { bookingEventCodec, lifecycleEventCodec, lifecycleSubject, routeReplyCodec, routeRequestCodec, workerRegistrationCodec, workersSubject } from '@vantage/protocol';
import { buildDecisionRecord, decideRoute, type MapOptions, type ProbeResult } from '@vantage/decision-core';
import { DECISION_RECORD_CURRENT, encodeSingleObject } from '@vantage/records';
import { serializeParameterSet } from '@vantage/rules';
import { runService } from '@vantage/runtime';
import type { WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';
import { decisionConfigSchema, startDecision, type DecisionHandle, type DecisionSettings } from '../src/index';
import { toWireObservation } from '../src/observe';
import { BLOCK, PROMPT_SESSIONS, SESSIONS, SESSION_TOKENS, WORKER_CAPACITY, WORKERS, benchParameterSet, POOLS, storedPrefixEvent, tokensFor } from './workload';

const args = process.argv.slice(2);
const ITER = Number(args[0] ?? 5000);
const ONLY = args[1]?.split(',') ?? null;
const ROLES = ['efficient', 'capable'] as const;
const dir = join(INFRA_DIR, 'bench', `route-steps-${process.pid}`);
mkdirSync(dir, { recursive: true });

const heapUsed = (): number => getHeapStatistics().used_heap_size;

async function main(): Promise<void> {
  const bin = await ensureNatsServer();
  const port = await freePort();
  writeFileSync(join(dir, 'nats.conf'), `listen: 127.0.0.1:${port}\nmax_payload: 8388608\njetstream { store_dir: "${join(dir, 'js')}" }\n`);
  const nats = spawn(bin, ['-c', join(dir, 'nats.conf')], { stdio: 'ignore' });
  try {
    await waitFor('nats-server', () => tcpOpen('127.0.0.1', port), 15_000);
    await run(`nats://127.0.0.1:${port}`);
  } finally {
    const gone = new Promise((r) => nats.once('exit', r));
    nats.kill('SIGTERM');
    await gone;
    rmSync(dir, { recursive: true, force: true });
  }
}

async function run(url: string): Promise<void> {
  const paramsFile = join(dir, 'params.json');
  writeFileSync(paramsFile, serializeParameterSet(benchParameterSet()));
  let h: DecisionHandle | undefined;
  const svc = await runService<DecisionSettings, false>({
    name: 'decision',
    schema: decisionConfigSchema,
    noEcho: true, // as main.ts runs it: the service's own bookings are not sent back to it
    env: {
      VANTAGE_NATS_URL: url,
      VANTAGE_LOG_LEVEL: 'warn',
      VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: POOLS.efficient.model,
      VANTAGE_DECISION_POOLS_EFFICIENT_POOL: POOLS.efficient.pool,
      VANTAGE_DECISION_POOLS_EFFICIENT_BLOCK_SIZE: String(BLOCK),
      VANTAGE_DECISION_POOLS_EFFICIENT_NAMESPACE: POOLS.efficient.ns,
      VANTAGE_DECISION_POOLS_CAPABLE_MODEL: POOLS.capable.model,
      VANTAGE_DECISION_POOLS_CAPABLE_POOL: POOLS.capable.pool,
      VANTAGE_DECISION_POOLS_CAPABLE_BLOCK_SIZE: String(BLOCK),
      VANTAGE_DECISION_POOLS_CAPABLE_NAMESPACE: POOLS.capable.ns,
      VANTAGE_DECISION_LOCAL_SNAPSHOT_BUCKET: '',
      VANTAGE_DECISION_LOCAL_WORKER_TTL_MS: '3600000',
      VANTAGE_DECISION_PARAMETER_SET_FILE: paramsFile,
      VANTAGE_DECISION_RELOAD_ON_SIGHUP: 'false',
    },
    signals: [],
    processHandlers: false,
    exit: () => {},
    start: async (ctx) => {
      h = await startDecision(ctx);
    },
  });
  const d = h!;
  const nc = await connect({ servers: url });
  // The benchmark's workers: registrations and one stored prefix each (decision-bench.ts's publishWorkers).
  const spec = { efficient: { ...POOLS.efficient, blockSize: BLOCK }, capable: { ...POOLS.capable, blockSize: BLOCK } };
  const client = new GatewayClient({ nc, routeTimeoutMs: 5000, pools: spec });
  const prompts = Array.from({ length: SESSIONS }, (_, s) => tokensFor(s, SESSION_TOKENS));
  const sessionHashes = prompts.map((t) => client.hashPrompt('efficient', t));
  for (const role of ROLES) {
    const p = POOLS[role];
    for (let w = 0; w < WORKERS; w++) {
      const workerId = BigInt(1000 + w + (role === 'capable' ? 100_000 : 0)) as WorkerId;
      nc.publish(workersSubject(p.pool), workerRegistrationCodec.encode({ kind: 'register', pool: p.pool, workerId, atMs: Date.now(), capacity: WORKER_CAPACITY, ttlMs: 3_600_000, endpoint: `http://${p.pool}-${w}:8000`, model: p.model }));
      const event = storedPrefixEvent(workerId, w, sessionHashes);
      nc.publish(kvEventsSubject(p.ns, 'backend'), encodeEventPlaneMessage({ publisherId: workerId, sequence: 1n, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event }));
    }
  }
  await nc.flush();
  await waitFor('both pools hold every worker', () => Promise.resolve(ROLES.every((r) => d.pools.get(r)?.state.workerCount === WORKERS)), 30_000, 50);

  const size = 32768;
  const requests = PROMPT_SESSIONS.map((s) => {
    const t = prompts[s]!.subarray(0, size);
    return (id: string): Uint8Array => client.encodeRoute({ requestId: id, sessionId: `bench-${s}`, stageProposal: 'efficient', prompts: { efficient: { tokenIds: t }, capable: { tokenIds: t } } });
  });
  const bodies = Array.from({ length: 64 }, (_, i) => requests[i % requests.length]!(`REQ-${String(i).padStart(12, '0')}`));
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

  let seq = 0;
  const route = async (): Promise<void> => {
    const body = bodies[seq++ % bodies.length]!;
    const bytes = await d.router.handle(body);
    // The reply's pool and id, as the gateway reads them, for its `done`.
    const reply = JSON.parse(Buffer.from(bytes).toString('latin1')) as { requestId: string; pool: string | null };
    await turn();
    if (reply.pool !== null) nc.publish(lifecycleSubject(reply.pool), lifecycleEventCodec.encode({ requestId: reply.requestId, sessionId: 'bench', pool: reply.pool, kind: 'done', atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null }));
  };

  /** `route` with the booking released in-process instead of by a `done` over NATS. */
  const handleOnly = async (): Promise<void> => {
    const body = bodies[seq++ % bodies.length]!;
    const bytes = await d.router.handle(body);
    const reply = JSON.parse(Buffer.from(bytes).toString('latin1')) as { requestId: string; pool: string | null; modelRole: 'efficient' | 'capable' };
    await turn();
    if (reply.pool !== null) {
      d.pools.get(reply.modelRole)!.state.ledger.release(reply.requestId, 'completed', Date.now());
      d.inFlight.release(reply.requestId);
    }
  };

  // One fixed request's intermediate values, for the steps timed alone.
  const one = bodies[0]!;
  const dec = routeRequestCodec.decode(one);
  if (!dec.ok) throw new Error(dec.reason);
  const req = dec.value;
  const hashesOf = (r: 'efficient' | 'capable'): BigUint64Array => {
    const p = req.candidates[r].prompt;
    if (p.kind !== 'local_hashes') throw new Error('expected local hashes');
    return p.localHashes;
  };
  const cfg = svc.ctx.config.decision;
  const targets = {
    efficient: { role: 'efficient' as const, model: req.candidates.efficient.model, pool: cfg.pools.efficient.pool, blockSize: BLOCK, promptTokens: req.candidates.efficient.promptTokens },
    capable: { role: 'capable' as const, model: req.candidates.capable.model, pool: cfg.pools.capable.pool, blockSize: BLOCK, promptTokens: req.candidates.capable.promptTokens },
  };
  const params = d.params.current();
  const observe = (r: 'efficient' | 'capable'): ProbeResult => d.pools.observe(r, hashesOf(r), targets[r].promptTokens);
  const probes = { efficient: observe('efficient'), capable: observe('capable') };
  const mo: MapOptions = { collectionAgeMs: 0.01, nowMs: Date.now(), restoredLoadSuspectMs: cfg.restoredLoadSuspectMs };
  const mapOpts = (): MapOptions => mo;
  const decision = decideRoute({ proposal: req.stageProposal, targets, probes, mapOpts, localCapableInFlight: 0 }, params);
  const chosen = probes[decision.choice];
  if (chosen.kind !== 'ok' || chosen.worker === null || chosen.reply.dynamoChoice === null) throw new Error('no worker chosen');
  const placement = { workerId: chosen.reply.dynamoChoice.workerId, dpRank: chosen.reply.dynamoChoice.dpRank };
  const w = chosen.worker;
  const replyValue = routeReplyCodec.decode(await d.router.handle(bodies[1]!));
  if (!replyValue.ok) throw new Error('reply did not decode');
  let bk = 0;

  const steps: [string, () => unknown][] = [
    ['decode', () => routeRequestCodec.decode(one)],
    ['observe efficient', () => observe('efficient')],
    ['observe capable', () => observe('capable')],
    ['decide', () => decideRoute({ proposal: req.stageProposal, targets, probes, mapOpts, localCapableInFlight: 0 }, params)],
    [
      'booking encode',
      () =>
        bookingEventCodec.encode({
          requestId: req.requestId, sessionId: req.sessionId, pool: targets[decision.choice].pool, workerId: placement.workerId, dpRank: placement.dpRank,
          promptTokens: targets[decision.choice].promptTokens, overlapBlocks: w.deviceOverlapBlocks, localHashes: hashesOf(decision.choice), sequenceHashes: null,
          expectedOutputTokens: null, prefillTokens: w.effectivePrefillTokens, atMs: Date.now(),
        }),
    ],
    [
      'book',
      () => {
        const id = `book-${bk++}`;
        d.pools.book(decision.choice, { requestId: id, workerId: placement.workerId, dpRank: placement.dpRank, promptTokens: targets[decision.choice].promptTokens, overlapBlocks: w.deviceOverlapBlocks, localHashes: hashesOf(decision.choice), expectedOutputTokens: null });
        d.pools.get(decision.choice)!.state.ledger.release(id, 'completed', Date.now());
      },
    ],
    [
      'reply',
      () =>
        routeReplyCodec.encode({
          ...replyValue.value,
          observations: { efficient: toWireObservation(targets.efficient, probes.efficient, mo), capable: toWireObservation(targets.capable, probes.capable, mo) },
        }),
    ],
    [
      'record',
      () =>
        encodeSingleObject(
          DECISION_RECORD_CURRENT,
          buildDecisionRecord({
            recordId: randomUUID(), requestId: req.requestId, sessionId: req.sessionId, proposal: req.stageProposal, targets,
            probes, decision, params, mapOpts, receivedAtMs: Date.now(), placement, endpoint: 'http://x:8000', queryDurationUs: 50, decisionDurationUs: 100, localCapableInFlight: 0, instanceId: 'bench', probed: true,
          }),
        ),
    ],
  ];

  const recordInput = {
    recordId: randomUUID(), requestId: req.requestId, sessionId: req.sessionId, proposal: req.stageProposal, targets,
    probes, decision, params, mapOpts, receivedAtMs: Date.now(), placement, endpoint: 'http://x:8000', queryDurationUs: 50, decisionDurationUs: 100, localCapableInFlight: 0, instanceId: 'bench', probed: true,
  };
  const rec = buildDecisionRecord(recordInput);
  // The record's parts: built, then encoded.
  steps.push(['record build', () => buildDecisionRecord(recordInput)], ['record encode', () => encodeSingleObject(DECISION_RECORD_CURRENT, rec)]);
  const booking = {
    requestId: req.requestId, sessionId: req.sessionId, pool: targets[decision.choice].pool, workerId: placement.workerId, dpRank: placement.dpRank,
    promptTokens: targets[decision.choice].promptTokens, overlapBlocks: w.deviceOverlapBlocks, localHashes: hashesOf(decision.choice), sequenceHashes: null,
    expectedOutputTokens: null, prefillTokens: w.effectivePrefillTokens, atMs: Date.now(),
  };
  if (process.env.EXP_BK) steps.push(['bk toWire', () => bookingEventCodec.toWire(booking)], ['bk stringify', () => JSON.stringify(bookingEventCodec.toWire(booking))], ['bk b64', () => Buffer.from(booking.localHashes.buffer).toString('base64')]);
  const f = (v: number, wd = 7): string => v.toFixed(1).padStart(wd);
  const report = (name: string, cpu: number[], heap: number[], ab: number[]): void => {
    cpu.sort((a, b) => a - b);
    const med = (xs: number[]): number => (xs.length === 0 ? NaN : xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!);
    process.stdout.write(`${name.padEnd(28)} cpu median ${f(cpu[2]!)} µs  best ${f(cpu[0]!)} µs  heap ${f(med(heap) / 1024)} KiB  array buffers ${f(med(ab) / 1024)} KiB\n`);
  };
  /** Heap and array-buffer bytes of one call (median over samples with no collection in between). */
  const allocOf = async (fn: () => unknown, n: number, isAsync: boolean): Promise<{ heap: number[]; ab: number[] }> => {
    const heap: number[] = [];
    const ab: number[] = [];
    for (let i = 0; i < n; i++) {
      const m0 = process.memoryUsage();
      const h0 = heapUsed();
      if (isAsync) await fn();
      else fn();
      const h1 = heapUsed();
      const m1 = process.memoryUsage();
      if (h1 >= h0) heap.push(h1 - h0);
      if (m1.arrayBuffers >= m0.arrayBuffers) ab.push(m1.arrayBuffers - m0.arrayBuffers);
    }
    return { heap, ab };
  };
  const timeIt = async (name: string, fn: () => unknown, isAsync = false): Promise<void> => {
    if (ONLY !== null && !ONLY.includes(name)) return;
    for (let i = 0; i < Math.min(2000, ITER); i++) if (isAsync) await fn(); else fn();
    const per = Math.max(1, Math.floor(ITER / 5));
    const cpu: number[] = [];
    for (let b = 0; b < 5; b++) {
      const c0 = process.cpuUsage();
      if (isAsync) for (let i = 0; i < per; i++) await fn();
      else for (let i = 0; i < per; i++) fn();
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / per);
    }
    const a = await allocOf(fn, Math.min(500, ITER), isAsync);
    report(name, cpu, a.heap, a.ab);
  };

  await timeIt('route', route, true);
  await timeIt('route, released in-process', handleOnly, true);
  // Steps are synchronous: timed without awaiting (a resolved await per call would be counted too).
  for (const [name, fn] of steps) await timeIt(name, fn);
  await nc.close();
  await svc.stop('done');
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`route-steps failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
