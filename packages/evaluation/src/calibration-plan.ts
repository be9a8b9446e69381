/**
 * The calibration plan: the workload conditions seed 000 asks for ("Collect GPU calibration data.
 * Vary prompt length, reusable prefix length, prefill contention and generation contention. Include
 * equal request counts with short versus long background generations, and a busy capable
 * destination. Background requests use the same accounting path so they appear in Dynamo's load.
 * Measure both candidates here to assess predictions."), plus the no-contention (N, f) grid the Q
 * tables are read from. Two measurement sets (seed 000: "Use separate measurements for fitting,
 * estimating uncertainty and selecting candidates"): the Q set (the grid, no background, session ids
 * ending `:qgrid`, never split) and the contention conditions (every loaded factor plus zero-load
 * references, split by condition). Pure data: the README says what a condition holds, and the fleet's
 * README how a harness runs one repeat; session ids follow @vantage/fitting's convention.
 */
import { calibrationSessionId } from '@vantage/fitting';
import { DEFAULT_PARAMETER_SET, validateParameterSet, type ParameterSet, type Role } from '@vantage/rules';
import { hash32, shuffled, streamFor } from '@vantage/random';

export type { Role } from '@vantage/rules';
const ROLES: readonly Role[] = ['efficient', 'capable'];

/** Which seed-000 factor a condition varies. */
export const CALIBRATION_FACTORS = [
  /** Q-table grid point (the Q set): no background, prompt length N and cached fraction f varied. */
  'no_contention',
  /** A contention condition at zero load: a loaded probe's shape with no background (the corrections' R = 0 anchor). */
  'zero_load',
  /** Background requests with long, uncached prompts: booked prefill work. */
  'prefill_contention',
  /** Background requests with long outputs, probed once they are decoding: busy while P falls toward 0. */
  'generation_contention',
  /** Equal background counts, short versus long generations (a matched pair per `contrastGroup`). */
  'generation_length_contrast',
  /** The capable candidate's worker is busy (up to the gate's destination limit) while efficient is loaded too. */
  'busy_capable',
] as const;
export type CalibrationFactor = (typeof CALIBRATION_FACTORS)[number];

export interface BackgroundLoadSpec {
  /** Pool (candidate model) whose worker the background requests are booked on. */
  readonly pool: Role;
  /** The requests go to the worker the probe's candidate in this pool would be routed to. */
  readonly placement: 'probe_candidate_worker';
  readonly count: number;
  /** Prompt length of each background request (fresh content: nothing reusable). */
  readonly promptTokens: number;
  readonly uncached: true;
  readonly outputTokens: number;
}

export interface ProbeSpec {
  /** N: prompt tokens, exact in each model's own tokenizer (the harness pads or trims the fresh suffix). */
  readonly promptTokens: number;
  /** K: the prefix warmed first on both candidates (a multiple of the KV block size). */
  readonly prefixTokens: number;
  /** f = K / N as designed. */
  readonly cachedFraction: number;
  /** Output tokens of the probe (TTFT is the target, so this stays short). */
  readonly outputTokens: number;
}

/** When the probe is sent: while the background prefills, or once it is all decoding (README, `probeTiming`). */
export type ProbeTiming = 'immediate' | 'after_background_first_tokens';

export interface CalibrationRun {
  readonly repeat: number;
  /** The probes' session id (fitting's convention). */
  readonly sessionId: string;
  readonly warmupSessionId: string;
  readonly backgroundSessionId: string;
  /** Seed for this repeat's token content: prefix and suffix are fresh per repeat, so repeats never reuse each other's cache. */
  readonly contentSeed: number;
}

export interface CalibrationCondition {
  readonly id: string;
  readonly factor: CalibrationFactor;
  readonly description: string;
  readonly repeats: number;
  /** No background load at all (fitting's `idle`). */
  readonly noBackgroundLoad: boolean;
  /** A Q-set point (factor `no_contention`): measured for the Q tables alone, never in a split. */
  readonly qSet: boolean;
  readonly probe: ProbeSpec;
  readonly background: readonly BackgroundLoadSpec[];
  readonly probeTiming: ProbeTiming;
  /** Both candidates are measured with the same probe in every repeat. */
  readonly measure: readonly Role[];
  /** The candidates the probe's prefix is warmed on: both, or the efficient one only (README, `warm`). */
  readonly warm: readonly Role[];
  /** Conditions that differ only in the factor under test share a group (short vs long generations). */
  readonly contrastGroup: string | null;
  /** Background on the capable worker at or above the gate's destination limit: the gate must block overrides. */
  readonly atDestinationLimit: boolean;
  readonly runs: readonly CalibrationRun[];
}

