/**
 * Outcome service benchmark: sustained JetStream input → joined records in Kafka.
 *
 *   node --import tsx services/outcome/bench/outcome-bench.ts [--rate REQ_PER_S] [--seconds S] [--events 1|2]
 *
 * Brokers: NATS_URL / KAFKA_BROKERS when set, otherwise a nats-server and a
 * Kafka broker started here under .infra/bench (stopped at the end). The
 * service runs as a child process (`node --import tsx`), as in production.
 *
 * Each request is one decision (Avro) plus lifecycle events (first_token and
 * done with usage; `--events 1` sends only done). Into Kafka go 2 records per
 * request (the decision copy and the outcome). Measured:
 *   records_per_s  decision + outcome records committed per second, first publish → last record visible
 *   lag p50/p99    publish of a request's last message → its outcome visible to a read_committed consumer
 *   lost / duplicated  by reading both topics back (keys are unique per request)
 * Baseline in the same run: a bare kafkajs idempotent producer writing the
 * same number of pre-encoded records in batches (no NATS, no join, no transactions).
 * The last stdout line is one JSON object.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import kafkajs from 'kafkajs';
import { freePort, INFRA_DIR, kafkaBroker, natsBroker } from '@vantage/infra';
import { DECISION_RECORD_CURRENT, encodeSingleObject, type DecisionRecord } from '@vantage/records';

process.env['KAFKAJS_NO_PARTITIONER_WARNING'] = '1';
const { Kafka, logLevel } = kafkajs;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const say = (s: string): void => void process.stderr.write(`[outcome-bench] ${s}\n`);

const { values: args } = parseArgs({
  options: { rate: { type: 'string', default: '10000' }, seconds: { type: 'string', default: '15' }, events: { type: 'string', default: '2' } },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const EVENTS = Number(args.events) === 1 ? 1 : 2;
const N = Math.round(RATE * SECONDS);

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

function decision(i: number, runId: string): DecisionRecord {
  return {
    recordId: `d-${runId}-${i}`,
    requestId: `r-${runId}-${i}`,
    // Unique per request so the Kafka key identifies the request (lag and duplicate counting without decoding).
    sessionId: `s${i}`,
    timestampMs: Date.now(),
    parameterSetVersion: 'bench.1',
    variant: 'cache_aware',
    stageProposal: { model: 'small', role: 'efficient' },
    finalChoice: { model: 'small', role: 'efficient' },
    reason: 'kept',
    detail: null,
    couldAct: true,
    triggered: false,
    gate: null,
    observations: [],
    predictions: [
      { role: 'efficient', model: 'small', blindTtftMs: 410, cacheTtftMs: 220 },
      { role: 'capable', model: 'large', blindTtftMs: 900, cacheTtftMs: 640 },
    ],
    advantageMs: -420,
    chosenWorkerId: null,
    chosenDpRank: null,
    endpoint: 'dyn://bench.small.generate',
    observeDurationUs: 800,
    decisionDurationUs: 1_100,
    decisionInstanceId: 'bench',
    background: false,
  };
}

async function main(): Promise<void> {
  const runId = randomBytes(3).toString('hex');
  const stops: (() => Promise<void>)[] = [];
  let natsUrl = process.env['NATS_URL'];
  let brokers = process.env['KAFKA_BROKERS'];
  const dir = join(INFRA_DIR, 'bench', `run-${process.pid}`);
  if (natsUrl === undefined || brokers === undefined) {
    mkdirSync(dir, { recursive: true });
    const t0 = Date.now();
    await Promise.all([
      (async () => {
        if (natsUrl !== undefined) return;
        const n = await natsBroker({ dir: join(dir, 'nats'), attached: true });
        await n.start();
        stops.push(() => n.stop(5_000));
        natsUrl = n.url;
      })(),
      (async () => {
        if (brokers !== undefined) return;
        const k = await kafkaBroker({ dir: join(dir, 'kafka'), attached: true, heapMb: 768 });
        await k.start();
        stops.push(() => k.stop(10_000));
        brokers = k.brokers;
      })(),
    ]);
    say(`brokers started in ${Date.now() - t0} ms`);
  }
  const nats = natsUrl as string;
  const kafkaBrokers = (brokers as string).split(',');
  const kafka = new Kafka({ brokers: kafkaBrokers, clientId: 'outcome-bench', logLevel: logLevel.NOTHING });

  // Pre-encode every message: the benchmark measures the pipeline, not our encoder.
  const ds = Array.from({ length: N }, (_, i) => decision(i, runId));
  const decBytes = ds.map((d) => encodeSingleObject(DECISION_RECORD_CURRENT, d));
  const ev = (d: DecisionRecord, kind: string, dt: number, usage: boolean): Uint8Array =>
    Buffer.from(
      JSON.stringify({ v: 1, requestId: d.requestId, sessionId: d.sessionId, pool: 'small', kind, atMs: d.timestampMs + dt, ...(usage ? { usage: { inputTokens: 4000, outputTokens: 300, cachedTokens: 3000 } } : {}) }),
    );
  const ftBytes = EVENTS === 2 ? ds.map((d) => ev(d, 'first_token', 150, false)) : [];
  const doneBytes = ds.map((d) => ev(d, 'done', 2_000, true));

  // ---------------------------------------------------------------- baseline
  const baseTopic = `bench-baseline-${runId}`;
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: baseTopic, numPartitions: 6 }] });
  const bp = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await bp.connect();
  const outcomeSized = Buffer.alloc(decBytes[0]!.length * 2 + 200, 1);
  const tb = performance.now();
  const B = 2_000;
  for (let i = 0; i < 2 * N; i += B) {
    const messages = [];
    for (let j = i; j < Math.min(2 * N, i + B); j++) messages.push({ key: `s${j >> 1}`, value: j % 2 === 0 ? decBytes[j >> 1]! : outcomeSized });
    await bp.send({ topic: baseTopic, acks: -1, messages });
  }
  const baselineSecs = (performance.now() - tb) / 1000;
  await bp.disconnect();
  const baselineRps = (2 * N) / baselineSecs;
  say(`baseline: bare kafkajs idempotent producer, ${2 * N} records in batches of ${B}: ${Math.round(baselineRps)} records/s`);

  // ----------------------------------------------------------------- service
  const tag = `bench-${runId}`;
  const topics = { decisions: `${tag}.decisions`, outcomes: `${tag}.outcomes`, deadLetter: `${tag}.dlq`, progress: `${tag}.progress` };
  const httpPort = await freePort();
  const env: Record<string, string> = {
    VANTAGE_NATS_URL: nats,
    VANTAGE_KAFKA_BROKERS: kafkaBrokers.join(','),
    VANTAGE_LOG_LEVEL: 'warn',
    VANTAGE_HTTP_PORT: String(httpPort),
    VANTAGE_OUTCOME_NATS_DECISIONS_STREAM: `BD_${runId}`,
    VANTAGE_OUTCOME_NATS_DECISIONS_SUBJECT: `bench.${runId}.decisions`,
    VANTAGE_OUTCOME_NATS_LIFECYCLE_STREAM: `BL_${runId}`,
    VANTAGE_OUTCOME_NATS_LIFECYCLE_SUBJECT: `bench.${runId}.lifecycle.>`,
    VANTAGE_OUTCOME_TOPICS_DECISIONS: topics.decisions,
    VANTAGE_OUTCOME_TOPICS_OUTCOMES: topics.outcomes,
    VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: topics.deadLetter,
    VANTAGE_OUTCOME_TOPICS_PROGRESS: topics.progress,
    VANTAGE_OUTCOME_TRANSACTIONAL_ID: `bench-${runId}`,
  };
  const svc = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../src/main.ts', import.meta.url))], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  mkdirSync(dir, { recursive: true });
  const svcLog = join(INFRA_DIR, 'bench', `outcome-${runId}.log`);
  svc.stdout?.pipe(createWriteStream(svcLog));
  say(`service log: ${svcLog}`);
  stops.unshift(async () => {
    svc.kill('SIGTERM');
    await new Promise((r) => (svc.exitCode !== null ? r(null) : svc.once('exit', r)));
  });
  for (let i = 0; ; i++) {
    const ok = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (i > 1800 || svc.exitCode !== null) throw new Error(`service did not become healthy (exit code ${svc.exitCode}); see ${svcLog}`);
    await sleep(100);
  }
  say('service healthy');

  // Reader: read_committed consumers on both topics, started before publishing.
  const lastPub = new Float64Array(N);
  const seenOutcome = new Uint8Array(N);
  const seenDecision = new Uint8Array(N);
  const lags: number[] = [];
  let outcomes = 0;
  let decisionsOut = 0;
  let dupOutcomes = 0;
  let dupDecisions = 0;
  let lastVisible = 0;
  const consumer = kafka.consumer({ groupId: `bench-reader-${runId}`, readUncommitted: false, maxWaitTimeInMs: 50, maxBytes: 32 * 1024 * 1024 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topics.outcomes, topics.decisions], fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      const now = performance.now();
      const isOutcome = batch.topic === topics.outcomes;
      for (const m of batch.messages) {
        const i = Number(m.key?.toString('latin1').slice(1) ?? -1);
        if (!(i >= 0 && i < N)) continue;
        if (isOutcome) {
          outcomes++;
          if (seenOutcome[i] === 1) dupOutcomes++;
          else {
            seenOutcome[i] = 1;
            lags.push(now - (lastPub[i] as number));
          }
        } else {
          decisionsOut++;
          if (seenDecision[i] === 1) dupDecisions++;
          seenDecision[i] = 1;
        }
      }
      lastVisible = now;
    },
  });
  await sleep(2_000); // group join

  // --------------------------------------------------------------- publisher
  const nc = await connect({ servers: nats });
  const js = jetstream(nc);
  const decSubject = `bench.${runId}.decisions`;
  const lcSubject = `bench.${runId}.lifecycle.small`;
  const tick = 10; // ms per publishing slot
  const perTick = RATE / (1000 / tick);
  const MAX_IN_FLIGHT = 4_000;
  let inFlight = 0;
  let pubErrors = 0;
  const track = (p: Promise<unknown>): void => {
    inFlight++;
    p.then(
      () => inFlight--,
      () => {
        inFlight--;
        pubErrors++;
      },
    );
  };
  const t0 = performance.now();
  let next = 0;
  let behindMs = 0;
  while (next < N) {
    const due = Math.min(N, Math.floor(((performance.now() - t0) / tick + 1) * perTick));
    for (; next < due; next++) {
      while (inFlight >= MAX_IN_FLIGHT) await sleep(1);
      track(js.publish(decSubject, decBytes[next]!));
      if (EVENTS === 2) track(js.publish(lcSubject, ftBytes[next]!));
      lastPub[next] = performance.now();
      track(js.publish(lcSubject, doneBytes[next]!));
    }
    const slotEnd = t0 + Math.ceil((performance.now() - t0 + 0.001) / tick) * tick;
    const wait = slotEnd - performance.now();
    if (wait > 0) await sleep(wait);
    else behindMs -= wait;
  }
  while (inFlight > 0) await sleep(5);
  const pubSecs = (performance.now() - t0) / 1000;
  say(`published ${N} requests (${N * (EVENTS + 1)} messages) in ${pubSecs.toFixed(1)} s (${Math.round(N / pubSecs)} req/s offered), ${pubErrors} publish errors`);

  const deadline = performance.now() + 120_000;
  while ((outcomes < N || decisionsOut < N) && performance.now() < deadline) await sleep(100);
  await sleep(3_000); // let any duplicate surface
  const totalSecs = (lastVisible - t0) / 1000;
  const lost = N - seenOutcome.reduce((a, b) => a + b, 0) + (N - seenDecision.reduce((a, b) => a + b, 0));
  const duplicated = dupOutcomes + dupDecisions;
  const sorted = Float64Array.from(lags).sort();
  const metricsText = await fetch(`http://127.0.0.1:${httpPort}/metrics`).then((r) => r.text(), () => '');
  const txns = /vantage_outcome_kafka_transactions_total\{result="committed"[^}]*\} (\d+)/.exec(metricsText)?.[1];

  await consumer.disconnect();
  await nc.close();
  await admin.deleteTopics({ topics: [baseTopic] }).catch(() => {});
  await admin.disconnect();
  for (const s of stops) await s().catch(() => {});
  if (stops.length > 1) rmSync(dir, { recursive: true, force: true });

  const result = {
    requests: N,
    offered_req_per_s: RATE,
    events_per_request: EVENTS,
    records: outcomes + decisionsOut,
    records_per_s: Math.round((outcomes + decisionsOut) / totalSecs),
    outcomes_per_s: Math.round(outcomes / totalSecs),
    lag_p50_ms: Math.round(pct(sorted, 50) * 10) / 10,
    lag_p99_ms: Math.round(pct(sorted, 99) * 10) / 10,
    lag_max_ms: Math.round(pct(sorted, 100) * 10) / 10,
    lost,
    duplicated,
    transactions: txns === undefined ? null : Number(txns),
    publisher_behind_ms: Math.round(behindMs),
    baseline_records_per_s: Math.round(baselineRps),
  };
  say(`service: ${result.records} records in ${totalSecs.toFixed(1)} s = ${result.records_per_s} records/s (${result.outcomes_per_s} outcomes/s); lag p50 ${result.lag_p50_ms} ms, p99 ${result.lag_p99_ms} ms; lost ${lost}, duplicated ${duplicated}`);
  say(`baseline: ${result.baseline_records_per_s} records/s (bare producer, same record count, no NATS/join/transactions)`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

main().catch((e: unknown) => {
  process.stderr.write(`outcome-bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
