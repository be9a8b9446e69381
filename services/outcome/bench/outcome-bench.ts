/**
 * Outcome service benchmark: JetStream input → joined records in Kafka, in two phases.
 *
 *   npm run bench:outcome -- [--rate REQ_PER_S] [--seconds S] [--backlog REQUESTS] [--events 1|2] [--connections N] [--prof DIR]
 *
 * Brokers: NATS_URL / KAFKA_BROKERS when set, otherwise a nats-server and a
 * Kafka broker started here under .infra/bench (stopped at the end). The
 * service runs as a child process (`node --import tsx`), as in production;
 * `--prof DIR` runs it under `--cpu-prof` and leaves the profile in DIR.
 *
 * Each request is one decision (Avro) plus lifecycle events (first_token and
 * done with usage; `--events 1` sends only done). Into Kafka go 2 records per
 * request (the decision copy and the outcome).
 *
 *  1. drain: `--backlog` requests (default rate × seconds) are published to the
 *     streams before the service starts; measured is how fast the service
 *     empties that backlog (service healthy → last record visible). This is the
 *     service's own throughput, independent of the publisher.
 *     Before the service starts, the same backlog goes through `bare-pipeline.ts`, the floor under
 *     the service on this machine with the same libraries: fetch + ack alone, then fetch →
 *     kafkajs idempotent produce → ack, without decoding, join, Avro or transactions
 *     (`floor_*` figures; durable consumers of its own, so the streams still hold everything).
 *     CPU per record is reported for the pipeline or service and for the brokers started here.
 *  2. live: `--rate` requests per second for `--seconds`, published while the
 *     service runs; measured are the sustained records per second (first
 *     publish → last record visible) and the end-to-end lag (publish of a
 *     request's last message → its outcome visible to a read_committed consumer).
 *
 * Publishing: JetStream publishes pipelined on `--connections` connections
 * (default 4; request i on connection i mod n, so a request's messages keep
 * their order). Each message carries a reply inbox; the stream's PubAck is
 * checked, at most `PUBLISH_WINDOW` unacknowledged per connection, and the
 * stream message counts are checked afterwards. (The client's per-call
 * `publish()` builds two Error objects per message for stack traces.)
 *
 * lost / duplicated: both topics are read back read_committed and every
 * request id (the record key is unique per request) counted, both phases.
 * Baseline in the same run: a bare kafkajs idempotent producer writing the
 * same number of pre-encoded records as the live phase in batches (no NATS,
 * no join, no transactions). The last stdout line is one JSON object;
 * `records_per_s`, `lag_p50_ms` and `lag_p99_ms` are the live phase's.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { connect, createInbox, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import kafkajs from 'kafkajs';
import { freePort, INFRA_DIR, kafkaBroker, natsBroker, processCpuUs } from '@vantage/infra';
import { DECISION_RECORD_CURRENT, encodeSingleObject, type DecisionRecord } from '@vantage/records';

process.env['KAFKAJS_NO_PARTITIONER_WARNING'] = '1';
const { Kafka, logLevel } = kafkajs;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const say = (s: string): void => void process.stderr.write(`[outcome-bench] ${s}\n`);

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '10' },
    backlog: { type: 'string' },
    events: { type: 'string', default: '2' },
    prof: { type: 'string' },
    connections: { type: 'string', default: '4' },
  },
});
const RATE = Number(args.rate);
const SECONDS = Number(args.seconds);
const EVENTS = Number(args.events) === 1 ? 1 : 2;
/** Live-phase requests. */
const NL = Math.round(RATE * SECONDS);
/** Backlog requests (drain phase), indices [0, NB); live requests are [NB, NB + NL). */
const NB = args.backlog === undefined ? NL : Math.max(0, Math.round(Number(args.backlog)));
const N = NB + NL;
const PUBLISH_WINDOW = 8_192;
/** Publishing connections: request i goes on connection i mod CONNECTIONS (its messages stay in order). */
const CONNECTIONS = Math.max(1, Math.round(Number(args.connections)));