export interface PresetSpec {
  readonly repeats: number;
  readonly probeOutputTokens: number;
  /** The no-contention grid (Q tables). Must include f = 0 and at least 2 values per axis. */
  readonly qGrid: { readonly promptTokens: readonly number[]; readonly cachedFractions: readonly number[] };
  /** Probe shapes of the loaded conditions: crossed with every load, or cycled through them. */
  readonly loadedProbes: readonly ProbeShape[];
  readonly probeCrossing: 'cross' | 'cycle';
  /**
   * Further zero-load references beside the loaded probes' shapes: contention conditions with no
   * background (R = 0, P = 0) that anchor the load corrections where most decisions are made.
   */
  readonly zeroLoadProbes?: readonly ProbeShape[];
  readonly prefill: {
    readonly counts: readonly number[];
    readonly promptTokens: readonly number[];
    readonly outputTokens: number;
    readonly pools: readonly Role[];
    /** Also measure each efficient-pool prefill condition with the prefix warmed on the efficient candidate only (capable cold). */
    readonly coldCapable?: boolean;
  };
  readonly generation: { readonly counts: readonly number[]; readonly promptTokens: number; readonly outputTokens: readonly number[]; readonly pools: readonly Role[] };
  readonly contrast: { readonly counts: readonly number[]; readonly promptTokens: number; readonly shortOutputTokens: number; readonly longOutputTokens: number };
  /** Capable background counts; `'limit'` stands for the gate's destination limit. */
  readonly busyCapable: {
    readonly counts: readonly (number | 'limit')[];
    readonly promptTokens: number;
    readonly outputTokens: number;
    /** Load on the efficient worker at the same time, so a rule would want to move the request. */
    readonly efficientLoad: { readonly count: number; readonly promptTokens: number; readonly outputTokens: number };
  };
}

type ProbeShape = { readonly promptTokens: number; readonly cachedFraction: number };
/** Probe shapes from (N, f) pairs. */
const shapes = (...nf: readonly (readonly [number, number])[]): ProbeShape[] => nf.map(([promptTokens, cachedFraction]) => ({ promptTokens, cachedFraction }));

/**
 * Minutes of simulated time: every factor at two levels, two repeats. The Q grid spans what the main
 * job's agentic sessions send (a 6,000-token system prompt, contexts up to 16,384 tokens, most of each
 * turn's prompt cached): a prediction outside the grid is out of range and leaves Stage's choice.
 * 0.984375 = 63/64 keeps K on the 64-token block grid at every N.
 */
const SMALL: PresetSpec = {
  repeats: 2,
  probeOutputTokens: 8,
  qGrid: { promptTokens: [4096, 8192, 16384], cachedFractions: [0, 0.5, 0.875, 0.984375] },
  loadedProbes: shapes([4096, 0], [16384, 0.875], [8192, 0.984375]),
  probeCrossing: 'cycle',
  prefill: { counts: [1, 4], promptTokens: [8192], outputTokens: 4, pools: ['efficient', 'capable'] },
  generation: { counts: [2, 6], promptTokens: 512, outputTokens: [256], pools: ['efficient'] },
  contrast: { counts: [4], promptTokens: 1024, shortOutputTokens: 8, longOutputTokens: 256 },
  busyCapable: { counts: [4, 'limit'], promptTokens: 256, outputTokens: 16, efficientLoad: { count: 2, promptTokens: 8192, outputTokens: 4 } },
};

