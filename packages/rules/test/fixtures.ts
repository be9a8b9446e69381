import type { WorkerId } from '@vantage/types';
import {
  createParameterSet,
  observed,
  type CandidateObservation,
  type DecisionInput,
  type FittedParameters,
  type ModelParameters,
  type ParameterSet,
} from '@vantage/rules';

export const EFFICIENT = 'efficient-8b';
export const CAPABLE = 'capable-70b';

/**
 * Q tables chosen so that interpolated values are exact in binary floating
 * point (weights of 0.5 and sums of integers):
 *
 *   efficient  f=0   f=0.5  f=1        capable  f=0   f=0.5  f=1
 *   N=1000     800   600    400        N=1000   700   500    300
 *   N=3000    1200   800    400        N=3000   900   600    300
 *   N=5000    2000  1200    400        N=5000  1300   800    300
 */
export function model(name: string, rows: number[][], over: Partial<ModelParameters> = {}): ModelParameters {
  return {
    name,
    qTable: { nGrid: [1000, 3000, 5000], fGrid: [0, 0.5, 1], valuesMs: rows, clampN: false, clampF: false },
    standardization: {
      // zN = 0 at N = 2000, zR = 1 at R = 4, zP = P-scaled: chosen so the
      // worked examples come out in whole milliseconds.
      logN: { mean: Math.log1p(2000), sd: 1 },
      logR: { mean: 0, sd: Math.log1p(4) },
      logP: { mean: 0, sd: 1 },
    },
    blind: { b0: 100, bN: 50, bR: 300, bP: 0 },
    cache: { c0: 100, cN: 50, cR: 300, cP: 0 },
    ...over,
  };
}

export const EFF_ROWS = [
  [800, 600, 400],
  [1200, 800, 400],
  [2000, 1200, 400],
];
export const CAP_ROWS = [
  [700, 500, 300],
  [900, 600, 300],
  [1300, 800, 300],
];

export function fitted(over: Partial<FittedParameters> = {}): FittedParameters {
  return {
    variant: 'count',
    models: { efficient: model(EFFICIENT, EFF_ROWS), capable: model(CAPABLE, CAP_ROWS) },
    thresholds: { r: 4, p: 1.5 },
    margins: { deltaBlindMs: 200, deltaCacheMs: 200 },
    gate: { maxAgeMs: 500, destinationLimit: 8, localLimit: 4 },
    createdAt: '2026-03-01T12:00:00Z',
    provenance: { fitReport: 'test' },
    ...over,
  };
}

export function params(over: Partial<FittedParameters> = {}): ParameterSet {
  const r = createParameterSet(fitted(over));
  if (!r.ok) throw new Error(`fixture parameter set invalid: ${r.errors.join('; ')}`);
  return r.value;
}

export interface CandidateValues {
  n?: number;
  k?: number;
  r?: number;
  p?: number;
  ageMs?: number;
}

export function candidate(modelName: string, v: CandidateValues = {}, over: Partial<CandidateObservation> = {}): CandidateObservation {
  const age = v.ageMs ?? 10;
  return {
    model: modelName,
    placement: { workerId: 0xffff_ffff_ffff_fff0n as WorkerId, dpRank: 0 },
    schedulable: observed.ok(true, age),
    promptTokens: observed.ok(v.n ?? 2000, age),
    reusablePrefixTokens: observed.ok(v.k ?? 0, age),
    bookedRequests: observed.ok(v.r ?? 0, age),
    prefillPressure: observed.ok(v.p ?? 0, age),
    suspicions: [],
    ...over,
  };
}

export function input(
  eff: CandidateObservation,
  cap: CandidateObservation,
  over: Partial<DecisionInput> = {},
): DecisionInput {
  return {
    proposal: 'efficient',
    efficient: { kind: 'observed', observation: eff },
    capable: { kind: 'observed', observation: cap },
    localCapableInFlight: 0,
    ...over,
  };
}
