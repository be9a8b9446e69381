// Parsing the replay tool's JSON Lines: the column mapping against the
// records schema, genuine flattened outcome records, and bad rows named by line.
import { describe, expect, it } from 'vitest';
import { OUTCOME_CSV_COLUMNS } from '@vantage/records';
import {
  CALIBRATION_COLUMNS,
  OUTCOME_COLUMNS,
  pairRows,
  parseCalibrationJsonl,
  validateCalibrationRows,
  type CalibrationRow,
} from '../src/rows';
import { outcomeJsonRow, toJsonl } from './synthetic';

const base: CalibrationRow = {
  line: 0,
  requestId: 'r1',
  conditionId: 'cond:a',
  repeat: 2,
  role: 'efficient',
  model: 'eff-8b',
  n: 12000,
  k: 6000,
  r: 3,
  p: 1.25,
  ttftMs: 812.5,
  noBackgroundLoad: false,
  noContention: false,
};

describe('column mapping', () => {
  it('names only columns the outcome flattening writes', () => {
    const names = [
      ...Object.values(OUTCOME_COLUMNS).filter((c) => typeof c === 'string'),
      ...(['efficient', 'capable'] as const).flatMap((r) => Object.values(OUTCOME_COLUMNS.observation(r))),
    ];
    for (const n of names) expect(OUTCOME_CSV_COLUMNS).toContain(n);
    // The calibration identity columns are ours, not the schema's.
    for (const n of Object.values(CALIBRATION_COLUMNS)) expect(OUTCOME_CSV_COLUMNS).not.toContain(n);
  });
});

describe('parseCalibrationJsonl', () => {
  it('reads genuine outcome rows back into the measurements they came from', () => {
    const capable: CalibrationRow = { ...base, requestId: 'r2', role: 'capable', model: 'cap-70b', r: 0, p: null, ttftMs: 640.25 };
    const res = parseCalibrationJsonl(toJsonl([base, capable]));
    expect(res.problems).toEqual([]);
    expect(res.rows).toHaveLength(2);
    const [e, c] = res.rows;
    expect(e).toMatchObject({ line: 1, conditionId: 'cond:a', repeat: 2, role: 'efficient', model: 'eff-8b', n: 12000, k: 6000, r: 3, p: 1.25, noContention: false });
    expect(e?.ttftMs).toBeCloseTo(812.5, 6);
    expect(c).toMatchObject({ line: 2, role: 'capable', model: 'cap-70b', r: 0, p: null });
    expect(pairRows(res.rows).pairs).toHaveLength(1);
  });

  it('marks no-contention only for idle conditions with R = 0', () => {
    const idle = { ...base, noBackgroundLoad: true, noContention: false };
    const res = parseCalibrationJsonl(toJsonl([{ ...idle, r: 0, noContention: true }, { ...idle, repeat: 3, r: 2 }]));
    expect(res.rows.map((r) => r.noContention)).toEqual([true, false]);
  });

  it('skips background traffic, warm-ups and unfinished requests, and counts them', () => {
    const row = outcomeJsonRow(base);
    const lines = [
      JSON.stringify({ ...row, background: true }),
      JSON.stringify({ ...row, sessionId: 'warmup-1' }),
      JSON.stringify({ ...row, status: 'cancelled', ttftMs: null }),
      JSON.stringify(row),
    ];
    const res = parseCalibrationJsonl(lines.join('\n'));
    expect(res.problems).toEqual([]);
    expect(res.rows).toHaveLength(1);
    expect(res.skipped).toEqual({ background: 1, not_calibration: 1, status_cancelled: 1 });
  });

  it('names every bad row by its line', () => {
    const row = outcomeJsonRow(base);
    const lines = [
      JSON.stringify(row), // 1 ok
      '{not json', // 2
      '', // 3 blank: ignored
      JSON.stringify({ ...row, 'decision.observations.efficient.promptTokens': null }), // 4
      JSON.stringify({ ...row, 'decision.observations.efficient.bookedRequests': -1, sessionId: 'cal:cond:a:9:loaded' }), // 5
      JSON.stringify({ ...row, 'decision.observations.efficient.status': 'timeout' }), // 6
      JSON.stringify({ ...row, sessionId: 'cal:broken' }), // 7
      JSON.stringify({ ...row, servedPool: 'cap-70b' }), // 8
      JSON.stringify({ recordId: 'a decision row' }), // 9
      JSON.stringify(row), // 10 duplicate of line 1
      JSON.stringify({ ...row, 'decision.finalChoice.role': 'frontier' }), // 11
    ];
    const res = parseCalibrationJsonl(lines.join('\n'));
    expect(res.problems.map((p) => p.line)).toEqual([2, 4, 5, 6, 7, 8, 9, 10, 11]);
    const msg = (line: number): string => res.problems.find((p) => p.line === line)?.message ?? '';
    expect(msg(4)).toContain('promptTokens missing');
    expect(msg(5)).toContain('R = -1');
    expect(msg(6)).toContain('timeout');
    expect(msg(7)).toContain('cal:<condition>');
    expect(msg(8)).toContain('served by pool');
    expect(msg(9)).toContain('not an outcome row');
    expect(msg(10)).toContain('first on line 1');
    expect(msg(11)).toContain('efficient or capable');
    expect(res.rows.map((r) => r.line)).toEqual([1]);
    expect(res.lines).toBe(10);
  });

  it('takes explicit calibration columns over the session id', () => {
    const row = { ...outcomeJsonRow(base), 'calibration.conditionId': 'design-7', 'calibration.repeat': 0, 'calibration.noBackgroundLoad': true };
    const res = parseCalibrationJsonl(JSON.stringify(row));
    expect(res.rows[0]).toMatchObject({ conditionId: 'design-7', repeat: 0, noBackgroundLoad: true, noContention: false });
  });
});

describe('validateCalibrationRows', () => {
  it('refuses one role measured on two models and the same model in both roles', () => {
    const probs = validateCalibrationRows([
      { ...base, line: 1 },
      { ...base, line: 2, repeat: 5, model: 'other' },
      { ...base, line: 3, role: 'capable', model: 'eff-8b' },
    ]);
    expect(probs.map((p) => p.line)).toEqual([2, 3]);
  });
  it('refuses out-of-range values', () => {
    const probs = validateCalibrationRows([{ ...base, line: 4, n: 0, k: 1.5, p: -1, ttftMs: 0 }]);
    expect(probs.map((p) => p.message)).toEqual([
      'N = 0 must be an integer >= 1',
      'K = 1.5 must be an integer >= 0',
      'P = -1 must be a finite number >= 0',
      'TTFT = 0 ms must be a positive finite time',
    ]);
  });
});