export const CALIBRATION_PRESETS: Readonly<Record<'tiny' | 'small' | 'job' | 'full', PresetSpec>> = Object.freeze({
  /**
   * The end-to-end test's plan: every factor at one level, a 2 x 2 Q grid, nine conditions. Enough for
   * the fitting tool to produce a parameter set, far too little to trust its numbers.
   */
  tiny: {
    repeats: 2,
    probeOutputTokens: 4,
    qGrid: { promptTokens: [1024, 4096], cachedFractions: [0, 0.5] },
    loadedProbes: shapes([4096, 0.5]),
    probeCrossing: 'cycle',
    prefill: { counts: [2], promptTokens: [4096], outputTokens: 4, pools: ['efficient'] },
    generation: { counts: [2], promptTokens: 512, outputTokens: [128], pools: ['efficient'] },
    contrast: { counts: [2], promptTokens: 512, shortOutputTokens: 4, longOutputTokens: 128 },
    busyCapable: { counts: ['limit'], promptTokens: 256, outputTokens: 8, efficientLoad: { count: 1, promptTokens: 4096, outputTokens: 4 } },
  },
  small: SMALL,
  /** The main job's plan: the `small` grid and the loads where the rules have something to decide (the README gives its levels and why). */
  job: {
    ...SMALL,
    loadedProbes: shapes([4096, 0], [16384, 0], [16384, 0.875], [8192, 0.984375]),
    probeCrossing: 'cross',
    zeroLoadProbes: shapes([4096, 0.5], [4096, 0.875], [4096, 0.984375], [8192, 0], [8192, 0.5], [8192, 0.875], [16384, 0.5], [16384, 0.984375]),
    prefill: { counts: [1, 2, 4], promptTokens: [2048, 8192], outputTokens: 4, pools: ['efficient'], coldCapable: true },
    generation: { ...SMALL.generation, counts: [2, 8] },
    busyCapable: { ...SMALL.busyCapable, promptTokens: 1024 },
  },
  /** The GPU campaign: a wider grid, more levels, three repeats, probes crossed with every load. */
  full: {
    repeats: 3,
    probeOutputTokens: 32,
    qGrid: { promptTokens: [1024, 4096, 16384, 32768, 65536], cachedFractions: [0, 0.25, 0.5, 0.75, 0.875, 0.9375] },
    loadedProbes: shapes([4096, 0], [16384, 0.5], [32768, 0.9375]),
    probeCrossing: 'cross',
    prefill: { counts: [1, 2, 4, 8], promptTokens: [8192, 32768], outputTokens: 8, pools: ['efficient', 'capable'] },
    generation: { counts: [2, 4, 8, 16], promptTokens: 1024, outputTokens: [1024, 4096], pools: ['efficient', 'capable'] },
    contrast: { counts: [2, 4, 8], promptTokens: 2048, shortOutputTokens: 8, longOutputTokens: 2048 },
    busyCapable: { counts: [4, 16, 'limit'], promptTokens: 1024, outputTokens: 512, efficientLoad: { count: 4, promptTokens: 16384, outputTokens: 8 } },
  },
});

export type CalibrationPreset = keyof typeof CALIBRATION_PRESETS;

interface CalibrationPlanOptions {
  /** Default `small`. */
  readonly preset?: CalibrationPreset;
  /** Replaces the preset wholesale (tests, custom campaigns). */
  readonly spec?: PresetSpec;
  /** Seed of the run order and of the content seeds (default 1). */
  readonly seed?: number;
  /** Overrides the preset's repeats. */
  readonly repeats?: number;
  /** KV block size: every warmed prefix K is a multiple of it (default 16). */
  readonly blockSize?: number;
  /** The gate's destination limit of the runs to be evaluated (default: rules' development gate). */
  readonly destinationLimit?: number;
}

/**
 * A rough cost model for the plan's duration budget (not a prediction of
 * TTFT): prefill time of one uncached prompt (Dynamo mocker's polynomial),
 * one decode step, and a settle gap between runs.
 */
const COST = Object.freeze({
  prefillMs: (t: number): number => (t <= 0 ? 0 : 4.209989e-7 * t * t + 1.518344e-2 * t + 16.50142),
  decodeStepMs: 30,
  settleMs: 500,
});