function pct(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

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

/**
 * Pipelined JetStream publishing: a plain publish with a reply subject per
 * message, so the stream's PubAck (or error) comes back to one subscription.
 * At most `window` messages are unacknowledged; an error reply is retried.
 */
class AckedPublisher {
  private readonly inbox = createInbox();
  private inFlight = 0;
  private waiter: (() => void) | null = null;
  private readonly pending = new Map<number, { subject: string; data: Uint8Array; tries: number }>();
  private nextId = 0;
  errors = 0;
  failed = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly window: number,
  ) {
    nc.subscribe(`${this.inbox}.*`, {
      callback: (_err, m) => {
        const id = Number(m.subject.slice(this.inbox.length + 1));
        const p = this.pending.get(id);
        if (p === undefined) return;
        const d = m.data;
        // A PubAck is {"stream":…,"seq":…}; anything else (an API error, a
        // no-responders status with an empty body) is retried a few times.
        const ok = d.length > 10 && d[0] === 0x7b && d[2] === 0x73; // {"s
        if (!ok) {
          this.errors++;
          if (p.tries < 5) {
            p.tries++;
            this.nc.publish(p.subject, p.data, { reply: `${this.inbox}.${id}` });
            return;
          }
          this.failed++;
        }
        this.pending.delete(id);
        this.inFlight--;
        if (this.waiter !== null && this.inFlight <= this.window / 2) {
          const w = this.waiter;
          this.waiter = null;
          w();
        }
      },
    });
  }

  /** Publishes without waiting; `full` says when the caller should wait for `room()`. */
  send(subject: string, data: Uint8Array): void {
    const id = this.nextId++;
    this.pending.set(id, { subject, data, tries: 0 });
    this.inFlight++;
    this.nc.publish(subject, data, { reply: `${this.inbox}.${id}` });
  }

  get full(): boolean {
    return this.inFlight >= this.window;
  }

  /** Resolves once the window is half empty. */
  room(): Promise<void> {
    if (this.inFlight <= this.window / 2) return Promise.resolve();
    return new Promise<void>((r) => (this.waiter = r));
  }

  /** Waits for every acknowledgement. */
  async drain(): Promise<void> {
    while (this.inFlight > 0) {
      await new Promise<void>((r) => {
        this.waiter = r;
        setTimeout(r, 50);
      });
    }
  }
}

