import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { hashPrompt } from '@vantage/hashing';
import {
  ClosedLoop,
  Engine,
  MooncakePromptHasher,
  generateAgenticSessions,
  loadMooncakeTrace,
  openLoopArrivals,
  parseMooncakeTrace,
  promptFromTokens,
  type AgenticSessionConfig,
  type SessionTurn,
} from '@vantage/sim';
import { SHARED, W1, runToIdle } from './helpers';

const TRACES = `${SHARED}/traces`;

describe('Mooncake prompt hashing', () => {
  it('equals hashing the materialised tokens, at block sizes that divide 512 and ones that do not', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(16, 64, 128, 512, 48, 1024),
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 511 }),
        (bs, idChoices, cut) => {
          // Ids as leading prefixes: a request continues an earlier prefix, as in the traces.
          const hashIds = idChoices.map((c, i) => c * 100 + i);
          const inputLength = Math.max(1, hashIds.length * 512 - cut);
          const h = new MooncakePromptHasher(bs);
          const got = h.prompt(hashIds, inputLength);
          const want = promptFromTokens(MooncakePromptHasher.tokens(hashIds, inputLength), bs);
          expect(got.isl).toBe(want.isl);
          expect([...got.local]).toEqual([...want.local]);
          expect([...got.sequence]).toEqual([...want.sequence]);
          expect([...got.tail]).toEqual([...want.tail]);
          // A second call is served from the chunk cache and must agree.
          expect([...h.prompt(hashIds, inputLength).sequence]).toEqual([...want.sequence]);
        },
      ),
      { seed: 7, numRuns: 60 },
    );
  });

  it('keeps a cut chunk consistent with the same chunk uncut in another request', () => {
    const h = new MooncakePromptHasher(64);
    const short = h.prompt([1, 2], 512 + 200); // chunk 2 cut: 3 full blocks of it
    const long = h.prompt([1, 2, 3], 1536);
    expect([...short.sequence]).toEqual([...long.sequence.subarray(0, 8 + 3)]);
    expect([...short.tail]).toEqual(new Array(200 - 192).fill(2));
    expect(() => h.prompt([1], 600)).toThrow(RangeError);
  });
});

describe('Mooncake trace loader', () => {
  it('loads the real traces with their documented line counts', () => {
    const conv = loadMooncakeTrace(`${TRACES}/conversation_2k.jsonl`);
    const syn = loadMooncakeTrace(`${TRACES}/synthetic_trace.jsonl`);
    expect(conv).toHaveLength(2000);
    expect(syn).toHaveLength(3993);
    for (const r of syn) expect(r.hashIds.length).toBe(Math.ceil(r.inputLength / 512));
    expect(syn[0]).toMatchObject({ line: 1, timestampMs: 0 });
    // Documented statistics (README): synthetic mean input 15,325 tokens, span 1,022 s.
    const meanIn = syn.reduce((a, r) => a + r.inputLength, 0) / syn.length;
    expect(Math.round(meanIn)).toBe(15325);
    expect(Math.round(syn.at(-1)!.timestampMs! / 1000)).toBe(1022);
  });

  it('hashes the whole synthetic trace quickly through the chunk cache', () => {
    const syn = loadMooncakeTrace(`${TRACES}/synthetic_trace.jsonl`);
    const h = new MooncakePromptHasher(64);
    const t = performance.now();
    let blocks = 0;
    for (const r of syn) blocks += h.prompt(r.hashIds, r.inputLength).sequence.length;
    const ms = performance.now() - t;
    expect(blocks).toBe(syn.reduce((a, r) => a + Math.floor(r.inputLength / 64), 0));
    // ~1 s on a quiet core; the bound leaves room for a loaded CI machine.
    expect(ms).toBeLessThan(8000);
    // Spot-check one long prompt against direct hashing.
    const r = syn.find((x) => x.inputLength > 20000)!;
    expect([...h.prompt(r.hashIds, r.inputLength).sequence]).toEqual([...hashPrompt(MooncakePromptHasher.tokens(r.hashIds, r.inputLength), 64).sequence]);
  });

  it.each([
    ['not JSON', '{"timestamp": 0,', /invalid JSON/],
    ['missing hash_ids', '{"timestamp": 0, "input_length": 10, "output_length": 1}', /hash_ids must be an array/],
    ['wrong hash_ids count', '{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}', /needs 2/],
    ['negative timestamp', '{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [1]}', /timestamp/],
    ['fractional length', '{"timestamp": 0, "input_length": 10.5, "output_length": 1, "hash_ids": [1]}', /input_length/],
    ['id out of u32', '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [4294967296]}', /hash_ids\[0\]/],
    ['an array', '[1,2]', /not a JSON object/],
  ])('rejects a bad line (%s) with its line number', (_name, bad, reason) => {
    const good = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1], "session_id": "x"}';
    const r = parseMooncakeTrace([good, '', good, bad, good].join('\n'));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.line).toBe(4);
    expect(r.code).toBe('bad_trace_line');
    expect(r.reason).toMatch(reason);
  });

  it('open loop applies the speed-up and keeps time order; closed loop keeps N in flight', () => {
    const recs = parseMooncakeTrace(
      [1000, 3000, 3000, 2000].map((t) => `{"timestamp": ${t}, "input_length": 10, "output_length": 1, "hash_ids": [1]}`).join('\n'),
    );
    if (!recs.ok) throw new Error(recs.reason);
    expect(openLoopArrivals(recs.records, { speedup: 2 })).toEqual([
      { index: 0, arrivalMs: 0 },
      { index: 3, arrivalMs: 500 },
      { index: 1, arrivalMs: 1000 },
      { index: 2, arrivalMs: 1000 },
    ]);
    const cl = new ClosedLoop(5, 2);
    expect(cl.start(0)).toEqual([{ index: 0, arrivalMs: 0 }, { index: 1, arrivalMs: 0 }]);
    expect(cl.complete(10)).toEqual({ index: 2, arrivalMs: 10 });
    expect(cl.complete(12)).toEqual({ index: 3, arrivalMs: 12 });
    expect(cl.complete(15)).toEqual({ index: 4, arrivalMs: 15 });
    expect(cl.complete(20)).toBeUndefined();
    expect(cl.complete(21)).toBeUndefined();
    expect(() => cl.complete(22)).toThrow();
  });
});

