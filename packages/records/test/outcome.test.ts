import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeSingleObject, joinOutcome, OUTCOME_RECORD_CURRENT, type LifecycleEventInput } from '../src/index';
import { baselineDecision, decision, ev } from './fixtures';

const T0 = 1_732_000_000_000; // decision timestamp in the fixture
const usage = { inputTokens: 100_000, outputTokens: 512, cachedTokens: 90_000 };

describe('joinOutcome', () => {
  it('completed: TTFT and latency from the decision timestamp, usage and uncached input', () => {
    const r = joinOutcome(decision(), [ev('first_token', T0 + 412.5), ev('done', T0 + 3_000, { usage })], {
      requestId: 'req-1',
      closedBy: 'complete',
      joinLatencyMs: 12,
    });
    expect(r).toMatchObject({
      status: 'completed',
      arrivalMs: T0,
      firstTokenMs: T0 + 413, // timestamp-millis is whole ms
      endMs: T0 + 3_000,
      ttftMs: 412.5, // the measurement itself keeps sub-ms precision
      latencyMs: 3_000,
      inputTokens: 100_000,
      outputTokens: 512,
      cachedTokens: 90_000,
      uncachedInputTokens: 10_000,
      routingOverheadUs: 2_400,
      background: false,
      sessionId: 'sess-α',
      servedPool: 'qwen3-235b',
      error: null,
    });
    expect(r.join).toEqual({
      hasDecision: true,
      hasFirstToken: true,
      hasTerminal: true,
      hasUsage: true,
      eventCount: 2,
      duplicateEvents: 0,
      ignoredEvents: 0,
      closedBy: 'complete',
      joinLatencyMs: 12,
    });
  });

  it('cancelled and failed keep TTFT but have no full-response latency', () => {
    const c = joinOutcome(decision(), [ev('first_token', T0 + 100), ev('cancelled', T0 + 900)], { requestId: 'req-1', closedBy: 'complete' });
    expect(c).toMatchObject({ status: 'cancelled', ttftMs: 100, latencyMs: null, endMs: T0 + 900 });
    const f = joinOutcome(decision(), [ev('failed', T0 + 50, { error: 'worker 7 unreachable' })], { requestId: 'req-1', closedBy: 'complete' });
    expect(f).toMatchObject({ status: 'failed', ttftMs: null, latencyMs: null, error: 'worker 7 unreachable' });
  });

  it('timeout: both sides present, no terminal event by the deadline', () => {
    const r = joinOutcome(decision(), [ev('first_token', T0 + 100)], { requestId: 'req-1', closedBy: 'deadline' });
    expect(r).toMatchObject({ status: 'timeout', ttftMs: 100, endMs: null });
  });

  it('incomplete: a decision whose lifecycle never arrived', () => {
    const r = joinOutcome(decision(), [], { requestId: 'req-1', closedBy: 'deadline' });
    expect(r).toMatchObject({ status: 'incomplete', servedPool: null, join: { hasDecision: true, eventCount: 0 } });
  });

  it('incomplete: lifecycle of a non-background request without its decision, measurements still kept', () => {
    const r = joinOutcome(null, [ev('first_token', T0 + 100), ev('done', T0 + 500, { usage })], { requestId: 'req-1', closedBy: 'deadline', arrivalMs: T0 });
    expect(r).toMatchObject({ status: 'incomplete', decision: null, ttftMs: 100, routingOverheadUs: null, sessionId: 'sess-α' });
  });

  it('background traffic needs no decision', () => {
    const r = joinOutcome(null, [ev('done', T0 + 500)], { requestId: 'req-1', closedBy: 'complete', background: true, arrivalMs: T0 });
    expect(r).toMatchObject({ status: 'completed', background: true, latencyMs: 500, ttftMs: null });
  });

  it('the decision is authoritative for the background marker', () => {
    const r = joinOutcome(baselineDecision({ background: true }), [ev('done', T0 + 1)], { requestId: 'req-1', closedBy: 'complete', background: false });
    expect(r.background).toBe(true);
  });

  it('duplicates: earliest first token and terminal win; a same-time tie goes to the pessimistic status', () => {
    const r = joinOutcome(
      decision(),
      [ev('first_token', T0 + 300), ev('first_token', T0 + 200), ev('done', T0 + 800), ev('failed', T0 + 800, { error: 'x' }), ev('done', T0 + 900)],
      { requestId: 'req-1', closedBy: 'complete' },
    );
    expect(r).toMatchObject({ status: 'failed', ttftMs: 200, endMs: T0 + 800, join: { duplicateEvents: 3, eventCount: 5 } });
  });

  it('ignores events of other requests and with unusable timestamps', () => {
    const r = joinOutcome(decision(), [ev('done', T0 + 10, { requestId: 'other' }), ev('first_token', Number.NaN), ev('done', T0 + 20)], {
      requestId: 'req-1',
      closedBy: 'complete',
    });
    expect(r).toMatchObject({ status: 'completed', join: { ignoredEvents: 2, eventCount: 1 } });
  });

  it('latest usage report wins; an inconsistent cached count gives no uncached value', () => {
    const r = joinOutcome(
      decision(),
      [ev('usage', T0 + 5, { usage: { inputTokens: 10, outputTokens: 0, cachedTokens: 0 } }), ev('done', T0 + 9, { usage: { inputTokens: 10, outputTokens: 3, cachedTokens: 11 } })],
      { requestId: 'req-1', closedBy: 'complete' },
    );
    expect(r).toMatchObject({ outputTokens: 3, cachedTokens: 11, uncachedInputTokens: null });
  });

  it('sources are sorted by (stream, sequence) with redeliveries removed', () => {
    const r = joinOutcome(decision(), [ev('done', T0 + 9)], {
      requestId: 'req-1',
      closedBy: 'complete',
      sources: [
        { stream: 'LIFECYCLE', sequence: 9, part: 'done' },
        { stream: 'DECISIONS', sequence: 4, part: 'decision' },
        { stream: 'LIFECYCLE', sequence: 2, part: 'first_token' },
        { stream: 'LIFECYCLE', sequence: 9, part: 'done' },
      ],
    });
    expect(r.sources.map((s) => `${s.stream}:${s.sequence}`)).toEqual(['DECISIONS:4', 'LIFECYCLE:2', 'LIFECYCLE:9']);
  });

  it('is independent of event order and always encodable (property)', () => {
    const kind = fc.constantFrom<LifecycleEventInput['kind']>('first_token', 'done', 'cancelled', 'failed', 'usage');
    const event = fc.record({
      kind,
      at: fc.integer({ min: 0, max: 60_000 }),
      usage: fc.option(fc.record({ inputTokens: fc.nat(200_000), outputTokens: fc.nat(8_000), cachedTokens: fc.nat(200_000) }), { nil: undefined }),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 8 }), fc.boolean(), (raw, withDecision) => {
        // Distinct times so "earliest" is unambiguous under any permutation.
        const events = raw.map((e, i) => ev(e.kind, T0 + e.at + i / 16, e.usage ? { usage: e.usage } : {}));
        const d = withDecision ? decision() : null;
        const opts = { requestId: 'req-1', closedBy: 'deadline' as const };
        const a = joinOutcome(d, events, opts);
        const b = joinOutcome(d, [...events].reverse(), opts);
        // Usage is "latest wins" and times are distinct, so order cannot matter.
        expect(b).toEqual(a);
        expect(() => encodeSingleObject(OUTCOME_RECORD_CURRENT, a)).not.toThrow();
      }),
      { seed: 7, numRuns: 300 },
    );
  });
});