async function main(): Promise<void> {
  const runId = randomBytes(3).toString('hex');
  const stops: (() => Promise<void>)[] = [];
  let natsUrl = process.env['NATS_URL'];
  let brokers = process.env['KAFKA_BROKERS'];
  const dir = join(INFRA_DIR, 'bench', `run-${process.pid}`);
  /** Brokers started here (their CPU per record is reported; unknown for brokers given by URL). */
  let natsPid: number | undefined;
  let kafkaPid: number | undefined;
  /** CPU (µs) of nats-server and the Kafka broker so far. */
  // User + system µs; NaN when the process or /proc is not there.
  const cpuUs = (pid: number | undefined): number => {
    const c = processCpuUs(pid);
    return c === null ? NaN : c.user + c.sys;
  };
  const brokerCpu = (): { nats: number; kafka: number } => ({ nats: cpuUs(natsPid), kafka: cpuUs(kafkaPid) });
  if (natsUrl === undefined || brokers === undefined) {
    mkdirSync(dir, { recursive: true });
    const t0 = Date.now();
    await Promise.all([
      (async () => {
        if (natsUrl !== undefined) return;
        const n = await natsBroker({ dir: join(dir, 'nats'), attached: true });
        await n.start();
        natsPid = n.pid();
        stops.push(() => n.stop(5_000));
        natsUrl = n.url;
      })(),
      (async () => {
        if (brokers !== undefined) return;
        const k = await kafkaBroker({ dir: join(dir, 'kafka'), attached: true, heapMb: 768 });
        await k.start();
        kafkaPid = k.pid();
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
  const NBASE = Math.max(NL, 10_000);
  const tb = performance.now();
  const B = 2_000;
  for (let i = 0; i < 2 * NBASE; i += B) {
    const messages = [];
    for (let j = i; j < Math.min(2 * NBASE, i + B); j++) messages.push({ key: `s${j >> 1}`, value: j % 2 === 0 ? decBytes[(j >> 1) % N]! : outcomeSized });
    await bp.send({ topic: baseTopic, acks: -1, messages });
  }
  const baselineSecs = (performance.now() - tb) / 1000;
  await bp.disconnect();
  const baselineRps = (2 * NBASE) / baselineSecs;
  say(`baseline: bare kafkajs idempotent producer, ${2 * NBASE} records in batches of ${B}: ${Math.round(baselineRps)} records/s`);

  // ----------------------------------------------------------------- streams
  const decStream = `BD_${runId}`;
  const lcStream = `BL_${runId}`;
  const decSubject = `bench.${runId}.decisions`;
  const lcSubject = `bench.${runId}.lifecycle.small`;
  const nc = await connect({ servers: nats });
  // Several publishing connections: nats-server reads each connection on its own goroutine,
  // and one connection's pipelined publishes were the live phase's ceiling.
  const pubConns = [nc, ...(await Promise.all(Array.from({ length: CONNECTIONS - 1 }, () => connect({ servers: nats }))))];
  const jsm = await jetstreamManager(nc);
  // The service ensures the same streams (and adds its limits) at start; the
  // backlog has to exist before it does.
  await jsm.streams.add({ name: decStream, subjects: [decSubject] });
  await jsm.streams.add({ name: lcStream, subjects: [`bench.${runId}.lifecycle.>`] });
  const pubs = pubConns.map((c) => new AckedPublisher(c, PUBLISH_WINDOW));
  const pub = {
    get errors() {
      return pubs.reduce((a, p) => a + p.errors, 0);
    },
    get failed() {
      return pubs.reduce((a, p) => a + p.failed, 0);
    },
    drain: () => Promise.all(pubs.map((p) => p.drain())),
  };
  const lastPub = new Float64Array(N);
  /** Publishes request i's messages on its connection; waits only when that connection's window is full. */
  const publishRequest = (i: number): Promise<void> | undefined => {
    const p = pubs[i % pubs.length] as AckedPublisher;
    p.send(decSubject, decBytes[i]!);
    if (EVENTS === 2) p.send(lcSubject, ftBytes[i]!);
    lastPub[i] = performance.now();
    p.send(lcSubject, doneBytes[i]!);
    return p.full ? p.room() : undefined;
  };
  const streamCounts = async (): Promise<number> => {
    const [a, b] = await Promise.all([jsm.streams.info(decStream), jsm.streams.info(lcStream)]);
    return a.state.messages + b.state.messages;
  };

  // --------------------------------------------------------- backlog publish
  let backlogPubRate = 0;
  /** CPU (µs) per published message while publishing the backlog: this publisher, and nats-server storing it. */
  let pubCpuPerMsg = NaN;
  let pubNatsCpuPerMsg = NaN;
  if (NB > 0) {
    const tp = performance.now();
    const pc0 = process.cpuUsage();
    const pb0 = brokerCpu();
    for (let i = 0; i < NB; i++) {
      const w = publishRequest(i);
      if (w !== undefined) await w;
    }
    await pub.drain();
    const secs = (performance.now() - tp) / 1000;
    backlogPubRate = (NB * (EVENTS + 1)) / secs;
    const pc = process.cpuUsage(pc0);
    pubCpuPerMsg = (pc.user + pc.system) / (NB * (EVENTS + 1));
    pubNatsCpuPerMsg = (brokerCpu().nats - pb0.nats) / (NB * (EVENTS + 1));
    const stored = await streamCounts();
    say(
      `backlog: published ${NB} requests (${NB * (EVENTS + 1)} messages, ${stored} in the streams) in ${secs.toFixed(1)} s = ${Math.round(backlogPubRate)} messages/s on ${CONNECTIONS} connection(s); ` +
        `${pub.errors} error replies, ${pub.failed} failed; CPU per message: publisher ${pubCpuPerMsg.toFixed(1)} µs, nats-server ${pubNatsCpuPerMsg.toFixed(1)} µs`,
    );
    if (stored !== NB * (EVENTS + 1)) throw new Error(`streams hold ${stored} messages, expected ${NB * (EVENTS + 1)}`);
  }

  // ------------------------------------------------------------ bare floor
  // The same backlog through bare-pipeline.ts (durable consumers of its own; the streams keep
  // every message for the service): fetch + ack alone, then fetch + Kafka + ack. What the service
  // adds on top (decoding, join, Avro, transactions, bookkeeping) is the difference.
  const bareTopic = `bench-bare-${runId}`;
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic: bareTopic, numPartitions: 6 }] });
  const runBare = async (withKafka: boolean): Promise<Record<string, number | null> | null> => {
    if (NB === 0) return null;
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./bare-pipeline.ts', import.meta.url))], {
      env: {
        ...process.env,
        BARE_NATS_URL: natsUrl as string,
        BARE_KAFKA_BROKERS: kafkaBrokers.join(','),
        BARE_STREAMS: `${decStream},${lcStream}`,
        BARE_MESSAGES: String(NB * (EVENTS + 1)),
        BARE_DURABLE: `bare-${withKafka ? 'kafka' : 'nats'}-${runId}`,
        BARE_KAFKA: withKafka ? '1' : '0',
        BARE_TOPIC: bareTopic,
        BARE_OUTCOME_BYTES: String(outcomeSized.length),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
    const b0 = brokerCpu();
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    const b1 = brokerCpu();
    const line = out.trim().split('\n').pop() ?? '';
    if (code !== 0 || !line.startsWith('{')) {
      say(`bare pipeline (${withKafka ? 'with Kafka' : 'NATS only'}) failed: exit ${code}`);
      return null;
    }
    const r = JSON.parse(line) as Record<string, number | null>;
    // Broker CPU over the child's whole life (its set-up and tear-down included: an upper bound).
    const per = withKafka ? (r.records ?? 0) : (r.messages ?? 0);
    r.nats_cpu_us = Math.round((b1.nats - b0.nats) / Math.max(1, per));
    r.kafka_cpu_us = withKafka ? Math.round((b1.kafka - b0.kafka) / Math.max(1, per)) : null;
    return r;
  };
  const bareNats = await runBare(false);
  if (bareNats) say(`floor, NATS only (fetch + ack, no Kafka): ${bareNats.messages_per_s} messages/s; CPU per message: pipeline ${bareNats.cpu_us_per_message} µs, nats-server ${bareNats.nats_cpu_us} µs`);
  const bareKafka = await runBare(true);
  if (bareKafka)
    say(
      `floor, bare pipeline (fetch → kafkajs idempotent produce → ack, no decode/join/Avro/transactions): ${bareKafka.records_per_s} records/s (${bareKafka.messages_per_s} messages/s); ` +
        `CPU per record: pipeline ${bareKafka.cpu_us_per_record} µs, nats-server ${bareKafka.nats_cpu_us} µs, Kafka broker ${bareKafka.kafka_cpu_us} µs`,
    );

  // ------------------------------------------------------------------ reader
  // read_committed consumers on both topics, started before the service.
  const tag = `bench-${runId}`;
  const topics = { decisions: `${tag}.decisions`, outcomes: `${tag}.outcomes`, deadLetter: `${tag}.dlq`, progress: `${tag}.progress` };
  const seenOutcome = new Uint8Array(N);
  const seenDecision = new Uint8Array(N);
  const lags: number[] = [];
  let backlogSeen = 0;
  let liveSeen = 0;
  let dupOutcomes = 0;
  let dupDecisions = 0;
  let backlogDoneAt = 0;
  let firstLiveVisible = 0;
  let lastLiveVisible = 0;
  const consumer = kafka.consumer({ groupId: `bench-reader-${runId}`, readUncommitted: false, maxWaitTimeInMs: 50, maxBytes: 32 * 1024 * 1024 });
  await consumer.connect();
  // Created here, as the service would (same partitions and settings), so the
  // reader's group is settled before the first record.
  const topicConfig = [
    { name: 'retention.ms', value: String(30 * 24 * 3600_000) },
    { name: 'max.message.bytes', value: String(16 * 1024 * 1024) },
  ];
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: topics.decisions, numPartitions: 6, configEntries: topicConfig },
      { topic: topics.outcomes, numPartitions: 6, configEntries: topicConfig },
    ],
  });
  await consumer.subscribe({ topics: [topics.outcomes, topics.decisions], fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      const now = performance.now();
      const isOutcome = batch.topic === topics.outcomes;
      const seen = isOutcome ? seenOutcome : seenDecision;
      for (const m of batch.messages) {
        const i = Number(m.key?.toString('latin1').slice(1) ?? -1);
        if (!(i >= 0 && i < N)) continue;
        if (seen[i] === 1) {
          if (isOutcome) dupOutcomes++;
          else dupDecisions++;
          continue;
        }
        seen[i] = 1;
        if (i < NB) {
          if (++backlogSeen === 2 * NB) backlogDoneAt = now;
        } else {
          liveSeen++;
          if (firstLiveVisible === 0) firstLiveVisible = now;
          lastLiveVisible = now;
          if (isOutcome) lags.push(now - (lastPub[i] as number));
        }
      }
    },
  });
  await sleep(2_000); // group join

  // ----------------------------------------------------------------- service
  const httpPort = await freePort();
  const env: Record<string, string> = {
    VANTAGE_NATS_URL: nats,
    VANTAGE_KAFKA_BROKERS: kafkaBrokers.join(','),
    VANTAGE_LOG_LEVEL: 'warn',
    VANTAGE_HTTP_PORT: String(httpPort),
    VANTAGE_OUTCOME_NATS_DECISIONS_STREAM: decStream,
    VANTAGE_OUTCOME_NATS_DECISIONS_SUBJECT: decSubject,
    VANTAGE_OUTCOME_NATS_LIFECYCLE_STREAM: lcStream,
    VANTAGE_OUTCOME_NATS_LIFECYCLE_SUBJECT: `bench.${runId}.lifecycle.>`,
    VANTAGE_OUTCOME_TOPICS_DECISIONS: topics.decisions,
    VANTAGE_OUTCOME_TOPICS_OUTCOMES: topics.outcomes,
    VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: topics.deadLetter,
    VANTAGE_OUTCOME_TOPICS_PROGRESS: topics.progress,
    VANTAGE_OUTCOME_TRANSACTIONAL_ID: `bench-${runId}`,
  };
  const profDir = args.prof === undefined ? undefined : resolve(args.prof);
  const svc = spawn(process.execPath, [...(profDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profDir}`]), '--import', 'tsx', fileURLToPath(new URL('../src/main.ts', import.meta.url))], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  mkdirSync(join(INFRA_DIR, 'bench'), { recursive: true });
  const svcLog = join(INFRA_DIR, 'bench', `outcome-${runId}.log`);
  svc.stdout?.pipe(createWriteStream(svcLog));
  say(`service log: ${svcLog}${profDir === undefined ? '' : `; cpu profile in ${profDir} at exit`}`);
  const stopService = async (): Promise<void> => {
    if (svc.exitCode !== null || svc.signalCode !== null) return;
    svc.kill('SIGTERM');
    await new Promise((r) => svc.once('exit', r));
  };
  stops.unshift(stopService);
  const tStart = performance.now();
  for (let i = 0; ; i++) {
    const ok = await fetch(`http://127.0.0.1:${httpPort}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (i > 1800 || svc.exitCode !== null) throw new Error(`service did not become healthy (exit code ${svc.exitCode}); see ${svcLog}`);
    await sleep(50);
  }
  const tHealthy = performance.now();
  say(`service healthy after ${Math.round(tHealthy - tStart)} ms`);
  const metric = async (re: RegExp): Promise<number | null> => {
    const text = await fetch(`http://127.0.0.1:${httpPort}/metrics`).then((r) => r.text(), () => '');
    let sum: number | null = null;
    for (const m of text.matchAll(re)) sum = (sum ?? 0) + Number(m[1]);
    return sum;
  };
  const CPU_RE = /^process_cpu_seconds_total(?:\{[^}]*\})? ([\d.e+-]+)/gm;
  const cpuAtHealthy = await metric(CPU_RE);
  const brokersAtHealthy = brokerCpu();
  const TXN_RE = /^vantage_outcome_kafka_transactions_total\{result="committed"[^}]*\} (\d+)/gm;

  // -------------------------------------------------------------- drain phase
  let drainSecs = NaN;
  let drainTxns: number | null = null;
  /** Service CPU (user + system) per record while draining: independent of what else runs on the machine. */
  let drainCpuUsPerRecord: number | null = null;
  /** nats-server's and the Kafka broker's CPU per record while draining (µs; NaN for brokers not started here). */
  let drainNatsCpu = NaN;
  let drainKafkaCpu = NaN;
  if (NB > 0) {
    const deadline = performance.now() + 300_000;
    while (backlogDoneAt === 0 && performance.now() < deadline) await sleep(50);
    drainSecs = ((backlogDoneAt === 0 ? performance.now() : backlogDoneAt) - tHealthy) / 1000;
    drainTxns = await metric(TXN_RE);
    const cpu = await metric(CPU_RE);
    if (cpu !== null && cpuAtHealthy !== null) drainCpuUsPerRecord = ((cpu - cpuAtHealthy) * 1e6) / Math.max(1, backlogSeen);
    const b = brokerCpu();
    drainNatsCpu = (b.nats - brokersAtHealthy.nats) / Math.max(1, backlogSeen);
    drainKafkaCpu = (b.kafka - brokersAtHealthy.kafka) / Math.max(1, backlogSeen);
    say(`drain: ${backlogSeen} of ${2 * NB} backlog records visible ${drainSecs.toFixed(1)} s after the service was healthy = ${Math.round(backlogSeen / drainSecs)} records/s, ${drainTxns ?? '?'} transactions`);
  }

  // --------------------------------------------------------------- live phase
  const tick = 10; // ms per publishing slot
  const perTick = RATE / (1000 / tick);
  const t0 = performance.now();
  let next = NB;
  let behindMs = 0;
  while (next < N) {
    const due = Math.min(N, NB + Math.floor(((performance.now() - t0) / tick + 1) * perTick));
    for (; next < due; next++) {
      const w = publishRequest(next);
      if (w !== undefined) await w;
    }
    const slotEnd = t0 + Math.ceil((performance.now() - t0 + 0.001) / tick) * tick;
    const wait = slotEnd - performance.now();
    if (wait > 0) await sleep(wait);
    else behindMs -= wait;
  }
  await pub.drain();
  const pubSecs = (performance.now() - t0) / 1000;
  say(`live: published ${NL} requests (${NL * (EVENTS + 1)} messages) in ${pubSecs.toFixed(1)} s (${Math.round(NL / pubSecs)} req/s offered of ${RATE}), ${pub.errors} error replies, ${pub.failed} failed`);
  const stored = await streamCounts();
  if (stored !== N * (EVENTS + 1)) say(`WARNING: streams hold ${stored} messages, expected ${N * (EVENTS + 1)}`);

  const deadline = performance.now() + 180_000;
  while ((liveSeen < 2 * NL || backlogSeen < 2 * NB) && performance.now() < deadline) await sleep(50);
  await sleep(3_000); // let any duplicate surface
  const liveSecs = (lastLiveVisible - t0) / 1000;
  const seenTotal = seenOutcome.reduce((a, b) => a + b, 0) + seenDecision.reduce((a, b) => a + b, 0);
  const lost = 2 * N - seenTotal;
  const duplicated = dupOutcomes + dupDecisions;
  const sorted = Float64Array.from(lags).sort();
  const txns = await metric(TXN_RE);

  await consumer.disconnect();
  await stopService();
  // Brokers given by NATS_URL / KAFKA_BROKERS outlive the run: remove what it made.
  await jsm.streams.delete(decStream).catch(() => {});
  await jsm.streams.delete(lcStream).catch(() => {});
  await Promise.all(pubConns.map((c) => c.close()));
  await admin.deleteTopics({ topics: [baseTopic, bareTopic, ...Object.values(topics)] }).catch(() => {});
  await admin.disconnect();
  const startedBrokers = stops.length > 1;
  for (const s of stops) await s().catch(() => {});
  if (startedBrokers) rmSync(dir, { recursive: true, force: true });

  const result = {
    requests: N,
    backlog_requests: NB,
    live_requests: NL,
    offered_req_per_s: RATE,
    events_per_request: EVENTS,
    records: seenTotal + duplicated,
    records_per_s: NL > 0 ? Math.round(liveSeen / liveSecs) : null,
    outcomes_per_s: NL > 0 ? Math.round(liveSeen / 2 / liveSecs) : null,
    lag_p50_ms: round1(pct(sorted, 50)),
    lag_p99_ms: round1(pct(sorted, 99)),
    lag_max_ms: round1(pct(sorted, 100)),
    drain_records_per_s: NB > 0 ? Math.round(backlogSeen / drainSecs) : null,
    drain_seconds: NB > 0 ? round1(drainSecs) : null,
    lost,
    duplicated,
    transactions: txns,
    drain_transactions: drainTxns,
    drain_service_cpu_us_per_record: drainCpuUsPerRecord === null ? null : Math.round(drainCpuUsPerRecord),
    drain_nats_cpu_us_per_record: Number.isFinite(drainNatsCpu) ? Math.round(drainNatsCpu) : null,
    drain_kafka_cpu_us_per_record: Number.isFinite(drainKafkaCpu) ? Math.round(drainKafkaCpu) : null,
    publisher_behind_ms: Math.round(behindMs),
    backlog_publish_msgs_per_s: Math.round(backlogPubRate),
    publish_connections: CONNECTIONS,
    baseline_records_per_s: Math.round(baselineRps),
    floor_records_per_s: bareKafka?.records_per_s ?? null,
    floor_cpu_us_per_record: bareKafka?.cpu_us_per_record ?? null,
    floor_nats_only_messages_per_s: bareNats?.messages_per_s ?? null,
    floor_nats_only_cpu_us_per_message: bareNats?.cpu_us_per_message ?? null,
    floor_nats_cpu_us_per_record: bareKafka?.nats_cpu_us ?? null,
    floor_kafka_cpu_us_per_record: bareKafka?.kafka_cpu_us ?? null,
    publish_cpu_us_per_message: Number.isFinite(pubCpuPerMsg) ? round1(pubCpuPerMsg) : null,
    publish_nats_cpu_us_per_message: Number.isFinite(pubNatsCpuPerMsg) ? round1(pubNatsCpuPerMsg) : null,
  };
  // What the machine's cores could carry at most, from the CPU each live record needs of every
  // process (floor pipeline, its brokers, and publishing its (EVENTS + 1) / 2 messages), were all
  // of them perfectly parallel and nothing else running.
  const floorTotal =
    (result.floor_cpu_us_per_record ?? NaN) +
    (result.floor_nats_cpu_us_per_record ?? NaN) +
    (result.floor_kafka_cpu_us_per_record ?? NaN) +
    ((EVENTS + 1) / 2) * ((result.publish_cpu_us_per_message ?? NaN) + (result.publish_nats_cpu_us_per_message ?? NaN));
  const cores = availableParallelism();
  Object.assign(result, {
    floor_live_cpu_us_per_record: Number.isFinite(floorTotal) ? Math.round(floorTotal) : null,
    floor_live_max_records_per_s: Number.isFinite(floorTotal) ? Math.round((cores * 1e6) / floorTotal) : null,
    cores,
  });
  say(
    `drain: ${result.drain_records_per_s ?? '-'} records/s (backlog of ${2 * NB} records); CPU per record: service ${result.drain_service_cpu_us_per_record ?? '-'} µs, ` +
      `nats-server ${result.drain_nats_cpu_us_per_record ?? '-'} µs, Kafka broker ${result.drain_kafka_cpu_us_per_record ?? '-'} µs`,
  );
  say(`live: ${liveSeen} records in ${liveSecs.toFixed(1)} s = ${result.records_per_s} records/s (${result.outcomes_per_s} outcomes/s) at ${RATE} req/s offered; lag p50 ${result.lag_p50_ms} ms, p99 ${result.lag_p99_ms} ms`);
  say(`lost ${lost}, duplicated ${duplicated} (both phases, read back read_committed)`);
  say(`baseline: ${result.baseline_records_per_s} records/s (bare producer, no NATS/join/transactions)`);
  if (Number.isFinite(floorTotal))
    say(
      `floor, live: ${Math.round(floorTotal)} µs of CPU per record over all processes (bare pipeline, brokers, publishing) → at most ${Math.round((cores * 1e6) / floorTotal)} records/s on ${cores} cores`,
    );
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

main().catch((e: unknown) => {
  process.stderr.write(`outcome-bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
