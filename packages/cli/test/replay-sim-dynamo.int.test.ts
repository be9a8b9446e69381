// `vantage replay-sim` against NVIDIA Dynamo's own offline replay
// (`dynamo.replay.run_trace_replay`, ai-dynamo 1.6.1, run as a Python process
// from the venv packages/testkit/scripts/ensure-dynamo-py.sh installs) on a
// small seeded multi-turn trace in Dynamo's form: mean TTFT, mean E2E and
// prefix reuse within 2 % for round_robin and kv_router, open and closed loop.
// Dynamo's kv_router draws cost ties at random without a seed, so kv_router
// compares means over several runs on each side. No brokers are involved; it
// is an integration test because it runs Dynamo's processes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processIo } from '../src/index';
import { agreementTable, compareWithDynamo, dynamoPython, type AgreementSpec } from '../bench/dynamo-replay';
import { DEFAULT_MOONCAKE_SESSIONS, generateMooncakeSessions, mooncakeJsonl } from '../bench/mooncake-sessions';

const TOLERANCE = 0.02;
let dir = '';
let trace = '';

beforeAll(() => {
  dynamoPython();
  dir = mkdtempSync(join(tmpdir(), 'replay-sim-dynamo-'));
  trace = join(dir, 'sessions.jsonl');
  // 120 sessions, 1 to 8 turns each, every later turn `delay` ms after the previous one completes.
  writeFileSync(trace, mooncakeJsonl(generateMooncakeSessions({ ...DEFAULT_MOONCAKE_SESSIONS, sessions: 120, seed: 7 })));
});

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe("replay-sim agrees with Dynamo's replay on a multi-turn trace", () => {
  const cases: [string, Omit<AgreementSpec, 'trace'>][] = [
    ['round_robin, open loop', { router: 'round_robin', workers: 4 }],
    ['kv_router, open loop', { router: 'kv_router', workers: 4, repeats: 20 }],
    ['round_robin, closed loop (12 sessions in flight)', { router: 'round_robin', workers: 4, concurrency: 12 }],
    ['kv_router, closed loop (12 sessions in flight)', { router: 'kv_router', workers: 4, concurrency: 12, repeats: 20 }],
  ];
  it.each(cases)('%s: mean TTFT, mean E2E and prefix reuse within 2 %%', async (_name, spec) => {
    const a = await compareWithDynamo({ ...spec, trace }, processIo());
    console.log(agreementTable([a]));
    expect(a.oursMean.requests).toBe(a.dynamoMean.requests);
    expect(a.oursMean.requests).toBeGreaterThan(300);
    // A multi-turn trace that reuses prefixes (the later turns' prompts extend the earlier ones).
    expect(a.dynamoMean.prefixReuse).toBeGreaterThan(0.3);
    expect(Math.abs(a.rel.meanTtftMs)).toBeLessThan(TOLERANCE);
    expect(Math.abs(a.rel.meanE2eMs)).toBeLessThan(TOLERANCE);
    expect(Math.abs(a.rel.prefixReuse)).toBeLessThan(TOLERANCE);
  });
});
