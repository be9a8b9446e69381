/**
 * The floor under the outcome service: the least a JetStream → Kafka pipeline with "ack NATS only
 * after Kafka acknowledged" can do on this machine, with the same client libraries the service
 * uses. Run by `outcome-bench.ts` (as a child process, like the service) over the same backlog.
 *
 *   node --import tsx services/outcome/bench/bare-pipeline.ts   (configured by BARE_* variables)
 *
 * It pulls both streams through durable consumers of its own (explicit ack, same fetch batch as
 * the service), writes one Kafka record per decision message (its bytes) and one per `done`
 * lifecycle message (a record of the outcome's size), with a kafkajs idempotent producer (acks
 * all, one request in flight: the service's producer settings), and acknowledges every NATS
 * message once the produce request holding its batch was acknowledged. No decoding, no join, no
 * Avro, no transactions, no dead letters, no leadership: everything the service adds to it.
 * `BARE_KAFKA=0` leaves Kafka out (fetch and ack only), to separate the NATS half.
 *
 * Prints one JSON line when BARE_MESSAGES messages were acknowledged: records_per_s (first
 * message received → last ack sent), messages_per_s, cpu_us_per_record (user + system).
 */
import { performance } from 'node:perf_hooks';
import { AckPolicy, jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import kafkajs from 'kafkajs';
import { SEND_CHUNK_RECORDS } from '../src/batch';

process.env['KAFKAJS_NO_PARTITIONER_WARNING'] = '1';
const { Kafka, logLevel } = kafkajs;

const env = (k: string): string => {
  const v = process.env[k];
  if (v === undefined || v === '') throw new Error(`${k} is not set`);
  return v;
};
const NATS = env('BARE_NATS_URL');
const STREAMS = env('BARE_STREAMS').split(',');
const EXPECTED = Number(env('BARE_MESSAGES'));
const DURABLE = env('BARE_DURABLE');
const WITH_KAFKA = process.env['BARE_KAFKA'] !== '0';
/** Messages per pull request (the service's default `fetchBatch`). */
const FETCH_BATCH = 2_000;
const BATCH = 5_000;
const DONE = Buffer.from('"kind":"done"');

const nc = await connect({ servers: NATS });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);
for (const s of STREAMS) await jsm.consumers.add(s, { durable_name: DURABLE, ack_policy: AckPolicy.Explicit, max_ack_pending: 100_000 });

const kafka = WITH_KAFKA ? new Kafka({ brokers: env('BARE_KAFKA_BROKERS').split(','), clientId: 'bare-pipeline', logLevel: logLevel.NOTHING }) : null;
const producer = kafka?.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false }) ?? null;
await producer?.connect();
const topic = WITH_KAFKA ? env('BARE_TOPIC') : '';
const outcomeValue = Buffer.alloc(Number(process.env['BARE_OUTCOME_BYTES'] ?? 800), 1);

const inbox: JsMsg[] = [];
let wake: (() => void) | null = null;
let firstAt = 0;
let acked = 0;
let records = 0;
let stopping = false;
const c0 = process.cpuUsage();

/** A delivered message into the inbox, waking the processing loop. */
const received = (m: JsMsg): void => {
  if (firstAt === 0) firstAt = performance.now();
  inbox.push(m);
  if (wake !== null) {
    const w = wake;
    wake = null;
    w();
  }
};

const fetchLoop = async (stream: string): Promise<void> => {
  const consumer = await js.consumers.get(stream, DURABLE);
  while (!stopping) {
    if (inbox.length >= 4 * FETCH_BATCH) {
      await new Promise((r) => setTimeout(r, 2));
      continue;
    }
    const iter = await consumer.fetch({ max_messages: FETCH_BATCH, expires: 1_000 });
    for await (const m of iter) received(m);
  }
};

const processLoop = async (): Promise<void> => {
  while (acked < EXPECTED) {
    if (inbox.length === 0) {
      await new Promise<void>((r) => (wake = r));
      continue;
    }
    // Let a batch gather (at most 2 ms), so acknowledgements go out many per socket write.
    if (inbox.length < 1_000) await new Promise((r) => setTimeout(r, 2));
    const batch = inbox.splice(0, BATCH);
    if (producer !== null) {
      const messages: { key: Buffer | null; value: Buffer }[] = [];
      for (const m of batch) {
        const d = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
        if (d[0] === 0xc3) messages.push({ key: null, value: d });
        else if (d.indexOf(DONE) >= 0) messages.push({ key: null, value: outcomeValue });
      }
      // Produce requests no larger than the service's (see SEND_CHUNK_RECORDS).
      for (let i = 0; i < messages.length; i += SEND_CHUNK_RECORDS) await producer.send({ topic, acks: -1, messages: messages.slice(i, i + SEND_CHUNK_RECORDS) });
      records += messages.length;
    }
    for (const m of batch) m.ack();
    acked += batch.length;
  }
};

// (A pull ended by the consumers' deletion at the end is not an error.)
for (const s of STREAMS) void fetchLoop(s).catch((e: unknown) => stopping || process.stderr.write(`fetch ${s}: ${String(e)}\n`));
await processLoop();
await nc.flush();
const secs = (performance.now() - firstAt) / 1000;
const cpu = process.cpuUsage(c0);
stopping = true;
process.stdout.write(
  `${JSON.stringify({
    messages: acked,
    records,
    seconds: Math.round(secs * 100) / 100,
    messages_per_s: Math.round(acked / secs),
    records_per_s: WITH_KAFKA ? Math.round(records / secs) : null,
    cpu_us_per_message: Math.round((cpu.user + cpu.system) / acked),
    cpu_us_per_record: WITH_KAFKA && records > 0 ? Math.round((cpu.user + cpu.system) / records) : null,
  })}\n`,
);
await producer?.disconnect();
for (const s of STREAMS) await jsm.consumers.delete(s, DURABLE).catch(() => {});
await nc.close();
process.exit(0);
