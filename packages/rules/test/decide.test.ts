import { describe, expect, it } from 'vitest';
import {
  decide,
  observed,
  ParameterStore,
  serializeParameterSet,
  type CandidateObservation,
  type DecisionInput,
  type ParameterSet,
  type Reason,
} from '@vantage/rules';
import { CAP_ROWS, CAPABLE, EFF_ROWS, EFFICIENT, candidate, input, model, params, type CandidateValues } from './fixtures';

describe("seed 000's worked example", () => {
  // Efficient: Q(2000, 0) = 1000, b0 = 100, bR = 300 with zR = 1 at R = 4 -> 1400 ms.
  // Capable:   Q(2000, 0) =  800, b0 = 100, R = 0 so zR = 0            ->  900 ms.
  const busy = input(candidate(EFFICIENT, { n: 2000, r: 4 }), candidate(CAPABLE, { n: 2000, r: 0 }));

  it('1.4 s vs 0.9 s with a 0.2 s margin -> capable', () => {
    const d = decide(busy, params({ variant: 'blind' }));
    expect(d.predictions.efficient?.blind).toMatchObject({ ok: true, ms: 1400 });
    expect(d.predictions.capable?.blind).toMatchObject({ ok: true, ms: 900 });
    expect(d.advantageMs.blind).toBe(500);
    expect(d).toMatchObject({ choice: 'capable', reason: 'overrode', couldAct: true, triggered: true, detail: null });
  });

  it('a 0.05 s advantage keeps efficient', () => {
    // Same capable side; efficient predicted 950 ms (b0 = -50, no load term).
    const p = params({
      variant: 'blind',
      models: {
        efficient: model(EFFICIENT, EFF_ROWS, { blind: { b0: -50, bN: 50, bR: 0, bP: 0 } }),
        capable: model(CAPABLE, CAP_ROWS),
      },
    });
    const d = decide(busy, p);
    expect(d.predictions.efficient?.blind).toMatchObject({ ok: true, ms: 950 });
    expect(d.advantageMs.blind).toBe(50);
    expect(d).toMatchObject({ choice: 'efficient', reason: 'kept_no_trigger', couldAct: true, triggered: false });
  });

  it('an advantage exactly equal to the margin does not trigger (strict >)', () => {
    // Efficient idle: 1000 + 100 = 1100; advantage 200 = margin.
    const d = decide(input(candidate(EFFICIENT, { n: 2000, r: 0 }), candidate(CAPABLE, { n: 2000 })), params({ variant: 'blind' }));
    expect(d.advantageMs.blind).toBe(200);
    expect(d.reason).toBe('kept_no_trigger');
  });

  it('the same example through the cache-aware estimator', () => {
    // Efficient: Q(2000, 0.25) = 850 + 100 + 300 = 1250.  Capable: Q(2000, 0.75) = 0.5*400 + 0.5*450 = 425 + 100 = 525.
    const x = input(candidate(EFFICIENT, { n: 2000, k: 500, r: 4 }), candidate(CAPABLE, { n: 2000, k: 1500 }));
    const d = decide(x, params({ variant: 'cache' }));
    expect(d.predictions.efficient?.cache).toMatchObject({ ok: true, ms: 1250 });
    expect(d.predictions.capable?.cache).toMatchObject({ ok: true, ms: 525 });
    expect(d.advantageMs.cache).toBe(725);
    expect(d.reason).toBe('overrode');
    // With a large enough margin the same observations keep efficient.
    expect(decide(x, params({ variant: 'cache', margins: { deltaBlindMs: 0, deltaCacheMs: 725 } })).reason).toBe('kept_no_trigger');
  });
});

