// The calibration plan covers every factor of seed 000's "Collect GPU
// calibration data", one test per factor, and writes session ids that
// @vantage/fitting reads.
import { describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import { joinOutcome, outcomeToJsonRow, type DecisionRecord } from '@vantage/records';
import { fitAll, parseCalibrationJsonl, rowFromOutcomeJson } from '@vantage/fitting';
import { DEFAULT_PARAMETER_SET } from '@vantage/rules';
import { CALIBRATION_FACTORS, CALIBRATION_PRESETS, calibrationPlan, type CalibrationCondition, type CalibrationPlan } from '../src/calibration-plan';
import { MODELS, observation } from './synthetic';

const small = calibrationPlan({ preset: 'small', seed: 3 });
const full = calibrationPlan({ preset: 'full', seed: 3 });
const job = calibrationPlan({ preset: 'job', seed: 3 });
const plans: [string, CalibrationPlan][] = [
  ['small', small],
  ['job', job],
  ['full', full],
];

const loaded = (p: CalibrationPlan): CalibrationCondition[] => p.conditions.filter((c) => !c.noBackgroundLoad);

describe.each(plans)('calibration plan (%s)', (_name, plan) => {
  it('varies prompt length N, with and without contention', () => {
    const idleN = new Set(plan.conditions.filter((c) => c.factor === 'no_contention').map((c) => c.probe.promptTokens));
    expect(idleN.size).toBeGreaterThanOrEqual(3);
    expect(new Set(loaded(plan).map((c) => c.probe.promptTokens)).size).toBeGreaterThanOrEqual(2);
  });

  it('varies the reusable prefix: K = f N warmed first, block-aligned, f = 0 and f > 0 at every N', () => {
    const nc = plan.conditions.filter((c) => c.factor === 'no_contention');
    for (const n of plan.qGrid.promptTokens) {
      const fs = nc.filter((c) => c.probe.promptTokens === n).map((c) => c.probe.cachedFraction);
      expect(fs).toContain(0);
      expect(fs.some((f) => f >= 0.5)).toBe(true);
    }
    for (const c of plan.conditions) {
      expect(c.probe.prefixTokens).toBe(c.probe.cachedFraction * c.probe.promptTokens);
      expect(c.probe.prefixTokens % plan.blockSize).toBe(0);
    }
    expect(new Set(loaded(plan).map((c) => c.probe.cachedFraction)).size).toBeGreaterThanOrEqual(2);
  });

  it('has a complete no-contention (N, f) grid for the Q tables', () => {
    const nc = plan.conditions.filter((c) => c.factor === 'no_contention');
    expect(nc).toHaveLength(plan.qGrid.promptTokens.length * plan.qGrid.cachedFractions.length);
    for (const n of plan.qGrid.promptTokens) {
      for (const f of plan.qGrid.cachedFractions) {
        const c = nc.find((x) => x.probe.promptTokens === n && x.probe.cachedFraction === f);
        expect(c, `grid point N ${n} f ${f}`).toBeDefined();
        expect(c?.noBackgroundLoad).toBe(true);
        expect(c?.background).toEqual([]);
      }
    }
  });

  it('measures the Q grid as its own set, and zero-load references among the contention conditions', () => {
    for (const c of plan.conditions) expect(c.qSet).toBe(c.factor === 'no_contention');
    expect(plan.totals.qSetConditions).toBe(plan.qGrid.promptTokens.length * plan.qGrid.cachedFractions.length);
    const zero = plan.conditions.filter((c) => c.factor === 'zero_load');
    const spec = CALIBRATION_PRESETS[plan.preset as 'small'];
    // The loaded probes' shapes, and the preset's further zero-load references (job), each once.
    const extra = spec.zeroLoadProbes ?? [];
    expect(zero.length).toBe(new Set([...spec.loadedProbes, ...extra].map((x) => `${x.promptTokens}/${x.cachedFraction}`)).size);
    for (const c of zero) {
      expect(c.noBackgroundLoad).toBe(true);
      expect(c.qSet).toBe(false);
      const shape = (l: { promptTokens: number; cachedFraction: number }): boolean => l.promptTokens === c.probe.promptTokens && l.cachedFraction === c.probe.cachedFraction;
      expect(loaded(plan).some((l) => shape(l.probe)) || extra.some(shape)).toBe(true);
    }
  });

  it('varies prefill contention: long uncached background prompts booked on the candidate worker, probed while they prefill', () => {
    const pf = plan.conditions.filter((c) => c.factor === 'prefill_contention');
    expect(new Set(pf.map((c) => c.background[0]?.count)).size).toBeGreaterThanOrEqual(2);
    for (const c of pf) {
      expect(c.probeTiming).toBe('immediate');
      for (const b of c.background) {
        expect(b.uncached).toBe(true);
        expect(b.placement).toBe('probe_candidate_worker');
        // The job plan also books short backlogs (2,048 tokens: P 0.25), below the break-even point.
        expect(b.promptTokens).toBeGreaterThanOrEqual(plan.preset === 'job' ? 2048 : 8192);
        expect(b.outputTokens).toBeLessThanOrEqual(16);
      }
    }
    // Both pools, so both models' load corrections are fitted. The job plan's backlogs are on the
    // efficient pool (against an idle capable one); its capable load comes from busy_capable.
    if (plan.preset === 'job') {
      expect(new Set(pf.map((c) => c.background[0]?.pool))).toEqual(new Set(['efficient']));
      expect(plan.conditions.some((c) => c.factor === 'busy_capable' && c.background.some((b) => b.pool === 'capable'))).toBe(true);
    } else expect(new Set(pf.map((c) => c.background[0]?.pool))).toEqual(new Set(['efficient', 'capable']));
  });

  it('varies generation contention: long background outputs, probed once every background request is decoding', () => {
    const gen = plan.conditions.filter((c) => c.factor === 'generation_contention');
    expect(new Set(gen.map((c) => c.background[0]?.count)).size).toBeGreaterThanOrEqual(2);
    for (const c of gen) {
      expect(c.probeTiming).toBe('after_background_first_tokens');
      for (const b of c.background) {
        expect(b.outputTokens).toBeGreaterThanOrEqual(256);
        expect(b.outputTokens).toBeGreaterThan(b.promptTokens / 8);
      }
    }
  });

  it('includes equal request counts with short versus long background generations', () => {
    const gl = plan.conditions.filter((c) => c.factor === 'generation_length_contrast');
    const groups = new Map<string, CalibrationCondition[]>();
    for (const c of gl) groups.set(c.contrastGroup as string, [...(groups.get(c.contrastGroup as string) ?? []), c]);
    expect(groups.size).toBeGreaterThanOrEqual(1);
    for (const [, pair] of groups) {
      expect(pair).toHaveLength(2);
      const [a, b] = pair as [CalibrationCondition, CalibrationCondition];
      // Identical except the background output length.
      expect(a.probe).toEqual(b.probe);
      expect(a.probeTiming).toBe('after_background_first_tokens');
      expect(b.probeTiming).toBe(a.probeTiming);
      expect(a.background).toHaveLength(1);
      const [ba, bb] = [a.background[0], b.background[0]];
      expect({ ...ba, outputTokens: 0 }).toEqual({ ...bb, outputTokens: 0 });
      const outs = [ba?.outputTokens as number, bb?.outputTokens as number].sort((x, y) => x - y);
      expect(outs[1]! / outs[0]!).toBeGreaterThanOrEqual(16);
    }
  });

  it('includes a busy capable destination, up to the gate destination limit, with efficient loaded too', () => {
    const busy = plan.conditions.filter((c) => c.factor === 'busy_capable');
    expect(busy.length).toBeGreaterThanOrEqual(2);
    for (const c of busy) {
      expect(c.background.some((b) => b.pool === 'capable' && b.count >= 1)).toBe(true);
      expect(c.background.some((b) => b.pool === 'efficient')).toBe(true);
    }
    const atLimit = busy.filter((c) => c.atDestinationLimit);
    expect(atLimit.length).toBeGreaterThanOrEqual(1);
    for (const c of atLimit) expect(c.background.find((b) => b.pool === 'capable')?.count).toBe(DEFAULT_PARAMETER_SET.gate.destinationLimit);
    expect(busy.some((c) => !c.atDestinationLimit)).toBe(true);
  });

  it('measures both candidates in every condition, every repeat under fitting\'s session ids', () => {
    for (const c of plan.conditions) {
      expect(c.measure).toEqual(['efficient', 'capable']);
      expect(c.runs.map((r) => r.repeat)).toEqual(Array.from({ length: c.repeats }, (_, i) => i));
      for (const r of c.runs) expect(r.sessionId).toBe(`cal:${c.id}:${r.repeat}:${c.qSet ? 'qgrid' : c.noBackgroundLoad ? 'idle' : 'loaded'}`);
    }
    expect(new Set(plan.conditions.map((c) => c.id)).size).toBe(plan.conditions.length);
    for (const f of CALIBRATION_FACTORS) expect(plan.totals.byFactor[f]).toBeGreaterThan(0);
  });

  it('orders every run once, shuffled reproducibly', () => {
    expect(plan.runOrder).toHaveLength(plan.totals.runs);
    expect(new Set(plan.runOrder.map((r) => `${r.conditionId}#${r.repeat}`)).size).toBe(plan.totals.runs);
    expect(calibrationPlan({ preset: plan.preset as 'small' | 'full', seed: 3 })).toEqual(plan);
    expect(calibrationPlan({ preset: plan.preset as 'small' | 'full', seed: 4 }).runOrder).not.toEqual(plan.runOrder);
  });
});

describe('presets and options', () => {
  it('job: zero-load references for the extra shapes, once each; capable cold beside warm', () => {
    const zero = job.conditions.filter((c) => c.factor === 'zero_load');
    const shapes = zero.map((c) => `${c.probe.promptTokens}/${c.probe.cachedFraction}`);
    expect(new Set(shapes).size).toBe(shapes.length);
    expect(zero.length).toBe(new Set([...CALIBRATION_PRESETS.job.loadedProbes, ...(CALIBRATION_PRESETS.job.zeroLoadProbes ?? [])].map((s) => `${s.promptTokens}/${s.cachedFraction}`)).size);
    expect(zero.every((c) => c.noBackgroundLoad && !c.qSet)).toBe(true);
    const cold = job.conditions.filter((c) => c.warm.length === 1);
    expect(cold.length).toBeGreaterThan(0);
    expect(cold.every((c) => c.warm[0] === 'efficient' && c.factor === 'prefill_contention')).toBe(true);
    // Every other condition of every preset warms both candidates.
    for (const p of [small, full, job]) expect(p.conditions.filter((c) => c.warm.length !== 1).every((c) => c.warm.length === 2)).toBe(true);
  });

  it('the small preset fits in a few minutes of simulated time; the full one is larger', () => {
    expect(small.estimatedDurationMs).toBeLessThan(5 * 60_000);
    expect(small.estimatedDurationMs).toBeGreaterThan(30_000);
    expect(full.totals.runs).toBeGreaterThan(3 * small.totals.runs);
    expect(full.estimatedDurationMs).toBeGreaterThan(small.estimatedDurationMs);
  });

  it('follows the destination limit and repeats it is given, and refuses unmeasurable designs', () => {
    const p = calibrationPlan({ destinationLimit: 6, repeats: 4 });
    const lim = p.conditions.filter((c) => c.atDestinationLimit);
    expect(lim.length).toBeGreaterThan(0);
    for (const c of lim) expect(c.background.find((b) => b.pool === 'capable')?.count).toBe(6);
    expect(p.conditions.every((c) => c.repeats === 4)).toBe(true);
    expect(() => calibrationPlan({ blockSize: 48 })).toThrow(/block size/);
    const spec = CALIBRATION_PRESETS.small;
    expect(() => calibrationPlan({ spec: { ...spec, qGrid: { promptTokens: [1024, 4096], cachedFractions: [0.5, 0.875] } } })).toThrow(/f = 0/);
  });
});

describe('fitting reads what the plan asks the harness to write', () => {
  const t0 = 1_750_000_000_000;
  const models = MODELS;

  /** One probe's outcome row as the live path would record it, from a toy TTFT model of the condition. */
  function probeRow(c: CalibrationCondition, repeat: number, role: 'efficient' | 'capable', sessionId: string, noise: number): Record<string, unknown> {
    const bg = c.background.filter((b) => b.pool === role);
    const r = bg.reduce((s, b) => s + b.count, 0);
    const p = c.probeTiming === 'immediate' ? bg.reduce((s, b) => s + b.count * b.promptTokens, 0) / 8192 : 0;
    const { promptTokens: n, prefixTokens: k } = c.probe;
    const speed = role === 'efficient' ? 1 : 1.4;
    const ttft = speed * (20 + 0.02 * (n - k) + 0.002 * n) + (role === 'efficient' ? 250 : 100) * Math.log1p(r) + 300 * Math.log1p(p) + noise;
    const obs = (rr: 'efficient' | 'capable') =>
      observation(rr, {
        workerId: 7n as WorkerId,
        promptTokens: n,
        overlapTokens: k,
        bookedRequests: rr === role ? r : 0,
        prefillPressure: rr === role ? Math.round(p * 100) / 100 : 0,
        bookedPrefillTokens: null,
        collectionDurationUs: 300,
      });
    const requestId = `${sessionId}/${role}`;
    const decision: DecisionRecord = {
      recordId: `d-${requestId}`,
      requestId,
      sessionId,
      timestampMs: t0,
      parameterSetVersion: 'calibration',
      variant: 'baseline',
      stageProposal: { model: models.efficient, role: 'efficient' },
      finalChoice: { model: models[role], role },
      reason: 'overrode',
      detail: 'calibration: forced candidate',
      couldAct: false,
      triggered: false,
      gate: null,
      observations: [obs('efficient'), obs('capable')],
      predictions: [],
      advantageMs: null,
      chosenWorkerId: 7n as WorkerId,
      chosenDpRank: 0,
      endpoint: null,
      observeDurationUs: 500,
      decisionDurationUs: 800,
      decisionInstanceId: 'cal',
      background: false,
    };
    const ev = (kind: 'first_token' | 'done', atMs: number) => ({ requestId, sessionId, pool: models[role], kind, atMs });
    return outcomeToJsonRow(joinOutcome(decision, [ev('first_token', t0 + ttft), ev('done', t0 + ttft + 100 + repeat)], { requestId, closedBy: 'complete' }));
  }

  it('parses every probe, skips warm-ups and background, and fits a parameter set from the small plan', () => {
    const plan = calibrationPlan({ preset: 'small', repeats: 3, seed: 2 });
    const lines: string[] = [];
    let i = 0;
    for (const c of plan.conditions) {
      for (const run of c.runs) {
        for (const role of c.measure) lines.push(JSON.stringify(probeRow(c, run.repeat, role, run.sessionId, ((i++ * 37) % 11) - 5)));
        const warm = { ...probeRow(c, run.repeat, 'efficient', run.warmupSessionId, 0), requestId: `${run.warmupSessionId}/w` };
        expect(rowFromOutcomeJson(warm, 0)).toEqual({ kind: 'skip', reason: 'not_calibration' });
        const bg = { ...probeRow(c, run.repeat, 'efficient', run.backgroundSessionId, 0), background: true };
        expect(rowFromOutcomeJson(bg, 0)).toEqual({ kind: 'skip', reason: 'background' });
      }
    }
    const parsed = parseCalibrationJsonl(lines.join('\n'));
    expect(parsed.problems).toEqual([]);
    expect(parsed.rows).toHaveLength(plan.totals.probeRequests);
    const ids = new Set(parsed.rows.map((r) => r.conditionId));
    expect(ids).toEqual(new Set(plan.conditions.map((c) => c.id)));
    expect(parsed.rows.filter((r) => r.noContention).length).toBe(plan.conditions.filter((c) => c.noBackgroundLoad).length * 3 * 2);
    expect(parsed.rows.filter((r) => r.qSet === true).length).toBe(plan.totals.qSetConditions * 3 * 2);
    const fit = fitAll(parsed.rows, { seed: 1, variant: 'cache', createdAt: '2026-01-01T00:00:00Z' });
    expect(fit.ok ? 'ok' : [...fit.errors, ...fit.problems.map((p) => p.message)].join('; ')).toBe('ok');
    if (!fit.ok) return;
    // Q from the Q set alone; only contention conditions are split, every one of them exactly once.
    expect(fit.report.options.qSource).toBe('qset');
    expect(fit.report.input.qSetConditions).toBe(plan.totals.qSetConditions);
    const split = [...fit.report.splits.fitting.conditionIds, ...fit.report.splits.uncertainty.conditionIds, ...fit.report.splits.selection.conditionIds];
    expect(new Set(split).size).toBe(split.length);
    expect(new Set(split)).toEqual(new Set(plan.conditions.filter((c) => !c.qSet).map((c) => c.id)));
    for (const role of ['efficient', 'capable'] as const) {
      expect(fit.report.models[role].qMeasurements).toBe(plan.totals.qSetConditions * 3);
      expect(fit.report.models[role].qCells.every((c) => c.source === 'measured')).toBe(true);
    }
  });
});
