// `vantage decode` on messages Dynamo 1.6.1's mocker published (raw bytes captured from a real
// nats-server: packages/wire/test/fixtures), through the command and its library function.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { decodeCapturedMessage, EXIT, run, type CliIo } from '../src/index';
import { encodeRouterEventBatchMsgpack, encodeForwardPassMetrics } from '@vantage/wire/test/encode';
import type { WorkerId } from '@vantage/types';

const fixtures = (
  JSON.parse(readFileSync(fileURLToPath(new URL('../../wire/test/fixtures/dynamo-1.6.1-mocker.json', import.meta.url)), 'utf8')) as {
    messages: { name: string; subject: string; hex: string }[];
  }
).messages;

async function cli(argv: string[], stdin: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (t) => void (out += t),
    stderr: (t) => void (err += t),
    readStdin: () => Promise.resolve(new TextEncoder().encode(stdin)),
    readFile: () => Promise.reject(new Error('no files')),
  };
  const code = await run(argv, io);
  return { code, out, err };
}

describe('vantage decode on Dynamo 1.6.1 messages', () => {
  it('accepts every captured message, kv-events batches and forward-pass metrics included', async () => {
    for (const f of fixtures) {
      const r = await cli(['decode', '--topic', f.subject], f.hex);
      expect(r.code, `${f.name}: ${r.err}`).toBe(EXIT.OK);
      const j = JSON.parse(r.out) as { format: string; event_plane_message: { kind: string } };
      expect(j.format).toBe('envelope');
      expect(j.event_plane_message.kind).toBe(f.name.startsWith('kv-events') ? 'kv_events' : f.name.startsWith('kv_metrics') ? 'active_load' : 'forward_pass');
    }
  });

  it('prints the forward-pass worker id and a dp-rank-1 batch exactly', async () => {
    const fp = fixtures.find((f) => f.name === 'forward-pass-metrics:decode')!;
    const j = JSON.parse((await cli(['decode', '-'], fp.hex)).out) as { event_plane_message: { metrics: { workerId: string; scheduled: { decodeRequests: number } } } };
    expect(j.event_plane_message.metrics.workerId).toBe('11487316532418974185');
    expect(j.event_plane_message.metrics.scheduled.decodeRequests).toBe(2);
    const dp = fixtures.find((f) => f.name === 'kv-events:stored+stored:dp1')!;
    const r = decodeCapturedMessage(new Uint8Array(Buffer.from(dp.hex, 'hex')), { topic: dp.subject });
    expect(r.result.ok).toBe(true);
    expect(r.result).toMatchObject({ value: { kind: 'kv_events', events: [{ workerId: 18329147160771148149n, dpRank: 1 }, { dpRank: 1 }] } });
  });

  it('detects bare batches and bare forward-pass payloads; refuses a broken batch', async () => {
    const batch = encodeRouterEventBatchMsgpack([{ workerId: 5n as WorkerId, dpRank: 0, storageTier: 'device', eventId: 1n, data: { kind: 'cleared' } }]);
    expect(decodeCapturedMessage(batch).format).toBe('msgpack-router-event-batch');
    const fp = encodeForwardPassMetrics({
      version: 1,
      workerId: 5n as WorkerId,
      dpRank: 0,
      counterId: 1n,
      wallTime: 0,
      scheduled: { prefillRequests: 0, prefillTokens: 0, prefillLengthVariance: 0, prefillKvTokens: 0, decodeRequests: 0, decodeKvTokens: 0, decodeKvTokensVariance: 0 },
      queued: { prefillRequests: 0, prefillTokens: 0, prefillLengthVariance: 0, prefillKvTokens: 0, decodeRequests: 0, decodeKvTokens: 0, decodeKvTokensVariance: 0 },
    });
    expect(decodeCapturedMessage(fp)).toMatchObject({ format: 'forward-pass-metrics', result: { ok: true } });
    const cut = batch.slice(0, batch.length - 3);
    const r = await cli(['decode', '--format', 'msgpack-router-event-batch', '-'], Buffer.from(cut).toString('hex'));
    expect(r.code).toBe(EXIT.REJECTED);
  });
});
