// The bench's multi-turn trace makers: seeded sessions and sessions regrouped from a single-turn
// trace, both in Dynamo's Mooncake form, read back through the sim's loader.
import { describe, expect, it } from 'vitest';
import { parseMooncakeTrace, traceSessions, type MooncakeRecord } from '@vantage/sim';
import { DEFAULT_MOONCAKE_SESSIONS, generateMooncakeSessions, groupConversations, mooncakeJsonl } from '../mooncake-sessions';

const parse = (lines: readonly object[]): MooncakeRecord[] => {
  const p = parseMooncakeTrace(lines.map((l) => JSON.stringify(l)).join('\n'));
  if (!p.ok) throw new Error(`line ${p.line}: ${p.reason}`);
  return p.records;
};

describe('multi-turn traces made in Dynamo\'s form', () => {
  it('generates seeded sessions: first turn timestamped, later turns with a delay, each prompt a prefix of the next', () => {
    const cfg = { ...DEFAULT_MOONCAKE_SESSIONS, sessions: 40, seed: 3 };
    const a = generateMooncakeSessions(cfg);
    expect(generateMooncakeSessions(cfg)).toEqual(a);
    expect(generateMooncakeSessions({ ...cfg, seed: 4 })).not.toEqual(a);
    const bySession = new Map<string, typeof a>();
    for (const l of a) bySession.set(l.session_id!, [...(bySession.get(l.session_id!) ?? []), l]);
    expect(bySession.size).toBe(40);
    let multi = 0;
    for (const turns of bySession.values()) {
      expect(turns[0]!.timestamp).toBeTypeOf('number');
      expect(turns[0]!.delay).toBeUndefined();
      if (turns.length > 1) multi++;
      for (let k = 1; k < turns.length; k++) {
        expect(turns[k]!.timestamp).toBeUndefined();
        expect(turns[k]!.delay).toBeGreaterThanOrEqual(0);
        const prev = turns[k - 1]!;
        expect(turns[k]!.input_length).toBeGreaterThan(prev.input_length);
        expect(turns[k]!.hash_ids.slice(0, prev.hash_ids.length)).toEqual(prev.hash_ids);
      }
      for (const t of turns) expect(t.hash_ids.length).toBe(Math.ceil(t.input_length / 512));
    }
    expect(multi).toBeGreaterThan(10);
    // It reads back through the loader, with the same sessions and delays.
    const p = parseMooncakeTrace(mooncakeJsonl(a));
    expect(p.ok).toBe(true);
    if (!p.ok) return;
    expect(traceSessions(p.records)).toHaveLength(40);
    expect(p.records.map((r) => r.delayMs)).toEqual(a.map((l) => l.delay ?? 0));
  });

  it('regroups a single-turn trace: a request continues the session whose last turn it extends', () => {
    const recs = parse([
      { timestamp: 0, input_length: 1024, output_length: 5, hash_ids: [0, 1] },
      { timestamp: 10, input_length: 1024, output_length: 5, hash_ids: [0, 7] }, // shares 1 block: too little
      { timestamp: 300, input_length: 1536, output_length: 5, hash_ids: [0, 1, 2] }, // extends line 1
      { timestamp: 400, input_length: 1536, output_length: 5, hash_ids: [0, 1, 9] }, // line 1 is no longer its session's last turn
      { timestamp: 900, input_length: 2048, output_length: 5, hash_ids: [0, 1, 2, 3] }, // extends line 3
    ]);
    const g = groupConversations(recs);
    expect(g.map((l) => [l.session_id, l.timestamp])).toEqual([
      ['c1', 0],
      ['c2', 10],
      ['c1', 300],
      ['c4', 400],
      ['c1', 900],
    ]);
    const back = parse(g as object[]);
    expect(back.map((r) => [r.sessionId, r.turn, r.delayMs])).toEqual([
      ['c1', 0, 0],
      ['c2', 0, 0],
      ['c1', 1, 300],
      ['c4', 0, 0],
      ['c1', 2, 600],
    ]);
  });
});