describe('variants', () => {
  const cases: { name: string; p: ParameterSet; eff: CandidateValues; cap?: CandidateValues; reason: Reason }[] = [
    { name: 'stage never overrides', p: params({ variant: 'stage' }), eff: { r: 100, p: 100 }, reason: 'kept_stage_variant' },
    { name: 'count: R = r triggers', p: params({ variant: 'count' }), eff: { r: 4 }, reason: 'overrode' },
    { name: 'count: R = r - 1 does not', p: params({ variant: 'count' }), eff: { r: 3, p: 100 }, reason: 'kept_no_trigger' },
    { name: 'count_prefill: R term alone', p: params({ variant: 'count_prefill' }), eff: { r: 4, p: 0 }, reason: 'overrode' },
    { name: 'count_prefill: P term alone', p: params({ variant: 'count_prefill' }), eff: { r: 0, p: 1.6 }, reason: 'overrode' },
    { name: 'count_prefill: P = p does not (strict >)', p: params({ variant: 'count_prefill' }), eff: { r: 3, p: 1.5 }, reason: 'kept_no_trigger' },
    {
      name: 'count_prefill: disabled r never triggers',
      p: params({ variant: 'count_prefill', thresholds: { r: null, p: 1.5 } }),
      eff: { r: 1000, p: 1 },
      reason: 'kept_no_trigger',
    },
    {
      name: 'count_prefill: disabled p never triggers',
      p: params({ variant: 'count_prefill', thresholds: { r: 4, p: null } }),
      eff: { r: 0, p: 1e6 },
      reason: 'kept_no_trigger',
    },
    { name: 'blind: busy efficient', p: params({ variant: 'blind' }), eff: { r: 4 }, reason: 'overrode' },
    { name: 'blind: idle efficient', p: params({ variant: 'blind' }), eff: { r: 0 }, reason: 'kept_no_trigger' },
    // Heavy reuse on efficient makes the cache-aware estimate keep it where the blind one would not.
    { name: 'cache: efficient holds the prefix', p: params({ variant: 'cache' }), eff: { r: 4, k: 2000 }, reason: 'kept_no_trigger' },
    { name: 'blind: same observations override', p: params({ variant: 'blind' }), eff: { r: 4, k: 2000 }, reason: 'overrode' },
    { name: 'cache: nothing cached', p: params({ variant: 'cache' }), eff: { r: 4, k: 0 }, reason: 'overrode' },
  ];
  it.each(cases)('$name', ({ p, eff, cap, reason }) => {
    const d = decide(input(candidate(EFFICIENT, eff), candidate(CAPABLE, cap)), p);
    expect(d.reason).toBe(reason);
    expect(d.choice).toBe(reason === 'overrode' ? 'capable' : 'efficient');
    expect(d.couldAct).toBe(reason === 'overrode' || reason === 'kept_no_trigger');
    expect(d.triggered).toBe(reason === 'overrode');
    expect(d.variant).toBe(p.variant);
  });

  it('records both estimators for both candidates under every variant', () => {
    for (const variant of ['stage', 'count', 'count_prefill', 'blind', 'cache'] as const) {
      const d = decide(input(candidate(EFFICIENT, { r: 4, k: 500 }), candidate(CAPABLE, { k: 1500 })), params({ variant }));
      expect(d.predictions.efficient?.blind.ok).toBe(true);
      expect(d.predictions.efficient?.cache.ok).toBe(true);
      expect(d.predictions.capable?.blind.ok).toBe(true);
      expect(d.predictions.capable?.cache.ok).toBe(true);
      expect(d.advantageMs).toEqual({ blind: 500, cache: 725 });
    }
  });

  it('the count rules do not depend on estimator inputs', () => {
    // N far outside the Q grid: predictions fail, but the count rule still acts.
    const d = decide(input(candidate(EFFICIENT, { n: 1e6, r: 4 }), candidate(CAPABLE, { n: 1e6 })), params({ variant: 'count' }));
    expect(d.predictions.efficient?.blind.ok).toBe(false);
    expect(d.reason).toBe('overrode');
  });
});

