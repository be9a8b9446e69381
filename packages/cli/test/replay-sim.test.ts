// `vantage replay-sim` in-process on multi-turn traces in Dynamo's form: the
// sessions are reported, later turns wait for completion, bad session lines
// are refused with their line number and nothing is replayed.
import { describe, expect, it } from 'vitest';
import { EXIT, run, type CliIo } from '../src/index';

async function cli(argv: string[], files: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = {
    stdout: (t) => void (out += t),
    stderr: (t) => void (err += t),
    readStdin: () => Promise.resolve(new Uint8Array()),
    readFile: (p) => {
      const f = files[p];
      return f === undefined ? Promise.reject(Object.assign(new Error('no such file'), { code: 'ENOENT' })) : Promise.resolve(new TextEncoder().encode(f));
    },
  };
  const code = await run(argv, io);
  return { code, out, err };
}

const line = (o: object): string => JSON.stringify(o);
const twoTurns = [
  line({ session_id: 'a', timestamp: 0, input_length: 512, output_length: 100, hash_ids: [0] }),
  line({ session_id: 'a', delay: 5, input_length: 1024, output_length: 2, hash_ids: [0, 1] }),
].join('\n');

describe('vantage replay-sim on multi-turn traces', () => {
  it('replays the sessions; the second turn waits for the first to complete', async () => {
    const r = await cli(['replay-sim', '--trace', 't.jsonl', '--router', 'round_robin', '--workers', '1', '--quiet'], { 't.jsonl': twoTurns });
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toContain('t.jsonl open loop (1 sessions, 2 turns)');
    const j = JSON.parse(r.out.trimEnd().split('\n').at(-1)!) as Record<string, number>;
    expect(j['requests']).toBe(2);
    // Dynamo 1.6.1's replay of these two lines: TTFT 24.386 and 24.385 ms, E2E 595.511 and 30.178 ms.
    expect(j['mean_ttft_ms']).toBeCloseTo((24.386 + 24.385) / 2, 2);
    expect(j['mean_e2e_ms']).toBeCloseTo((595.511 + 30.178) / 2, 2);
    // 512 of the 1,536 prompt tokens are reused (turn 1 extends turn 0's prompt).
    expect(j['prefix_cache_reused_ratio']).toBeCloseTo(512 / 1536, 9);
  });

  it.each([
    ['a delay on a first turn', line({ session_id: 'a', timestamp: 0, delay: 5, input_length: 10, output_length: 1, hash_ids: [1] }), 1, /delay is set on the first turn/],
    ['a timestamp going back in a session', `${line({ session_id: 'a', timestamp: 9, input_length: 10, output_length: 1, hash_ids: [1] })}\n${line({ session_id: 'a', timestamp: 3, input_length: 10, output_length: 1, hash_ids: [1] })}`, 2, /earlier than the previous turn/],
  ])('refuses %s with exit 65 and the line', async (_n, text, at, reason) => {
    const r = await cli(['replay-sim', '--trace', 'bad.jsonl', '--quiet'], { 'bad.jsonl': text });
    expect(r.code).toBe(EXIT.DATA);
    expect(r.err).toContain(`bad.jsonl:${at}:`);
    expect(r.err).toMatch(reason);
    expect(r.out).toBe('');
  });

  it('takes --tie-break random or tree, and nothing else', async () => {
    const ok = await cli(['replay-sim', '--trace', 't.jsonl', '--tie-break', 'tree', '--workers', '2', '--quiet'], { 't.jsonl': twoTurns });
    expect(ok.code).toBe(EXIT.OK);
    expect(ok.out).toContain('ties=tree');
    const bad = await cli(['replay-sim', '--trace', 't.jsonl', '--tie-break', 'smallest', '--quiet'], { 't.jsonl': twoTurns });
    expect(bad.code).toBe(EXIT.USAGE);
  });
});
