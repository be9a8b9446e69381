// Multi-turn Mooncake traces in NVIDIA Dynamo's form, and the pass timing of
// Dynamo 1.6.1's replay. Figures marked "Dynamo 1.6.1" were measured with
// `dynamo.replay.run_trace_replay` (1 worker, round_robin, block size 64,
// 16,384 blocks, 8,192 batched tokens, trace_block_size 512) on the same lines;
// packages/cli/test/replay-sim-dynamo.int.test.ts runs Dynamo itself.
import { describe, expect, it } from 'vitest';
import {
  loadMooncakeTrace,
  openLoopArrivals,
  parseMooncakeTrace,
  prepareTrace,
  runReplay,
  traceSessions,
  type MooncakeRecord,
  type RequestRecord,
} from '@vantage/sim';
import { SHARED } from './helpers';

const parse = (lines: readonly object[]): MooncakeRecord[] => {
  const p = parseMooncakeTrace(lines.map((l) => JSON.stringify(l)).join('\n'));
  if (!p.ok) throw new Error(`line ${p.line}: ${p.reason}`);
  return p.records;
};

const reject = (lines: readonly object[]): { line: number; reason: string } => {
  const p = parseMooncakeTrace(lines.map((l) => JSON.stringify(l)).join('\n'));
  if (p.ok) throw new Error('expected a rejection');
  expect(p.code).toBe('bad_trace_line');
  return { line: p.line, reason: p.reason };
};

/** One worker, round robin; per request [session, turn, arrival, first token, last token, reused tokens], in arrival order. */
function replay(records: readonly MooncakeRecord[], workload: { speedup?: number; concurrency?: number } = {}): (string | number | null)[][] {
  const trace = prepareTrace(records, 64);
  const r = runReplay({
    workers: 1,
    router: { kind: 'round_robin' },
    workload: workload.concurrency !== undefined ? { kind: 'closed_loop', trace, concurrency: workload.concurrency } : { kind: 'open_loop', trace, ...(workload.speedup !== undefined ? { speedup: workload.speedup } : {}) },
  });
  const row = (x: RequestRecord) => {
    const rec = records[Number(x.requestId.slice(1))]!;
    return [rec.sessionId ?? null, rec.turn ?? 0, +x.arrivalMs.toFixed(3), +x.firstTokenMs.toFixed(3), +x.endMs.toFixed(3), x.reusedTokens];
  };
  return [...r.records].sort((a, b) => a.arrivalMs - b.arrivalMs || a.requestId.localeCompare(b.requestId)).map(row);
}

const turn = (session: string, extra: object, isl: number, osl: number, ids: number[]) => ({ session_id: session, ...extra, input_length: isl, output_length: osl, hash_ids: ids });