describe('gate G: every branch', () => {
  // Baseline for each row: count + prefill with both terms enabled, efficient
  // busy enough to trigger; each row breaks exactly one thing.
  const overriding = { r: 5, p: 2 };
  type Row = {
    name: string;
    x: DecisionInput;
    p?: ParameterSet;
    reason: Reason;
    candidate?: 'efficient' | 'capable';
    input?: string;
  };
  const eff = (over: Partial<CandidateObservation> = {}, v: CandidateValues = overriding): CandidateObservation => ({ ...candidate(EFFICIENT, v), ...over });
  const cap = (over: Partial<CandidateObservation> = {}, v: CandidateValues = {}): CandidateObservation => ({ ...candidate(CAPABLE, v), ...over });
  const cp = params({ variant: 'count_prefill' });

  const rows: Row[] = [
    { name: 'baseline overrides', x: input(eff(), cap()), reason: 'overrode' },
    { name: 'capable proposal', x: input(eff(), cap(), { proposal: 'capable' }), reason: 'kept_capable_proposal' },
    {
      name: 'efficient indexer unavailable',
      x: { ...input(eff(), cap()), efficient: { kind: 'unavailable', cause: 'timeout after 20 ms' } },
      reason: 'fallback_indexer_unavailable',
      candidate: 'efficient',
    },
    {
      name: 'capable indexer unavailable',
      x: { ...input(eff(), cap()), capable: { kind: 'unavailable', cause: 'no responders' } },
      reason: 'fallback_indexer_unavailable',
      candidate: 'capable',
    },
    { name: 'observation for another model', x: input(eff({ model: 'other' }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'model' },
    { name: 'capable not schedulable', x: input(eff(), cap({ schedulable: observed.ok(false, 1) })), reason: 'fallback_capable_unschedulable', candidate: 'capable', input: 'schedulable' },
    { name: 'no capable worker', x: input(eff(), cap({ placement: null })), reason: 'fallback_capable_unschedulable', candidate: 'capable' },
    {
      // As the decision service reports an empty capable pool: no placement, and nothing observed about a worker.
      name: 'empty capable pool',
      x: input(
        eff(),
        cap({
          placement: null,
          schedulable: observed.missing('pool cap offered no worker'),
          reusablePrefixTokens: observed.missing('pool cap offered no worker'),
          bookedRequests: observed.missing('pool cap offered no worker'),
          prefillPressure: observed.missing('pool cap offered no worker'),
        }),
      ),
      reason: 'fallback_capable_unschedulable',
      candidate: 'capable',
      input: 'schedulable',
    },
    { name: 'schedulable missing', x: input(eff(), cap({ schedulable: observed.missing('worker not in discovery') })), reason: 'fallback_missing_observation', candidate: 'capable', input: 'schedulable' },
    { name: 'schedulable too old', x: input(eff(), cap({ schedulable: observed.ok(true, 501) })), reason: 'fallback_stale_observation', candidate: 'capable', input: 'schedulable' },
    { name: 'efficient R missing', x: input(eff({ bookedRequests: observed.missing() }), cap()), reason: 'fallback_missing_observation', candidate: 'efficient', input: 'R' },
    { name: 'efficient P missing (no advertised capacity)', x: input(eff({ prefillPressure: observed.missing('max_num_batched_tokens unknown') }), cap()), reason: 'fallback_missing_observation', candidate: 'efficient', input: 'P' },
    { name: 'capable R missing', x: input(eff(), cap({ bookedRequests: observed.missing() })), reason: 'fallback_missing_observation', candidate: 'capable', input: 'R' },
    { name: 'efficient R invalid', x: input(eff({ bookedRequests: observed.invalid('counter underflow') }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'R' },
    { name: 'efficient R negative', x: input(eff({ bookedRequests: observed.ok(-1, 1) }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'R' },
    { name: 'efficient R fractional', x: input(eff({ bookedRequests: observed.ok(2.5, 1) }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'R' },
    { name: 'efficient P NaN', x: input(eff({ prefillPressure: observed.ok(Number.NaN, 1) }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'P' },
    { name: 'negative age', x: input(eff({ bookedRequests: observed.ok(5, -3) }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'R' },
    { name: 'efficient R marked stale', x: input(eff({ bookedRequests: observed.stale(5, 1, 'resync') }), cap()), reason: 'fallback_stale_observation', candidate: 'efficient', input: 'R' },
    { name: 'load suspicion on efficient', x: input(eff({ suspicions: [{ scope: 'load', code: 'bookings_expired' }] }), cap()), reason: 'fallback_suspect_index', candidate: 'efficient', input: 'R' },
    { name: 'load suspicion on capable', x: input(eff(), cap({ suspicions: [{ scope: 'load', code: 'sync_gap' }] })), reason: 'fallback_suspect_index', candidate: 'capable', input: 'R' },
    { name: 'prefix suspicion does not stop a count rule', x: input(eff({ suspicions: [{ scope: 'prefix', code: 'event_gap' }] }), cap()), reason: 'overrode' },
    { name: 'efficient R too old', x: input(eff({ bookedRequests: observed.ok(5, 501) }), cap()), reason: 'fallback_stale_observation', candidate: 'efficient', input: 'R' },
    { name: 'age exactly maxAgeMs is accepted', x: input(eff({ bookedRequests: observed.ok(5, 500) }), cap()), reason: 'overrode' },
    { name: 'capable at destination limit', x: input(eff(), cap({}, { r: 8 })), reason: 'fallback_destination_limit', candidate: 'capable', input: 'R' },
    { name: 'capable just under destination limit', x: input(eff(), cap({}, { r: 7 })), reason: 'overrode' },
    { name: 'local in-flight at limit', x: input(eff(), cap(), { localCapableInFlight: 4 }), reason: 'fallback_local_limit', candidate: 'capable' },
    { name: 'local in-flight under limit', x: input(eff(), cap(), { localCapableInFlight: 3 }), reason: 'overrode' },
    // Inputs a variant does not read cannot stop it.
    { name: 'count ignores a missing P', p: params({ variant: 'count' }), x: input(eff({ prefillPressure: observed.missing() }), cap()), reason: 'overrode' },
    { name: 'count_prefill with p disabled ignores a missing P', p: params({ variant: 'count_prefill', thresholds: { r: 4, p: null } }), x: input(eff({ prefillPressure: observed.missing() }), cap()), reason: 'overrode' },
    { name: 'count ignores a missing efficient N', p: params({ variant: 'count' }), x: input(eff({ promptTokens: observed.missing() }), cap()), reason: 'overrode' },
    // Estimator variants read N, R, P of both candidates, and cache also K.
    { name: 'blind needs capable P', p: params({ variant: 'blind' }), x: input(eff(), cap({ prefillPressure: observed.missing() })), reason: 'fallback_missing_observation', candidate: 'capable', input: 'P' },
    { name: 'blind needs efficient N', p: params({ variant: 'blind' }), x: input(eff({ promptTokens: observed.ok(0, 1) }), cap()), reason: 'fallback_invalid_observation', candidate: 'efficient', input: 'N' },
    { name: 'blind does not need K', p: params({ variant: 'blind' }), x: input(eff({ reusablePrefixTokens: observed.missing() }, { r: 4, p: 0 }), cap()), reason: 'overrode' },
    { name: 'cache needs K', p: params({ variant: 'cache' }), x: input(eff(), cap({ reusablePrefixTokens: observed.invalid('decode') })), reason: 'fallback_invalid_observation', candidate: 'capable', input: 'K' },
    { name: 'cache honours a prefix suspicion', p: params({ variant: 'cache' }), x: input(eff({ suspicions: [{ scope: 'prefix', code: 'unknown_parent' }] }), cap()), reason: 'fallback_suspect_index', candidate: 'efficient', input: 'K' },
    { name: 'blind ignores a prefix suspicion', p: params({ variant: 'blind' }), x: input(eff({ suspicions: [{ scope: 'prefix', code: 'unknown_parent' }] }, { r: 4, p: 0 }), cap()), reason: 'overrode' },
    { name: 'cache: K too old', p: params({ variant: 'cache' }), x: input(eff({ reusablePrefixTokens: observed.ok(0, 900) }), cap()), reason: 'fallback_stale_observation', candidate: 'efficient', input: 'K' },
    // Predictions.
    { name: 'blind: N outside the Q grid', p: params({ variant: 'blind' }), x: input(eff({}, { r: 4, p: 0, n: 9000 }), cap()), reason: 'fallback_prediction_out_of_range', candidate: 'efficient' },
    { name: 'cache: capable N outside the Q grid', p: params({ variant: 'cache' }), x: input(eff(), cap({}, { n: 500 })), reason: 'fallback_prediction_out_of_range', candidate: 'capable' },
    {
      name: 'blind: non-positive capable prediction',
      p: params({
        variant: 'blind',
        models: { efficient: model(EFFICIENT, EFF_ROWS), capable: model(CAPABLE, CAP_ROWS, { blind: { b0: -5000, bN: 0, bR: 0, bP: 0 } }) },
      }),
      x: input(eff(), cap()),
      reason: 'fallback_prediction_invalid',
      candidate: 'capable',
    },
  ];

  it.each(rows)('$name -> $reason', (row) => {
    const d = decide(row.x, row.p ?? cp);
    expect(d.reason).toBe(row.reason);
    if (row.reason === 'overrode') {
      expect(d.choice).toBe('capable');
      expect(d.couldAct).toBe(true);
    } else {
      expect(d.choice).toBe(row.x.proposal);
      expect(d.couldAct).toBe(false);
      expect(d.triggered).toBe(false);
    }
    if (row.candidate !== undefined) expect(d.detail?.candidate).toBe(row.candidate);
    if (row.input !== undefined) expect(d.detail?.input).toBe(row.input);
    if (row.reason.startsWith('fallback_')) expect(d.detail?.message).toMatch(/\S/);
  });

  it('reports the first failing check in the documented order', () => {
    // Unschedulable capable AND missing efficient R AND over the destination limit:
    // the schedulable check comes first.
    const x = input(eff({ bookedRequests: observed.missing() }), cap({ schedulable: observed.ok(false, 1) }, { r: 100 }));
    expect(decide(x, cp).reason).toBe('fallback_capable_unschedulable');
    // Validity before age: a missing R and a too-old P report the missing R.
    const y = input(eff({ bookedRequests: observed.missing(), prefillPressure: observed.ok(2, 10_000) }), cap());
    expect(decide(y, cp).reason).toBe('fallback_missing_observation');
  });

  it('an unreadable schedulable flag is an invalid observation', () => {
    expect(decide(input(eff(), cap({ schedulable: observed.invalid('bad flag') })), cp)).toMatchObject({ reason: 'fallback_invalid_observation', detail: { input: 'schedulable' } });
  });
});

describe('parameter reload and in-flight decisions', () => {
  it('a decision uses the set read at its start, even if a reload lands meanwhile', () => {
    const store = new ParameterStore(params({ variant: 'count', version: 'v1' }));
    const x = input(candidate(EFFICIENT, { r: 5 }), candidate(CAPABLE));
    // The service reads the set once, then awaits the indexers...
    const snapshot = store.current();
    // ...while an operator installs a Stage-baseline set.
    const replaced = store.tryReplace(serializeParameterSet(params({ variant: 'stage', version: 'v2' })));
    expect(replaced).toEqual({ ok: true, previousVersion: 'v1', version: 'v2' });
    const inFlight = decide(x, snapshot);
    expect(inFlight).toMatchObject({ reason: 'overrode', parameterSetVersion: 'v1', variant: 'count' });
    // The next decision sees the new set.
    expect(decide(x, store.current())).toMatchObject({ reason: 'kept_stage_variant', parameterSetVersion: 'v2' });
    // And the snapshot cannot be changed under the in-flight decision.
    expect(Object.isFrozen(snapshot.thresholds)).toBe(true);
    expect(() => {
      (snapshot.thresholds as { r: number | null }).r = 1000;
    }).toThrow(TypeError);
  });
});
