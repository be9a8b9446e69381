import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  activeSequencesSubject,
  decodeSubjectSegment,
  encodeSubjectSegment,
  eventPlaneSubject,
  jetStreamKvStreamName,
  jetStreamKvSubject,
  kvEventsSubject,
  kvMetricsSubject,
  legacyKvEventsSubject,
} from '../src/index';

describe('subject builders', () => {
  it('builds each generation for ordinary names', () => {
    expect(kvEventsSubject('dynamo', 'backend')).toBe('namespace.dynamo.component.backend.kv-events');
    expect(kvMetricsSubject('dynamo')).toBe('namespace.dynamo.kv_metrics');
    expect(activeSequencesSubject('dynamo', 'router')).toBe('namespace.dynamo.component.router.active_sequences_events');
    expect(kvEventsSubject('dynamo', 'backend', 'generate')).toBe('namespace.dynamo.component.backend.endpoint.generate.kv-events');
    expect(legacyKvEventsSubject('dynamo', 'backend')).toBe('namespace.dynamo.component.backend.kv_events');
    expect(jetStreamKvStreamName('dynamo', 'backend')).toBe('namespace-dynamo-component-backend-kv-events');
    expect(jetStreamKvSubject('dynamo', 'backend')).toBe('namespace-dynamo-component-backend-kv-events.kv-events');
  });

  it('percent-encodes bytes outside [A-Za-z0-9_-], upper-case hex, UTF-8', () => {
    expect(encodeSubjectSegment('a.b*c>d e')).toBe('a%2Eb%2Ac%3Ed%20e');
    expect(encodeSubjectSegment('Model_1-x')).toBe('Model_1-x');
    expect(encodeSubjectSegment('é')).toBe('%C3%A9');
    expect(eventPlaneSubject({ namespace: 'my.ns', component: 'w', endpoint: 'gen/1' }, 'kv-events')).toBe(
      'namespace.my%2Ens.component.w.endpoint.gen%2F1.kv-events',
    );
  });

  it('slugs JetStream stream names like Dynamo (lower-case, _ and . to -)', () => {
    expect(jetStreamKvStreamName('My_NS', 'back.end')).toBe('namespace-my-ns-component-back-end-kv-events');
  });

  it('refuses names that would change a legacy subject', () => {
    expect(() => legacyKvEventsSubject('a.b', 'c')).toThrow(RangeError);
    expect(() => legacyKvEventsSubject('a', '>')).toThrow(RangeError);
    expect(() => eventPlaneSubject({ namespace: '' }, 'kv_metrics')).toThrow(RangeError);
  });

  it('segment encoding round-trips any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 30 }), (v) => {
        const enc = encodeSubjectSegment(v);
        expect(enc).toMatch(/^[A-Za-z0-9_%-]*$/);
        expect(decodeSubjectSegment(enc)).toEqual({ ok: true, value: v });
      }),
      { seed: 3, numRuns: 300 },
    );
  });

  it('rejects bad segments', () => {
    expect(decodeSubjectSegment('%G1').ok).toBe(false);
    expect(decodeSubjectSegment('%4').ok).toBe(false);
    expect(decodeSubjectSegment('a.b').ok).toBe(false);
    expect(decodeSubjectSegment('%FF').ok).toBe(false);
  });
});
