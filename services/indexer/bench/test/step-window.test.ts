import { describe, expect, it } from 'vitest';
import type { ObserveSteps } from '@vantage/indexer';
import { StepWindow } from '../step-window';

const steps = (encoding: ObserveSteps['encoding'], k: number): ObserveSteps => ({
  pool: 'p',
  encoding,
  requestBytes: 100,
  replyBytes: 200,
  decodeUs: k,
  answerUs: 10 * k,
  respondUs: 1,
  totalUs: 11 * k + 1,
});

describe('step-times window', () => {
  it('summarises each full window of its encoding and ignores the other', () => {
    const w = new StepWindow('binary', 100);
    const lines: string[] = [];
    for (let k = 1; k <= 250; k++) {
      expect(w.add(steps('json', k))).toBeNull();
      const l = w.add(steps('binary', k));
      if (l !== null) lines.push(l);
    }
    // Two full windows (1..100, 101..200); the third is not full yet.
    expect(lines).toEqual([
      'binary 100 requests, p50/p99 µs: decode 51.0/100.0 | answer 510.0/1000.0 | respond 1.0/1.0 | total 562.0/1101.0',
      'binary 100 requests, p50/p99 µs: decode 151.0/200.0 | answer 1510.0/2000.0 | respond 1.0/1.0 | total 1662.0/2201.0',
    ]);
  });

  it('refuses a window size that is not a positive integer', () => {
    expect(() => new StepWindow('json', 0)).toThrow(RangeError);
    expect(() => new StepWindow('json', 1.5)).toThrow(RangeError);
  });
});
