// Broker-free parts of runService: configuration failure and start-up failure paths.
import { describe, expect, it } from 'vitest';
import { VantageError } from '../src/errors';
import { EXIT_CONFIG_INVALID, runService } from '../src/service';

function sink() {
  const lines: Record<string, unknown>[] = [];
  return { lines, destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } };
}

describe('runService', () => {
  it('exits 2 with a fatal log naming the problems when configuration is invalid, before connecting', async () => {
    const out = sink();
    const exits: number[] = [];
    let started = false;
    await expect(
      runService({
        name: 'indexer',
        env: { VANTAGE_HTTP_PORT: 'eighty', VANTAGE_NATS_URL: 'nats://127.0.0.1:1' },
        exit: (c) => void exits.push(c),
        signals: [],
        processHandlers: false,
        logDestination: out.destination,
        start: () => void (started = true),
      }),
    ).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    expect(exits).toEqual([EXIT_CONFIG_INVALID]);
    expect(started).toBe(false);
    const fatal = out.lines.find((l) => l['level'] === 'fatal');
    expect(fatal?.['msg']).toBe('configuration invalid');
    expect(JSON.stringify(fatal)).toContain('http.port');
    expect(fatal?.['service']).toBe('indexer');
  });

  it('exits 1 with NATS_CONNECT_FAILED naming the URL when NATS is unreachable', async () => {
    const out = sink();
    const exits: number[] = [];
    const err = await runService({
      name: 'decision',
      // Port 1 on loopback: refused at once, no broker needed.
      env: { VANTAGE_NATS_URL: 'nats://127.0.0.1:1', VANTAGE_NATS_CONNECT_TIMEOUT_MS: '500', VANTAGE_LOG_LEVEL: 'info' },
      exit: (c) => void exits.push(c),
      signals: [],
      processHandlers: false,
      logDestination: out.destination,
      start: () => {},
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VantageError);
    expect((err as VantageError).code).toBe('NATS_CONNECT_FAILED');
    expect((err as VantageError).message).toContain('nats://127.0.0.1:1');
    expect(exits).toEqual([1]);
    expect(out.lines.map((l) => l['msg'])).toEqual(expect.arrayContaining(['start-up failed', 'shutdown finished with errors']));
  });
});
