/**
 * `vantage replay`: read a Kafka topic written by the outcome service
 * (read_committed) from the beginning or a time range, up to the end offsets
 * captured at start, and write every record as JSON Lines or CSV for the
 * fitting and analysis tools. Exits by itself.
 *
 * Records are decoded with the records registries (any shipped writer
 * version, resolved to the current shape); dead letters (recognised by their
 * `vantage-dlq-reason` header) are dumped as JSON with the reason and the
 * original bytes in base64.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import kafkajs from 'kafkajs';
import type { Consumer, EachBatchPayload } from 'kafkajs';
import {
  csvHeader,
  decodeSingleObject,
  DECISION_CSV_COLUMNS,
  DECISION_REGISTRY,
  OUTCOME_CSV_COLUMNS,
  OUTCOME_REGISTRY,
  toCsvLine,
  toJsonRow,
  type JsonRow,
} from '@vantage/records';
import { kafkaClientConfig, kafkaConnectError, redactUrl, toolSettings } from '@vantage/runtime';
import { choice, parseOptions, required } from '../args';
import { EXIT, InputError, UsageError } from '../exit-codes';
import type { CliIo } from '../io';

process.env['KAFKAJS_NO_PARTITIONER_WARNING'] ??= '1';
const { Kafka, logLevel } = kafkajs;

const FORMATS = ['jsonl', 'csv'] as const;
const KINDS = ['auto', 'outcome', 'decision', 'deadletter'] as const;
type Kind = (typeof KINDS)[number];
type RecordKind = Exclude<Kind, 'auto'>;

const DLQ_COLUMNS = ['reason', 'detail', 'subject', 'stream', 'seq', 'originalBytes', 'truncated', 'partition', 'offset', 'timestampMs', 'valueBase64'] as const;

export const name = 'replay';
export const summary = 'Dump a Kafka records topic (read_committed) as JSON Lines or CSV';
export const help = `Usage: vantage replay --topic TOPIC [--brokers HOST:PORT[,...]] [--from-beginning | --since ISO [--until ISO]]
                      [--format jsonl|csv] [--kind auto|outcome|decision|deadletter] [--out FILE|-]

Read a Kafka topic (read_committed) up to the end offsets captured at start,
decode every record and write one row per record. Progress (records, rate, %
of the end offsets) goes to stderr, then a summary.

Options:
  --brokers LIST     bootstrap brokers (default $KAFKA_BROKERS or 127.0.0.1:9092)
  --topic TOPIC      topic to read (required)
  --from-beginning   read from the earliest retained offset (the default without --since)
  --since ISO        start at the first record with a timestamp at or after this instant
  --until ISO        skip records with a timestamp after this instant
  --format FORMAT    jsonl (default) or csv (columns fixed by the record schema)
  --kind KIND        auto (default: per record, by header and fingerprint), outcome, decision, deadletter
  --out FILE         output file, or - for stdout (default -)
  -h, --help         this help

Secured brokers: the same kafka.* settings as the services, from VANTAGE_KAFKA_*
variables (secrets from files, never from the command line):
VANTAGE_KAFKA_SSL_ENABLED, VANTAGE_KAFKA_SSL_CA_FILE, VANTAGE_KAFKA_SSL_CERT_FILE,
VANTAGE_KAFKA_SSL_KEY_FILE, VANTAGE_KAFKA_SASL_MECHANISM (plain, scram-sha-256,
scram-sha-512), VANTAGE_KAFKA_SASL_USERNAME, VANTAGE_KAFKA_SASL_PASSWORD_FILE.

Exit codes: 0 read to the end, 1 Kafka failure, 64 bad arguments.
`;

interface Decoded {
  kind: RecordKind | 'undecodable';
  row: JsonRow;
}

function header(h: Record<string, unknown> | undefined, k: string): string | null {
  const v = h?.[k];
  if (v === undefined || v === null) return null;
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(v as string);
}

function decodeRecord(kind: Kind, m: { value: Buffer | null; headers?: Record<string, unknown>; offset: string; timestamp: string }, partition: number): Decoded {
  const reason = header(m.headers, 'vantage-dlq-reason');
  if (kind === 'deadletter' || (kind === 'auto' && reason !== null)) {
    return {
      kind: 'deadletter',
      row: {
        reason,
        detail: header(m.headers, 'vantage-dlq-detail'),
        subject: header(m.headers, 'vantage-source-subject'),
        stream: header(m.headers, 'vantage-source-stream'),
        seq: header(m.headers, 'vantage-source-seq'),
        originalBytes: header(m.headers, 'vantage-original-bytes'),
        truncated: header(m.headers, 'vantage-truncated') === 'true',
        partition,
        offset: m.offset,
        timestampMs: Number(m.timestamp),
        valueBase64: m.value?.toString('base64') ?? null,
      },
    };
  }
  const bytes = m.value ?? Buffer.alloc(0);
  const tries: RecordKind[] = kind === 'auto' ? ['outcome', 'decision'] : [kind];
  let why = '';
  for (const k of tries) {
    const r = k === 'outcome' ? decodeSingleObject(bytes, OUTCOME_REGISTRY) : decodeSingleObject(bytes, DECISION_REGISTRY);
    if (r.ok) return { kind: k, row: toJsonRow(r.value) };
    why = `${r.code}: ${r.reason}`;
  }
  return { kind: 'undecodable', row: { error: why, partition, offset: m.offset, valueBase64: m.value?.toString('base64') ?? null } };
}

const COLUMNS: Readonly<Record<RecordKind, readonly string[]>> = { outcome: OUTCOME_CSV_COLUMNS, decision: DECISION_CSV_COLUMNS, deadletter: DLQ_COLUMNS };

function parseInstant(name: string, v: string | boolean | undefined): number | undefined {
  if (v === undefined) return undefined;
  const t = typeof v === 'string' ? Date.parse(v) : NaN;
  if (!Number.isFinite(t)) throw new UsageError(`--${name} must be an ISO 8601 instant`);
  return t;
}

/** Writes with backpressure: a slow disk pauses the reader instead of growing memory. */
function sink(io: CliIo, path: string) {
  const stream = path === '-' ? null : createWriteStream(path);
  return {
    write: async (text: string): Promise<void> => {
      if (stream === null) io.stdout(text);
      else if (!stream.write(text)) await once(stream, 'drain');
    },
    close: (): Promise<void> => new Promise((resolve, reject) => (stream === null ? resolve() : stream.end((err?: Error | null) => (err ? reject(err) : resolve())))),
  };
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(argv, ['brokers', 'topic', 'since', 'until', 'format', 'kind', 'out'], ['from-beginning']);
  const topic = required('topic', values.topic);
  const since = parseInstant('since', values.since);
  const until = parseInstant('until', values.until);
  if (values['from-beginning'] === true && since !== undefined) throw new UsageError('--from-beginning and --since exclude each other');
  const format = choice('format', values.format, FORMATS, 'jsonl');
  const kind = choice('kind', values.kind, KINDS, 'auto');
  const brokers = (typeof values.brokers === 'string' ? values.brokers : (process.env['KAFKA_BROKERS'] ?? '127.0.0.1:9092')).split(',').filter((b) => b !== '');
  const out = typeof values.out === 'string' ? values.out : '-';

  let settings: ReturnType<typeof kafkaClientConfig>;
  try {
    // The services' kafka.* section (TLS, SASL with the password from its file); other VANTAGE_* variables are not ours.
    // Only VANTAGE_NATS_* and VANTAGE_KAFKA_* are read (no VANTAGE_CONFIG: a service's file has sections this tool does not know).
    const cfg = toolSettings(process.env, { kafka: { brokers, clientId: 'vantage-replay' } });
    // --brokers wins over VANTAGE_KAFKA_BROKERS, which wins over KAFKA_BROKERS.
    settings = kafkaClientConfig({ ...cfg.kafka, brokers: typeof values.brokers === 'string' ? brokers : cfg.kafka.brokers }, 'vantage-replay');
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const { summary: _summary, ...clientConfig } = settings;
  const kafka = new Kafka({ ...clientConfig, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  let consumer: Consumer | undefined;
  const output = sink(io, out);
  const t0 = Date.now();
  try {
    await admin.connect();
    const topics = await admin.listTopics();
    if (!topics.includes(topic)) throw new InputError(`topic ${topic} does not exist`, EXIT.NO_INPUT);
    // End offsets are fixed now: records written while we read are not ours to wait for.
    const offsets = await admin.fetchTopicOffsets(topic);
    const ends = new Map(offsets.map((p) => [p.partition, BigInt(p.high)]));
    const starts = new Map(
      since === undefined ? offsets.map((p) => [p.partition, BigInt(p.low)]) : (await admin.fetchTopicOffsetsByTimestamp(topic, since)).map((p) => [p.partition, BigInt(p.offset)]),
    );
    let total = 0n;
    const position = new Map<number, bigint>();
    const open = new Set<number>();
    for (const [p, end] of ends) {
      const s = starts.get(p) ?? end;
      position.set(p, s);
      if (s < end) {
        open.add(p);
        total += end - s;
      }
    }

    let records = 0;
    let skipped = 0;
    const byKind: Record<string, number> = {};
    let csvKind: RecordKind | undefined;
    const progress = (final: boolean): void => {
      let consumed = 0n;
      for (const [p, pos] of position) consumed += pos - (starts.get(p) ?? pos);
      const pct = total === 0n ? 100 : Number((consumed * 1000n) / total) / 10;
      const secs = (Date.now() - t0) / 1000;
      io.stderr(`\rreplay ${topic}: ${records} records, ${Math.round(records / Math.max(secs, 0.001))}/s, ${pct.toFixed(1)}% of end offsets${final ? '\n' : ''}`);
    };

    if (open.size > 0) {
      const groupId = `vantage-replay-${randomBytes(6).toString('hex')}`;
      consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs: 250 });
      // Start positions are committed for the fresh group before it joins:
      // kafkajs forgets a seek when it restarts a consumer after a broker error.
      await admin.setOffsets({ groupId, topic, partitions: [...starts].map(([partition, o]) => ({ partition, offset: o.toString() })) });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      let finish!: () => void;
      const finished = new Promise<void>((r) => (finish = r));
      const advance = (partition: number, next: bigint): void => {
        const cur = position.get(partition) ?? 0n;
        const end = ends.get(partition) ?? 0n;
        position.set(partition, next > end ? end : next > cur ? next : cur);
        if ((position.get(partition) ?? 0n) >= end && open.delete(partition) && open.size === 0) finish();
      };
      // Control records (transaction markers) and aborted records are never
      // handed to eachBatch, but kafkajs reports the offset it moved past.
      consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
        const { partition, lastOffset } = e.payload as unknown as { partition: number; lastOffset: string };
        advance(partition, BigInt(lastOffset) + 1n);
      });
      const timer = setInterval(() => progress(false), 500);
      await consumer.run({
        eachBatchAutoResolve: true,
        eachBatch: async ({ batch }: EachBatchPayload) => {
          const end = ends.get(batch.partition) ?? 0n;
          for (const m of batch.messages) {
            if (BigInt(m.offset) >= end) break;
            if (until !== undefined && Number(m.timestamp) > until) {
              skipped++;
              continue;
            }
            const d = decodeRecord(kind, m as unknown as Parameters<typeof decodeRecord>[1], batch.partition);
            byKind[d.kind] = (byKind[d.kind] ?? 0) + 1;
            if (format === 'jsonl') await output.write(`${JSON.stringify(d.row)}\n`);
            else if (d.kind !== 'undecodable') {
              if (csvKind === undefined) {
                csvKind = d.kind;
                await output.write(`${csvHeader(COLUMNS[csvKind])}\n`);
              }
              if (d.kind === csvKind) await output.write(`${toCsvLine(d.row, COLUMNS[csvKind])}\n`);
              else skipped++;
            } else skipped++;
            records++;
          }
        },
      });
      await finished;
      clearInterval(timer);
    }
    if (format === 'csv' && csvKind === undefined) await output.write(`${csvHeader(COLUMNS[kind === 'auto' ? 'outcome' : kind])}\n`);
    progress(true);
    const secs = (Date.now() - t0) / 1000;
    io.stderr(
      `replay ${topic}: done, ${records} records in ${secs.toFixed(1)} s (${Object.entries(byKind)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'}${skipped > 0 ? `; ${skipped} skipped` : ''})\n`,
    );
    return EXIT.OK;
  } catch (e) {
    if (e instanceof InputError || e instanceof UsageError) throw e;
    // Auth and TLS failures named as such (KAFKA_AUTH_FAILED, KAFKA_TLS_FAILED), URL user-info stripped.
    const err = kafkaConnectError('kafka failure', e, clientConfig.brokers as string[]);
    io.stderr(`vantage replay: ${err.code}: ${redactUrl(err.message)}\n`);
    return EXIT.INTERNAL;
  } finally {
    await consumer?.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
    await output.close().catch(() => {});
  }
}
