// The offline study's outcome records through a real Kafka broker and back: written as the outcome
// service writes them (Avro single-object encoding, keyed by session), read back by `vantage replay`,
// fitted by `vantage fit`'s parse and fitAll. The parameter sets are byte-identical to the ones fitted
// from the offline rows directly.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import kafkajs from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { calibrationPlan } from '@vantage/evaluation';
import { encodeSingleObject, OUTCOME_RECORD_CURRENT } from '@vantage/records';
import { serializeParameterSet, VARIANTS } from '@vantage/rules';
import { DEFAULT_FLEET, fitFromRows, runCalibrationOffline } from '@vantage/study';
import { kafkaBrokers, uniqueName } from '@vantage/testkit';
import { run as cli, type CliIo } from '../src/index';

const { Kafka, logLevel } = kafkajs;

function io(): CliIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    readStdin: () => Promise.resolve(new Uint8Array()),
    readFile: (p) => Promise.resolve(new Uint8Array(readFileSync(p))),
  };
}

describe('offline study rows round-tripped through Kafka', () => {
  const dir = mkdtempSync(join(tmpdir(), 'study-kafka-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('fit gives byte-identical parameter sets from the offline rows and from the rows read back from Kafka', async () => {
    const plan = calibrationPlan({ preset: 'tiny', seed: 1, blockSize: 64, destinationLimit: 8 });
    const cal = runCalibrationOffline({ plan, fleet: DEFAULT_FLEET });
    expect(cal.outcomes.length).toBe(cal.rows.length);
    const topic = uniqueName('study-outcomes');
    const kafka = new Kafka({ clientId: uniqueName('study'), brokers: kafkaBrokers(), logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
    await admin.disconnect();
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    await producer.send({
      topic,
      acks: -1,
      messages: cal.outcomes.map((r) => ({ key: r.sessionId ?? r.requestId, value: Buffer.from(encodeSingleObject(OUTCOME_RECORD_CURRENT, r)) })),
    });
    await producer.disconnect();

    const file = join(dir, 'outcomes.jsonl');
    const x = io();
    expect(await cli(['replay', '--brokers', kafkaBrokers().join(','), '--topic', topic, '--from-beginning', '--format', 'jsonl', '--kind', 'outcome', '--out', file], x), x.err.join('')).toBe(0);
    const back = readFileSync(file, 'utf8');
    expect(back.trim().split('\n')).toHaveLength(cal.rows.length);

    const direct = fitFromRows(cal.rows, 1, 8);
    const viaKafka = fitFromRows(back, 1, 8);
    expect(serializeParameterSet(viaKafka.parameterSet)).toBe(serializeParameterSet(direct.parameterSet));
    for (const v of VARIANTS) expect(serializeParameterSet(viaKafka.variants[v]), v).toBe(serializeParameterSet(direct.variants[v]));
    // Kafka gives no order across partitions: the equality above holds because fitting orders its input.
    expect(direct.parameterSet.version).toMatch(/^20260101T000000Z-/);
  });
});
