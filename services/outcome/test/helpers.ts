// Shared pieces of the outcome service's integration tests: record fixtures,
// JetStream publishing, reading a Kafka topic back (read_committed, up to the
// end offsets at call time), and running the service in-process or as a child.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import kafkajs from 'kafkajs';
import type { IHeaders } from 'kafkajs';
import { decodeSingleObject, encodeSingleObject, DECISION_RECORD_CURRENT, DECISION_REGISTRY, OUTCOME_REGISTRY, type DecisionRecord, type OutcomeRecord } from '@vantage/records';
import { runService, type RunningService } from '@vantage/runtime';
import { eventually } from '@vantage/testkit';
import { expect } from 'vitest';
import { outcomeConfigSchema, startOutcome, type OutcomeConfigShape, type OutcomeService } from '../src/index';

process.env['KAFKAJS_NO_PARTITIONER_WARNING'] = '1';
const { Kafka, logLevel } = kafkajs;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

export interface Names {
  decisionsStream: string;
  decisionsSubject: string;
  lifecycleStream: string;
  lifecyclePrefix: string;
  durable: string;
  topics: { decisions: string; outcomes: string; deadLetter: string; progress: string };
}

export function names(tag: string): Names {
  const id = `${tag}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const up = id.replace(/[^A-Za-z0-9]/g, '_').toUpperCase();
  return {
    decisionsStream: `D_${up}`,
    decisionsSubject: `t.${id}.decisions`,
    lifecycleStream: `L_${up}`,
    lifecyclePrefix: `t.${id}.lifecycle`,
    durable: 'outcome',
    topics: { decisions: `${id}.decisions`, outcomes: `${id}.outcomes`, deadLetter: `${id}.dlq`, progress: `${id}.progress` },
  };
}

export function serviceEnv(n: Names, nats: string, kafka: string, over: Record<string, string> = {}): Record<string, string> {
  return {
    VANTAGE_NATS_URL: nats,
    VANTAGE_KAFKA_BROKERS: kafka,
    VANTAGE_NATS_RECONNECT_TIME_WAIT_MS: '200',
    VANTAGE_NATS_RECONNECT_JITTER_MS: '0',
    VANTAGE_KAFKA_RETRIES: '3',
    VANTAGE_KAFKA_REQUEST_TIMEOUT_MS: '5000',
    VANTAGE_LOG_LEVEL: 'warn',
    VANTAGE_HTTP_PORT: '0',
    // Every test makes its own pair of streams on the shared nats-server, which reserves each stream's
    // max_bytes from its JetStream storage: the 8 GiB default would exhaust it after a few files.
    VANTAGE_OUTCOME_NATS_STREAM_MAX_BYTES: String(256 * 1024 ** 2),
    VANTAGE_OUTCOME_NATS_DECISIONS_STREAM: n.decisionsStream,
    VANTAGE_OUTCOME_NATS_DECISIONS_SUBJECT: n.decisionsSubject,
    VANTAGE_OUTCOME_NATS_LIFECYCLE_STREAM: n.lifecycleStream,
    VANTAGE_OUTCOME_NATS_LIFECYCLE_SUBJECT: `${n.lifecyclePrefix}.>`,
    VANTAGE_OUTCOME_TOPICS_DECISIONS: n.topics.decisions,
    VANTAGE_OUTCOME_TOPICS_OUTCOMES: n.topics.outcomes,
    VANTAGE_OUTCOME_TOPICS_DEAD_LETTER: n.topics.deadLetter,
    VANTAGE_OUTCOME_TOPICS_PROGRESS: n.topics.progress,
    VANTAGE_OUTCOME_TOPICS_PARTITIONS: '3',
    VANTAGE_OUTCOME_TRANSACTIONAL_ID: `txn-${n.decisionsStream}`,
    VANTAGE_OUTCOME_TRANSACTION_TIMEOUT_MS: '10000',
    VANTAGE_OUTCOME_JOIN_WINDOW_MS: '5000',
    VANTAGE_OUTCOME_TERMINAL_GRACE_MS: '200',
    VANTAGE_OUTCOME_NATS_ACK_WAIT_MS: '20000',
    VANTAGE_SHUTDOWN_DEADLINE_MS: '8000',
    ...over,
  };
}

export function decision(i: number, tag: string, over: Partial<DecisionRecord> = {}): DecisionRecord {
  return {
    recordId: `d-${tag}-${i}`,
    requestId: `r-${tag}-${i}`,
    sessionId: `s-${tag}-${i % 7}`,
    timestampMs: 1_732_000_000_000 + i * 10,
    parameterSetVersion: 'ps-test.1',
    variant: 'baseline',
    stageProposal: { model: 'small', role: 'efficient' },
    finalChoice: { model: 'small', role: 'efficient' },
    reason: 'baseline',
    detail: null,
    couldAct: false,
    triggered: false,
    gate: null,
    observations: [],
    predictions: [],
    advantageMs: null,
    chosenWorkerId: null,
    chosenDpRank: null,
    endpoint: null,
    observeDurationUs: null,
    decisionDurationUs: 1_500,
    decisionInstanceId: 'decision-test',
    background: false,
    ...over,
  };
}

export function lifecycle(d: DecisionRecord, kind: string, dtMs: number, pool = 'small', extra: Record<string, unknown> = {}): Uint8Array {
  return Buffer.from(JSON.stringify({ v: 1, requestId: d.requestId, sessionId: d.sessionId, pool, kind, atMs: d.timestampMs + dtMs, ...extra }));
}

export class Publisher {
  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
    readonly n: Names,
  ) {}
  static async open(url: string, n: Names): Promise<Publisher> {
    const nc = await connect({ servers: url, reconnectTimeWait: 200, maxReconnectAttempts: -1 });
    return new Publisher(nc, jetstream(nc), n);
  }
  /** JetStream publish with retries: a broker restart in the middle must not lose or reorder a test's input. */
  async pub(subject: string, data: Uint8Array): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        // msgID makes a retried publish idempotent within the stream's duplicate window.
        await this.js.publish(subject, data, { msgID: `${hash(data)}-${data.length}` });
        return;
      } catch (e) {
        if (attempt > 200) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
  async decision(d: DecisionRecord): Promise<void> {
    await this.pub(this.n.decisionsSubject, encodeSingleObject(DECISION_RECORD_CURRENT, d));
  }
  async event(d: DecisionRecord, kind: string, dtMs: number, pool = 'small', extra: Record<string, unknown> = {}): Promise<void> {
    await this.pub(`${this.n.lifecyclePrefix}.${pool}`, lifecycle(d, kind, dtMs, pool, extra));
  }
  /** Decision, first token, done with usage: one complete request. */
  async request(d: DecisionRecord): Promise<void> {
    await this.decision(d);
    await this.event(d, 'first_token', 120);
    await this.event(d, 'done', 900, 'small', { usage: { inputTokens: 1000, outputTokens: 50, cachedTokens: 600 } });
  }
  /** Complete requests, `per100ms` at a time every 100 ms (slower if publishing lags); `progress` gets the count published so far. */
  async paced(ds: DecisionRecord[], per100ms: number, progress: (published: number) => void): Promise<void> {
    for (let i = 0; i < ds.length; i += per100ms) {
      const t = Date.now();
      await Promise.all(ds.slice(i, i + per100ms).map((d) => this.request(d)));
      progress(Math.min(ds.length, i + per100ms));
      await sleep(Math.max(0, 100 - (Date.now() - t)));
    }
  }
  async close(): Promise<void> {
    await this.nc.close();
  }
}

function hash(b: Uint8Array): string {
  let h = 2166136261;
  for (const x of b) h = Math.imul(h ^ x, 16777619) >>> 0;
  return h.toString(16);
}

export function countBy<T>(xs: T[], key: (x: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of xs) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
  return m;
}

/** Outcome records read back from Kafka, decoded; a record that does not decode fails the test. */
export function decodeOutcomes(rs: { value: Buffer | null }[]): OutcomeRecord[] {
  return rs.map((r) => {
    const d = decodeSingleObject(r.value ?? Buffer.alloc(0), OUTCOME_REGISTRY);
    if (!d.ok) throw new Error(`${d.code}: ${d.reason}`);
    return d.value;
  });
}

/** Record ids of decision records read back from Kafka; a record that does not decode fails the test. */
export function decodeDecisionIds(rs: { value: Buffer | null }[]): string[] {
  return rs.map((r) => {
    const d = decodeSingleObject(r.value ?? Buffer.alloc(0), DECISION_REGISTRY);
    if (!d.ok) throw new Error(`${d.code}: ${d.reason}`);
    return d.value.recordId;
  });
}

/**
 * Exactly once after failures: all `count` outcomes arrive; after `lateMs` of late redeliveries (ack
 * wait) every request id is in the outcomes topic once and completed (every request's decision and
 * lifecycle were published, so every join completes), every decision once in the decisions topic,
 * all read_committed; the dead letters are late joins only. `label` names the run in the statuses
 * line on stderr. Resolves with the dead letters.
 */
export async function expectEachOnce(brokers: string, n: Names, count: number, lateMs: number, label: string): Promise<RawRecord[]> {
  let outcomes: OutcomeRecord[] = [];
  await eventually('all outcomes', async () => (outcomes = decodeOutcomes(await readTopic(brokers, n.topics.outcomes))).length >= count, 180_000, 1_000);
  await sleep(lateMs);
  outcomes = decodeOutcomes(await readTopic(brokers, n.topics.outcomes));
  const perRequest = countBy(outcomes, (o) => o.requestId);
  expect([...perRequest].filter(([, c]) => c > 1)).toEqual([]);
  expect(perRequest.size).toBe(count);
  const statuses = countBy(outcomes, (o) => o.status);
  process.stderr.write(`[${label}] outcome statuses: ${JSON.stringify(Object.fromEntries(statuses))}\n`);
  expect(Object.fromEntries(statuses)).toEqual({ completed: count });

  const decisions = decodeDecisionIds(await readTopic(brokers, n.topics.decisions));
  const perDecision = countBy(decisions, (x) => x);
  expect([...perDecision].filter(([, c]) => c > 1)).toEqual([]);
  expect(perDecision.size).toBe(count);
  const dlq = await readTopic(brokers, n.topics.deadLetter);
  expect(dlq.filter((r) => r.headers['vantage-dlq-reason'] !== 'JOIN_LATE')).toEqual([]);
  return dlq;
}

export interface RawRecord {
  partition: number;
  offset: string;
  key: string | null;
  value: Buffer | null;
  headers: Record<string, string>;
  timestampMs: number;
}

function headersOf(h: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h ?? {})) if (v !== undefined) out[k] = Buffer.isBuffer(v) ? v.toString('utf8') : String(v as unknown as string);
  return out;
}

/** Every committed record of `topic` up to the end offsets now (read_committed). */
export async function readTopic(brokers: string, topic: string, timeoutMs = 60_000): Promise<RawRecord[]> {
  const kafka = new Kafka({ brokers: brokers.split(','), clientId: 'outcome-test-reader', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const ends = new Map(offsets.map((p) => [p.partition, BigInt(p.high)]));
  const open = new Set(offsets.filter((p) => BigInt(p.high) > BigInt(p.low)).map((p) => p.partition));
  const out: RawRecord[] = [];
  if (open.size === 0) return out;
  const consumer = kafka.consumer({ groupId: `reader-${randomBytes(6).toString('hex')}`, readUncommitted: false, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
    const { partition, lastOffset } = e.payload as unknown as { partition: number; lastOffset: string };
    if (BigInt(lastOffset) + 1n >= (ends.get(partition) ?? 0n) && open.delete(partition) && open.size === 0) finish();
  });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      if (BigInt(message.offset) >= (ends.get(partition) ?? 0n)) return;
      out.push({
        partition,
        offset: message.offset,
        key: message.key?.toString('utf8') ?? null,
        value: message.value,
        headers: headersOf(message.headers),
        timestampMs: Number(message.timestamp),
      });
    },
  });
  const timer = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`reading ${topic} timed out; ${out.length} read`)), timeoutMs));
  try {
    await Promise.race([done, timer]);
  } finally {
    await consumer.disconnect();
  }
  return out;
}

/** The service in this process (tests that read its metrics). */
export async function inProcess(env: Record<string, string>): Promise<{ svc: RunningService<OutcomeConfigShape, true>; outcome: OutcomeService }> {
  let outcome!: OutcomeService;
  const svc = await runService<OutcomeConfigShape, true>({
    name: 'outcome',
    schema: outcomeConfigSchema,
    kafka: true,
    env,
    exit: () => {},
    signals: [],
    processHandlers: false,
    start: async (ctx) => {
      outcome = await startOutcome(ctx);
    },
  });
  return { svc, outcome };
}

/** The service as a child process (`node --import tsx`), so a test can kill -9 it. Logs go to `logFile`. */
export function child(env: Record<string, string>, logFile: string): ChildProcess {
  const p = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = createWriteStream(logFile, { flags: 'a' });
  p.stdout?.pipe(log);
  p.stderr?.pipe(log);
  return p;
}

export async function waitExit(p: ChildProcess): Promise<number | null> {
  if (p.exitCode !== null || p.signalCode !== null) return p.exitCode;
  return new Promise((r) => p.once('exit', (code) => r(code)));
}