export interface CalibrationPlan {
  readonly preset: CalibrationPreset | 'custom';
  readonly seed: number;
  readonly blockSize: number;
  readonly destinationLimit: number;
  readonly qGrid: PresetSpec['qGrid'];
  readonly conditions: readonly CalibrationCondition[];
  /** Every repeat of every condition, shuffled (seeded) so slow drift does not line up with a factor. */
  readonly runOrder: readonly { readonly conditionId: string; readonly repeat: number }[];
  readonly totals: {
    readonly conditions: number;
    /** Conditions of the Q set (the no-contention grid); the rest are contention conditions. */
    readonly qSetConditions: number;
    readonly runs: number;
    /** Two per run: one per candidate. */
    readonly probeRequests: number;
    readonly warmupRequests: number;
    readonly backgroundRequests: number;
    readonly byFactor: Readonly<Record<CalibrationFactor, number>>;
  };
  /** Sum of `estimateRunMs` over all runs. */
  readonly estimatedDurationMs: number;
}

function fmtF(f: number): string {
  return f.toFixed(4).replace(/0+$/, '').replace(/\.$/, '');
}

function probeOf(n: number, f: number, osl: number, blockSize: number): ProbeSpec {
  if (!Number.isInteger(n) || n <= 0) throw new RangeError(`probe prompt length ${n} must be a positive integer`);
  if (!(f >= 0 && f < 1)) throw new RangeError(`cached fraction ${f} must lie in [0, 1)`);
  const k = f * n;
  if (!Number.isInteger(k) || k % blockSize !== 0) {
    // README, "K is block-aligned": a partial block is never reused.
    throw new RangeError(`K = f N = ${k} (N ${n}, f ${f}) is not a multiple of the block size ${blockSize}`);
  }
  return { promptTokens: n, prefixTokens: k, cachedFraction: f, outputTokens: osl };
}

/** Rough wall time of one repeat of a condition (see `COST`). */
function estimateRunMs(c: CalibrationCondition): number {
  const warm = c.probe.prefixTokens > 0 ? COST.prefillMs(c.probe.prefixTokens) + COST.decodeStepMs : 0;
  let end = 0;
  for (const pool of ROLES) {
    const bg = c.background.filter((b) => b.pool === pool);
    const bgPrefill = bg.reduce((s, b) => s + b.count * COST.prefillMs(b.promptTokens), 0);
    const bgDecode = bg.reduce((m, b) => Math.max(m, b.outputTokens), 0) * COST.decodeStepMs;
    // Waiting for the background's first tokens, or queued behind its prefill: the same time either way.
    const probeEnd = bgPrefill + COST.prefillMs(c.probe.promptTokens - c.probe.prefixTokens) + c.probe.outputTokens * COST.decodeStepMs;
    end = Math.max(end, probeEnd, bgPrefill + bgDecode);
  }
  return warm + end + COST.settleMs;
}

/**
 * The plan. Deterministic given its options; throws RangeError on a spec
 * that cannot be measured as designed (K off the block grid, a Q grid without
 * f = 0 or with fewer than two points on an axis, non-positive counts).
 */
