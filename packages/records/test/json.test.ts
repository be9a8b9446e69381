import { describe, expect, it } from 'vitest';
import { csvHeader, DECISION_CSV_COLUMNS, joinOutcome, OUTCOME_CSV_COLUMNS, toCsvLine, toJsonRow } from '../src/index';
import { baselineDecision, BIG_WORKER, decision, ev, MAX_WORKER } from './fixtures';

describe('toJsonRow', () => {
  it('flattens a decision with u64 as decimal strings and candidates keyed by role', () => {
    const row = toJsonRow(decision());
    expect(Object.keys(row)).toEqual([...DECISION_CSV_COLUMNS]);
    expect(row['chosenWorkerId']).toBe('18446744073709551615');
    expect(row['observations.efficient.workerId']).toBe(BIG_WORKER.toString());
    expect(row['observations.capable.workerId']).toBe(MAX_WORKER.toString());
    expect(row['observations.efficient.overlapTokens']).toBe(90_000);
    expect(row['observations.capable.ages.overlapMs']).toBeNull();
    expect(row['predictions.capable.cacheTtftMs']).toBe(900);
    expect(row['gate.passed']).toBe(true);
    expect(row['stageProposal.role']).toBe('efficient');
    // Every value is JSON-safe.
    expect(JSON.parse(JSON.stringify(row))).toEqual(row);
  });

  it('gives a baseline decision the same columns, nulls where nothing was observed', () => {
    const row = toJsonRow(baselineDecision());
    expect(Object.keys(row)).toEqual([...DECISION_CSV_COLUMNS]);
    expect(row['observations.efficient.workerId']).toBeNull();
    expect(row['gate.passed']).toBeNull();
  });

  it('flattens an outcome with the decision under decision.* and sources as JSON', () => {
    const rec = joinOutcome(decision(), [ev('done', 1_732_000_001_000)], {
      requestId: 'req-1',
      closedBy: 'complete',
      sources: [{ stream: 'DECISIONS', sequence: 3, part: 'decision' }],
    });
    const row = toJsonRow(rec);
    expect(Object.keys(row)).toEqual([...OUTCOME_CSV_COLUMNS]);
    expect(row['decision.chosenWorkerId']).toBe(MAX_WORKER.toString());
    expect(row['join.closedBy']).toBe('complete');
    expect(row['status']).toBe('completed');
    expect(row['servedPool']).toBe('qwen3-235b');
    expect(JSON.parse(row['sources'] as string)).toEqual([{ stream: 'DECISIONS', sequence: 3, part: 'decision' }]);
    expect(OUTCOME_CSV_COLUMNS).toContain('decision.observations.capable.prefillPressure');
  });

  it('an outcome without a decision has null decision columns', () => {
    const row = toJsonRow(joinOutcome(null, [], { requestId: 'r', closedBy: 'deadline' }));
    expect(row['decision.recordId']).toBeNull();
    expect(row['status']).toBe('incomplete');
  });
});

describe('CSV', () => {
  it('quotes fields with commas, quotes and newlines; null is empty', () => {
    const row = toJsonRow(decision({ detail: 'a, "b"\nc', endpoint: null }));
    const line = toCsvLine(row, DECISION_CSV_COLUMNS);
    expect(line).toContain('"a, ""b""\nc"');
    const header = csvHeader(DECISION_CSV_COLUMNS).split(',');
    expect(header).toEqual([...DECISION_CSV_COLUMNS]);
    // endpoint column is empty.
    const idx = DECISION_CSV_COLUMNS.indexOf('endpoint');
    const simple = toCsvLine(toJsonRow(decision({ detail: null, endpoint: null, observations: [], predictions: [] })), DECISION_CSV_COLUMNS).split(',');
    expect(simple[idx]).toBe('');
    expect(simple.length).toBe(DECISION_CSV_COLUMNS.length);
  });
});