describe("Mooncake loader: Dynamo's multi-turn form", () => {
  it("reads Dynamo's own fixture (mooncake-delta.jsonl of its replay tests): session, first timestamp, later delay", () => {
    // Verbatim from ai-dynamo 1.6.1, dynamo/replay/tests/e2e/configs/unified_cli/fixtures/traces/mooncake-delta.jsonl.
    const text = [
      '{"request_id":"d1","session_id":"delta-session","timestamp":0,"input_length":16,"output_length":4,"hash_ids":[201]}',
      '{"request_id":"d2","session_id":"delta-session","timestamp":10,"delay":5,"input_length":8,"output_length":4,"hash_ids":[202]}',
    ].join('\n');
    const p = parseMooncakeTrace(text);
    expect(p.ok).toBe(true);
    if (!p.ok) return;
    expect(p.records.map((r) => [r.sessionId, r.turn, r.timestampMs, r.delayMs])).toEqual([
      ['delta-session', 0, 0, 0],
      // An explicit delay wins over the timestamp difference (10).
      ['delta-session', 1, 10, 5],
    ]);
    expect(traceSessions(p.records)).toEqual([{ id: 'delta-session', startMs: 0, turns: [0, 1] }]);
  });

  it('resolves delays as Dynamo does: explicit, else the timestamp difference within the session, else 0', () => {
    const recs = parse([
      turn('a', { timestamp: 1000 }, 512, 2, [0]),
      turn('b', { timestamp: 1100 }, 512, 2, [9]),
      turn('a', { timestamp: 1300 }, 1024, 2, [0, 1]), // inferred 300 from a's previous timestamp
      turn('a', { delay: 2.5 }, 1536, 2, [0, 1, 2]), // fractional ms, no timestamp
      turn('a', {}, 2048, 2, [0, 1, 2, 3]), // neither: 0
      turn('a', { timestamp: 1400 }, 2560, 2, [0, 1, 2, 3, 4]), // 1400 - 1300: the last timestamp the session had
      { timestamp: 50, input_length: 10, output_length: 1, hash_ids: [7] }, // no session_id: a single-turn request
      turn('b', { timestamp: 1100 }, 1024, 2, [9, 10]), // equal timestamps: delay 0
    ]);
    expect(recs.map((r) => [r.sessionId ?? null, r.turn ?? 0, r.delayMs ?? 0, r.timestampMs])).toEqual([
      ['a', 0, 0, 1000],
      ['b', 0, 0, 1100],
      ['a', 1, 300, 1300],
      ['a', 2, 2.5, null],
      ['a', 3, 0, null],
      ['a', 4, 100, 1400],
      [null, 0, 0, 50],
      ['b', 1, 0, 1100],
    ]);
    expect(traceSessions(recs).map((s) => [s.id, s.startMs, s.turns])).toEqual([
      ['a', 1000, [0, 2, 3, 4, 5]],
      ['b', 1100, [1, 7]],
      [null, 50, [6]],
    ]);
  });

  it.each([
    ['a delay on the first turn', [turn('a', { timestamp: 0, delay: 3 }, 512, 2, [0])], 1, /delay is set on the first turn of session "a"/],
    ['a delay on a line without session_id', [{ timestamp: 0, delay: 3, input_length: 10, output_length: 1, hash_ids: [1] }], 1, /without session_id/],
    ['a negative delay', [turn('a', { timestamp: 0 }, 512, 2, [0]), turn('a', { delay: -5 }, 1024, 2, [0, 1])], 2, /delay must be a finite number >= 0/],
    ['a timestamp earlier than the previous turn', [turn('a', { timestamp: 100 }, 512, 2, [0]), turn('a', { timestamp: 50 }, 1024, 2, [0, 1])], 2, /earlier than the previous turn of session "a"/],
    ['a first turn without timestamp', [turn('a', {}, 512, 2, [0])], 1, /timestamp is required on the first turn/],
    ['a numeric session_id', [{ session_id: 7, timestamp: 0, input_length: 10, output_length: 1, hash_ids: [1] }], 1, /session_id must be a string/],
    ['a delay that is not a number', [turn('a', { timestamp: 0 }, 512, 2, [0]), turn('a', { delay: '5' }, 1024, 2, [0, 1])], 2, /delay must be/],
  ])('rejects %s with its line and a reason (as Dynamo refuses it)', (_name, lines, line, reason) => {
    const r = reject(lines);
    expect(r.line).toBe(line);
    expect(r.reason).toMatch(reason);
  });

  it('keeps single-turn traces as they were: every line its own session at its timestamp', () => {
    const conv = loadMooncakeTrace(`${SHARED}/traces/conversation_2k.jsonl`);
    expect(conv.every((r) => r.sessionId === undefined && r.turn === undefined && r.timestampMs !== null)).toBe(true);
    const sessions = traceSessions(conv);
    expect(sessions).toHaveLength(conv.length);
    expect(sessions.every((s, i) => s.turns.length === 1 && s.turns[0] === i && s.startMs === conv[i]!.timestampMs)).toBe(true);
  });

  it('refuses open-loop arrivals per line for a multi-turn trace, and a session whose first turns were sliced off', () => {
    const recs = parse([turn('a', { timestamp: 0 }, 512, 2, [0]), turn('a', { delay: 5 }, 1024, 2, [0, 1])]);
    expect(() => openLoopArrivals(recs)).toThrow(/turn 1 of session "a"/);
    expect(() => traceSessions(recs.slice(1))).toThrow(/line 2 starts session "a" but has no timestamp/);
    expect(() => prepareTrace(recs, 64)).not.toThrow();
  });
});