export function calibrationPlan(options: CalibrationPlanOptions = {}): CalibrationPlan {
  const preset = options.spec === undefined ? (options.preset ?? 'small') : 'custom';
  const spec = options.spec ?? CALIBRATION_PRESETS[options.preset ?? 'small'];
  const seed = options.seed ?? 1;
  const blockSize = options.blockSize ?? 16;
  const limit = options.destinationLimit ?? DEFAULT_PARAMETER_SET.gate.destinationLimit;
  const repeats = options.repeats ?? spec.repeats;
  const osl = spec.probeOutputTokens;
  if (!Number.isInteger(repeats) || repeats < 1) throw new RangeError(`repeats must be a positive integer, got ${repeats}`);
  if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`destinationLimit must be a positive integer, got ${limit}`);
  const g = spec.qGrid;
  if (new Set(g.promptTokens).size < 2 || new Set(g.cachedFractions).size < 2) throw new RangeError('the Q grid needs at least 2 prompt lengths and 2 cached fractions');
  if (!g.cachedFractions.includes(0)) throw new RangeError('the Q grid needs f = 0 (the cache-blind estimator reads Q(N, 0))');
  if (spec.loadedProbes.length === 0) throw new RangeError('loadedProbes is empty');

  type Draft = Omit<CalibrationCondition, 'runs' | 'repeats' | 'measure' | 'warm'> & { readonly warm?: readonly Role[] };
  const drafts: Draft[] = [];
  /** One condition; no background load exactly when `background` is empty, and only the no-contention grid is the Q set. */
  const add = (id: string, factor: CalibrationFactor, description: string, probe: ProbeSpec, background: readonly BackgroundLoadSpec[], more: Partial<Pick<Draft, 'probeTiming' | 'contrastGroup' | 'atDestinationLimit' | 'warm'>> = {}): void => {
    drafts.push({
      id,
      factor,
      description,
      noBackgroundLoad: background.length === 0,
      qSet: factor === 'no_contention',
      probe,
      background,
      probeTiming: more.probeTiming ?? 'immediate',
      contrastGroup: more.contrastGroup ?? null,
      atDestinationLimit: more.atDestinationLimit ?? false,
      ...(more.warm === undefined ? {} : { warm: more.warm }),
    });
  };
  const bg = (pool: Role, count: number, promptTokens: number, outputTokens: number): BackgroundLoadSpec => {
    if (!Number.isInteger(count) || count < 1) throw new RangeError(`background count ${count} must be a positive integer`);
    return { pool, placement: 'probe_candidate_worker', count, promptTokens, uncached: true, outputTokens };
  };
  let loadedIndex = 0;
  /** The probe shapes one load is measured with. */
  const probesFor = (): ProbeSpec[] => {
    const shapes = spec.probeCrossing === 'cross' ? spec.loadedProbes : [spec.loadedProbes[loadedIndex++ % spec.loadedProbes.length]!];
    return shapes.map((s) => probeOf(s.promptTokens, s.cachedFraction, osl, blockSize));
  };
  const probeTag = (p: ProbeSpec): string => `n${p.promptTokens}-f${fmtF(p.cachedFraction)}`;

  for (const n of g.promptTokens) {
    for (const f of g.cachedFractions) {
      const probe = probeOf(n, f, osl, blockSize);
      add(`nc-${probeTag(probe)}`, 'no_contention', `Q-table point: N ${n}, f ${fmtF(f)}, no background load`, probe, []);
    }
  }
  const zeroShapes = [...spec.loadedProbes, ...(spec.zeroLoadProbes ?? [])].filter(
    (s, i, all) => all.findIndex((t) => t.promptTokens === s.promptTokens && t.cachedFraction === s.cachedFraction) === i,
  );
  for (const s of zeroShapes) {
    const probe = probeOf(s.promptTokens, s.cachedFraction, osl, blockSize);
    add(`zero-${probeTag(probe)}`, 'zero_load', `contention condition at zero load: the loaded probe N ${probe.promptTokens}, f ${fmtF(probe.cachedFraction)} with no background`, probe, []);
  }
  for (const pool of spec.prefill.pools) {
    for (const count of spec.prefill.counts) {
      for (const len of spec.prefill.promptTokens) {
        for (const probe of probesFor()) {
          const cold = spec.prefill.coldCapable === true && pool === 'efficient' && probe.prefixTokens > 0 ? [false, true] : [false];
          for (const capableCold of cold) {
            add(
              `pf-${pool}-c${count}-l${len}-${probeTag(probe)}${capableCold ? '-capcold' : ''}`,
              'prefill_contention',
              `${count} uncached ${len}-token prompts booked on the ${pool} candidate's worker; probe while they prefill${capableCold ? '; prefix warmed on the efficient candidate only (capable cold)' : ''}`,
              probe,
              [bg(pool, count, len, spec.prefill.outputTokens)],
              capableCold ? { warm: ['efficient'] } : {},
            );
          }
        }
      }
    }
  }
  for (const pool of spec.generation.pools) {
    for (const count of spec.generation.counts) {
      for (const out of spec.generation.outputTokens) {
        for (const probe of probesFor()) {
          const description = `${count} requests generating ${out} tokens on the ${pool} candidate's worker; probe once all are decoding`;
          add(`gen-${pool}-c${count}-o${out}-${probeTag(probe)}`, 'generation_contention', description, probe, [bg(pool, count, spec.generation.promptTokens, out)], { probeTiming: 'after_background_first_tokens' });
        }
      }
    }
  }
  for (const count of spec.contrast.counts) {
    for (const probe of probesFor()) {
      const contrastGroup = `contrast-c${count}-${probeTag(probe)}`;
      for (const [kind, out] of [
        ['short', spec.contrast.shortOutputTokens],
        ['long', spec.contrast.longOutputTokens],
      ] as const) {
        const description = `${count} background requests about to finish (${kind} generations, ${out} tokens) on the efficient worker; same count and prompts as its pair`;
        add(`gl-${kind}-c${count}-o${out}-${probeTag(probe)}`, 'generation_length_contrast', description, probe, [bg('efficient', count, spec.contrast.promptTokens, out)], { probeTiming: 'after_background_first_tokens', contrastGroup });
      }
    }
  }
  const e = spec.busyCapable.efficientLoad;
  for (const level of spec.busyCapable.counts) {
    const count = level === 'limit' ? limit : level;
    for (const probe of probesFor()) {
      add(
        `busy-cap-c${count}${level === 'limit' ? '-limit' : ''}-${probeTag(probe)}`,
        'busy_capable',
        `capable worker busy with ${count} requests${count >= limit ? ` (at the gate's destination limit ${limit})` : ''}; efficient loaded with ${e.count} long prompts`,
        probe,
        [bg('capable', count, spec.busyCapable.promptTokens, spec.busyCapable.outputTokens), bg('efficient', e.count, e.promptTokens, e.outputTokens)],
        { atDestinationLimit: count >= limit },
      );
    }
  }

  const ids = new Set<string>();
  const conditions: CalibrationCondition[] = drafts.map((d) => {
    if (ids.has(d.id)) throw new RangeError(`duplicate condition id ${d.id}: the spec repeats a level`);
    ids.add(d.id);
    const runs: CalibrationRun[] = [];
    for (let r = 0; r < repeats; r++) {
      runs.push({
        repeat: r,
        sessionId: calibrationSessionId(d.id, r, d.noBackgroundLoad, d.qSet),
        warmupSessionId: `calwarm:${d.id}:${r}`,
        backgroundSessionId: `calbg:${d.id}:${r}`,
        contentSeed: hash32(seed, 'content', d.id, r),
      });
    }
    return { ...d, repeats, measure: ROLES, warm: d.warm ?? ROLES, runs };
  });

  const all = conditions.flatMap((c) => c.runs.map((r) => ({ conditionId: c.id, repeat: r.repeat })));
  const runOrder = shuffled(all, streamFor(seed, 'run-order'));
  const byFactor = Object.fromEntries(CALIBRATION_FACTORS.map((f) => [f, conditions.filter((c) => c.factor === f).length])) as Record<CalibrationFactor, number>;
  const runs = all.length;
  return {
    preset,
    seed,
    blockSize,
    destinationLimit: limit,
    qGrid: g,
    conditions,
    runOrder,
    totals: {
      conditions: conditions.length,
      qSetConditions: conditions.filter((c) => c.qSet).length,
      runs,
      probeRequests: runs * ROLES.length,
      warmupRequests: conditions.reduce((s, c) => s + (c.probe.prefixTokens > 0 ? c.repeats * c.warm.length : 0), 0),
      backgroundRequests: conditions.reduce((s, c) => s + c.repeats * c.background.reduce((t, b) => t + b.count, 0), 0),
      byFactor,
    },
    estimatedDurationMs: conditions.reduce((s, c) => s + c.repeats * estimateRunMs(c), 0),
  };
}

/**
 * The parameter set calibration runs under: the experimental path (both candidates observed, decision
 * records with every observation) with a rule that never fires, so Stage's proposal — which the
 * calibration harness sets to the candidate it measures — is always executed.
 */
export function calibrationParameterSet(destinationLimit: number, stamp: string): ParameterSet {
  const checked = validateParameterSet({
    ...DEFAULT_PARAMETER_SET,
    version: `calibration-${stamp}`,
    variant: 'count',
    thresholds: { r: 1_000_000, p: null },
    gate: { ...DEFAULT_PARAMETER_SET.gate, destinationLimit },
    provenance: { source: 'calibration', note: 'observes both candidates, never overrides (r = 1e6): calibration measures the proposed candidate' },
  });
  if (!checked.ok) throw new Error(`calibration parameter set is invalid: ${checked.errors.join('; ')}`);
  return checked.value;
}
