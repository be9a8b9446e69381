import { describe, expect, it } from 'vitest';
import {
  allPoolsSubject,
  bookingsSubject,
  DECISIONS_SUBJECT,
  isValidPoolName,
  lifecycleSubject,
  observeSubject,
  parseSubject,
  ROUTE_SUBJECT,
  workersSubject,
} from '@vantage/protocol';

describe('subjects', () => {
  it('builds the per-pool subjects', () => {
    expect(observeSubject('qwen-8b')).toBe('vantage.v1.observe.qwen-8b');
    expect(bookingsSubject('qwen-8b')).toBe('vantage.v1.bookings.qwen-8b');
    expect(lifecycleSubject('qwen-8b')).toBe('vantage.v1.lifecycle.qwen-8b');
    expect(workersSubject('qwen-8b')).toBe('vantage.v1.workers.qwen-8b');
    expect(allPoolsSubject('lifecycle')).toBe('vantage.v1.lifecycle.*');
    expect(ROUTE_SUBJECT).toBe('vantage.v1.route');
    expect(DECISIONS_SUBJECT).toBe('vantage.v1.decisions');
  });

  it.each(['a.b', '*', '>', 'x>', 'with space', '', 'a'.repeat(65), 'tab\t', 'ümlaut'])('refuses pool name %j', (pool) => {
    expect(isValidPoolName(pool)).toBe(false);
    expect(() => observeSubject(pool)).toThrow(RangeError);
  });

  it('parses our subjects back and nothing else', () => {
    expect(parseSubject('vantage.v1.bookings.p_1')).toEqual({ kind: 'bookings', pool: 'p_1' });
    expect(parseSubject(ROUTE_SUBJECT)).toEqual({ kind: 'route' });
    expect(parseSubject(DECISIONS_SUBJECT)).toEqual({ kind: 'decisions' });
    expect(parseSubject('vantage.v2.bookings.p')).toBeUndefined();
    expect(parseSubject('vantage.v1.other.p')).toBeUndefined();
    expect(parseSubject('vantage.v1.bookings.p.q')).toBeUndefined();
    expect(parseSubject('vantage.v1.bookings.*')).toBeUndefined();
  });
});