describe('multi-turn replay (turns released on completion), against Dynamo 1.6.1', () => {
  it('waits for completion when the delay is shorter than the previous turn\'s generation', () => {
    // Turn 0 generates 100 tokens (~571 ms of decode); turn 1's delay is 5 ms.
    const rows = replay(parse([turn('a', { timestamp: 0 }, 512, 100, [0]), turn('a', { delay: 5 }, 1024, 2, [0, 1])]));
    const [t0, t1] = rows as [number[], number[]];
    expect(t1[2]).toBeCloseTo(t0[4]! + 5, 9); // released 5 ms after turn 0's last token, not at 5 ms
    // Dynamo 1.6.1: turn 0 (0, 24.386, 595.511, reused 0), turn 1 (600.511, 624.896, 630.689, reused 512).
    expect(rows).toEqual([
      ['a', 0, 0, 24.386, 595.511, 0],
      ['a', 1, 600.511, 624.896, 630.689, 512],
    ]);
    // The same when the line also carries a timestamp (the delay wins), as in Dynamo.
    expect(replay(parse([turn('a', { timestamp: 0 }, 512, 100, [0]), turn('a', { timestamp: 10, delay: 5 }, 1024, 2, [0, 1])]))).toEqual(rows);
  });

  it('applies an inferred delay after completion too (timestamps 1000 and 1300: 300 ms after turn 0 ends)', () => {
    // Dynamo 1.6.1: turn 1 arrives at 895.511 (= 595.511 + 300), first token 919.896, last 925.689.
    expect(replay(parse([turn('a', { timestamp: 1000 }, 512, 100, [0]), turn('a', { timestamp: 1300 }, 1024, 2, [0, 1])]))).toEqual([
      ['a', 0, 0, 24.386, 595.511, 0],
      ['a', 1, 895.511, 919.896, 925.689, 512],
    ]);
  });

  it('interleaves sessions, each on its own delays', () => {
    const recs = parse([
      turn('a', { timestamp: 0 }, 512, 2, [0]),
      turn('b', { timestamp: 0 }, 512, 2, [9]),
      turn('a', { delay: 50 }, 1024, 2, [0, 1]),
      turn('b', { delay: 10 }, 1024, 2, [9, 10]),
    ]);
    // Dynamo 1.6.1, same four lines.
    expect(replay(recs)).toEqual([
      ['a', 0, 0, 32.491, 38.284, 0],
      ['b', 0, 0, 32.491, 38.284, 0],
      ['b', 1, 48.284, 72.669, 78.462, 512],
      ['a', 1, 88.284, 112.669, 118.462, 512],
    ]);
  });

  it('divides session starts and delays by the open loop speed-up', () => {
    const recs = parse([turn('a', { timestamp: 0 }, 512, 2, [0]), turn('a', { delay: 1000 }, 1024, 2, [0, 1]), turn('b', { timestamp: 400 }, 512, 2, [5])]);
    // Dynamo 1.6.1 with arrival_speedup_ratio 2: b at 200, a's second turn 500 ms after a's first ends.
    expect(replay(recs, { speedup: 2 })).toEqual([
      ['a', 0, 0, 24.386, 30.152, 0],
      ['b', 0, 200, 224.386, 230.152, 0],
      ['a', 1, 530.152, 554.538, 560.331, 512],
    ]);
  });

  it('closed loop: a session holds its place across its turns and delays', () => {
    const recs = parse([turn('a', { timestamp: 0 }, 512, 2, [0]), turn('a', { delay: 50 }, 1024, 2, [0, 1]), turn('b', { timestamp: 0 }, 512, 2, [9])]);
    // Dynamo 1.6.1, replay_concurrency 1: b starts only when a's last turn ends.
    expect(replay(recs, { concurrency: 1 })).toEqual([
      ['a', 0, 0, 24.386, 30.152, 0],
      ['a', 1, 80.152, 104.538, 110.331, 512],
      ['b', 0, 110.331, 134.716, 140.483, 0],
    ]);
  });
});

