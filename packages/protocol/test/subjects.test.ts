import { describe, expect, it } from 'vitest';
import {
  bookingsSubject,
  isValidPoolName,
  lifecycleSubject,
  observeSubject,
  ROUTE_SUBJECT,
  workersSubject,
} from '@vantage/protocol';

describe('subjects', () => {
  it('builds the per-pool subjects', () => {
    expect(observeSubject('qwen-8b')).toBe('vantage.v1.observe.qwen-8b');
    expect(bookingsSubject('qwen-8b')).toBe('vantage.v1.bookings.qwen-8b');
    expect(lifecycleSubject('qwen-8b')).toBe('vantage.v1.lifecycle.qwen-8b');
    expect(workersSubject('qwen-8b')).toBe('vantage.v1.workers.qwen-8b');
    expect(ROUTE_SUBJECT).toBe('vantage.v1.route');
  });

  it.each(['a.b', '*', '>', 'x>', 'with space', '', 'a'.repeat(65), 'tab\t', 'ümlaut'])('refuses pool name %j', (pool) => {
    expect(isValidPoolName(pool)).toBe(false);
    expect(() => observeSubject(pool)).toThrow(RangeError);
  });

});