describe('agentic session generator', () => {
  const cfg: AgenticSessionConfig = {
    sessions: 12,
    seed: 'study-1',
    systemPromptTokens: { kind: 'const', value: 700 },
    userTaskTokens: { kind: 'uniform', min: 50, max: 200 },
    toolResultTokens: { kind: 'lognormal', median: 300, sigma: 0.8, min: 1, max: 3000 },
    outputTokens: { kind: 'exponential', mean: 120, min: 1, max: 1000 },
    turnsPerSession: { kind: 'uniform', min: 2, max: 9 },
    thinkTimeMs: { kind: 'const', value: 800 },
    sessionInterarrivalMs: { kind: 'exponential', mean: 1000 },
  };

  it('is deterministic for a seed and differs across seeds', () => {
    const a = generateAgenticSessions(cfg);
    const b = generateAgenticSessions(cfg);
    expect(a.map((s) => s.sessionId)).toEqual(b.map((s) => s.sessionId));
    expect(a.map((s) => s.turns.map((t) => [...t.promptTokens]))).toEqual(b.map((s) => s.turns.map((t) => [...t.promptTokens])));
    const c = generateAgenticSessions({ ...cfg, seed: 'study-2' });
    expect(c[0]!.turns[0]!.promptTokens.subarray(700)).not.toEqual(a[0]!.turns[0]!.promptTokens.subarray(700));
    // Adding sessions leaves the earlier ones unchanged.
    const more = generateAgenticSessions({ ...cfg, sessions: 20 });
    expect(more[5]!.turns.map((t) => t.promptTokens.length)).toEqual(a[5]!.turns.map((t) => t.promptTokens.length));
  });

  it('each turn extends the previous prompt with its output and a tool result; sessions share the system prompt', () => {
    const ss = generateAgenticSessions(cfg);
    for (const s of ss) {
      expect(s.turns.length).toBeGreaterThanOrEqual(2);
      expect(s.turns[0]!.thinkTimeMs).toBe(0);
      for (let t = 1; t < s.turns.length; t++) {
        const prev = s.turns[t - 1]!;
        const cur = s.turns[t]!;
        const shared = prev.promptTokens.length + prev.outputTokens.length;
        expect([...cur.promptTokens.subarray(0, prev.promptTokens.length)]).toEqual([...prev.promptTokens]);
        expect([...cur.promptTokens.subarray(prev.promptTokens.length, shared)]).toEqual([...prev.outputTokens]);
        // The tool result: one draw of toolResultTokens, within its bounds (1..3000).
        const toolResult = cur.promptTokens.length - shared;
        expect(toolResult).toBeGreaterThanOrEqual(1);
        expect(toolResult).toBeLessThanOrEqual(3000);
        expect(cur.thinkTimeMs).toBe(800);
      }
    }
    const sys0 = [...ss[0]!.turns[0]!.promptTokens.subarray(0, 700)];
    for (const s of ss) expect([...s.turns[0]!.promptTokens.subarray(0, 700)]).toEqual(sys0);
    // Sessions diverge right after the system prompt.
    expect(ss[0]!.turns[0]!.promptTokens[700]).not.toBe(ss[1]!.turns[0]!.promptTokens[700]);
    expect(new Set(ss.map((s) => s.sessionId)).size).toBe(ss.length);
    for (let i = 1; i < ss.length; i++) expect(ss[i]!.startMs).toBeGreaterThanOrEqual(ss[i - 1]!.startMs);
  });

  it('replayed on an engine, a later turn reuses the earlier turns and the shared system prompt', () => {
    const [s0, s1] = generateAgenticSessions(cfg);
    const e = new Engine({ workerId: W1, blockSize: 16, numGpuBlocks: 4096 });
    let t = 0;
    const add = (id: string, turn: SessionTurn) => {
      e.addRequest({ id, arrivalMs: t, prompt: promptFromTokens(turn.promptTokens, 16), osl: turn.outputTokens.length, outputTokens: turn.outputTokens });
      const r = runToIdle(e);
      t = r.steps.at(-1)!.endMs;
      return r.finished[0]!;
    };
    add('s0t0', s0!.turns[0]!);
    const f = add('s0t1', s0!.turns[1]!);
    const prev = s0!.turns[0]!;
    // Everything written by turn 0 (prompt + output, minus the last sampled token) in full blocks.
    expect(f.reusedTokens).toBe(Math.floor((prev.promptTokens.length + prev.outputTokens.length - 1) / 16) * 16);
    const g = add('s1t0', s1!.turns[0]!);
    expect(g.reusedTokens).toBe(Math.floor(700 / 16) * 16);
  });
});