describe("pass timing equals Dynamo 1.6.1's replay", () => {
  const R = (a: number, n: number) => Array.from({ length: n }, (_, i) => a + i);
  // [name, lines (timestamp, isl, osl, hash ids), Dynamo's (TTFT, E2E) per request in arrival order, engine blocks]
  const cases: [string, [number, number, number, number[]][], [number, number][], number?][] = [
    ['a full 8,192-token prefill: no decode step in its pass', [[0, 8192, 1, R(0, 16)]], [[169.137, 169.137]]],
    ['then decode steps at the context length', [[0, 8192, 11, R(0, 16)]], [[169.137, 230.744]]],
    ['a short prompt', [[0, 512, 11, [0]]], [[24.386, 82.052]]],
    ['two prompts in one pass', [[0, 512, 3, [0]], [0, 512, 3, [1]]], [[32.491, 44.076], [32.491, 44.076]]],
    ['a prompt joining a decoding request: prefill + one decode step', [[0, 512, 200, [0]], [100, 512, 2, [1]]], [[24.386, 1197.329], [35.273, 41.067]]],
    ['chunked prefill beside a decoding request', [[0, 512, 300, [0]], [100, 20_000, 2, R(1, 40)]], [[24.386, 2167.034], [437.597, 444.385]]],
    ['decode usage from context tokens, not cached blocks', [[0, 16_384, 1, R(0, 32)], [5000, 512, 11, [99]]], [[338.274, 338.274], [24.386, 90.251]], 512],
    ['half the KV in use', [[0, 16_384, 11, R(0, 32)]], [[338.274, 601.421]], 512],
    ['prefix reuse of a repeated prompt', [[0, 4096, 2, R(0, 8)], [1000, 4096, 2, R(0, 8)]], [[85.756, 91.707], [17.475, 23.426]]],
    ['prefix reuse of a partial last block', [[0, 4000, 2, R(0, 8)], [1000, 4000, 2, R(0, 8)]], [[83.971, 89.917], [16.988, 22.933]]],
    // Batched prefill: 3 requests and 8,189 tokens are timed as 3 × ⌊8189 / 3⌋ = 8,187.
    ['three prompts filling the budget', [[0, 100, 1, [100]], [0, 100, 1, [200]], [0, 7989, 1, R(300, 16)]], [[169.027, 169.027], [169.027, 169.027], [169.027, 169.027]]],
    ['two short prompts and a chunk', [[0, 100, 1, [100]], [0, 100, 1, [200]], [0, 10_000, 1, R(300, 20)]], [[169.093, 169.093], [169.093, 169.093], [217.78, 217.78]]],
    // Pass 2 finishes a chunked prompt 8,091 tokens in (odd) beside a new one: 2 × (⌊12000 / 2⌋ − ⌊8091 / 2⌋) = 3,910 for 3,909 computed.
    ['a chunk continued beside a new prompt', [[0, 101, 1, [7]], [0, 9000, 1, R(100, 18)], [0, 3000, 1, R(300, 6)]], [[169.137, 169.137], [251.442, 251.442], [251.442, 251.442]]],
    // Decoding requests do not count in the prefill batch.
    ['two prompts beside a decoding request', [[0, 512, 300, [7]], [100, 1000, 1, R(100, 2)], [100, 1001, 1, R(300, 2)]], [[24.386, 1799.39], [59.44, 59.44], [59.44, 59.44]]],
  ];
  it.each(cases)('%s', (_name, lines, dynamo, blocks) => {
    const p = parseMooncakeTrace(lines.map(([timestamp, isl, osl, ids]) => JSON.stringify({ timestamp, input_length: isl, output_length: osl, hash_ids: ids })).join('\n'));
    if (!p.ok) throw new Error(p.reason);
    const r = runReplay({ workers: 1, engine: { numGpuBlocks: blocks ?? 16_384 }, router: { kind: 'round_robin' }, workload: { kind: 'open_loop', trace: prepareTrace(p.records, 64) } });
    const got = [...r.records].sort((a, b) => a.arrivalMs - b.arrivalMs).map((x) => [+(x.firstTokenMs - x.arrivalMs).toFixed(3), +(x.endMs - x.arrivalMs).toFixed(3)]);
    expect(got).toEqual(dynamo);
  });
});
