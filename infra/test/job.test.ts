// The main job's fixed pieces: the calibration set observes both candidates and cannot override,
// the variant vocabulary matches the decision records', and the settings are validated.
import { describe, expect, it } from 'vitest';
import { VARIANTS as RECORD_VARIANTS } from '@vantage/records';
import { loadParameterSet, serializeParameterSet, VARIANTS } from '@vantage/rules';
import { calibrationParameterSet, DEFAULT_BACKGROUND_TRAFFIC, formatBackgroundSpec } from '@vantage/evaluation';
import { RECORD_VARIANT } from '@vantage/decision-core';
import { defaultJobConfig, jobSchedule } from '../src/job';

describe('main job', () => {
  it('calibrates under a set the decision service loads, probing both pools, with a rule that never fires', () => {
    const set = calibrationParameterSet(8, '20260101T000000Z');
    expect(loadParameterSet(serializeParameterSet(set)).ok).toBe(true);
    // Not the Stage baseline: the baseline asks only the proposed pool, calibration needs both observed.
    expect(set.variant).not.toBe('stage');
    expect(set.variant).toBe('count');
    // R >= 1e6 booked requests on one worker does not happen; the gate's limit is the evaluation's.
    expect(set.thresholds).toEqual({ r: 1_000_000, p: null });
    expect(set.gate.destinationLimit).toBe(8);
    expect(set.version).toBe('calibration-20260101T000000Z');
  });

  it('names every rule variant as decision records do', () => {
    expect(Object.keys(RECORD_VARIANT).sort()).toEqual([...VARIANTS].sort());
    expect(Object.values(RECORD_VARIANT).sort()).toEqual([...RECORD_VARIANTS].sort());
  });

  it('records in schedule.json the Stage proposal and the competing traffic the runs use', () => {
    // The default competing traffic is picked by the offline study; the schedule needs it resolved.
    expect(() => jobSchedule(defaultJobConfig({}))).toThrow(/pick/);
    const d = jobSchedule({ ...defaultJobConfig({}), background: formatBackgroundSpec(DEFAULT_BACKGROUND_TRAFFIC) });
    expect(d.proposal).toEqual({ kind: 'fraction_capable', fraction: 0.2, seed: 7 });
    expect(d.background).toEqual(DEFAULT_BACKGROUND_TRAFFIC);
    expect(d.runs[0]?.backgroundSessionIds).toHaveLength(DEFAULT_BACKGROUND_TRAFFIC.streams);
    const off = jobSchedule(defaultJobConfig({ VANTAGE_JOB_PROPOSAL: 'length:9000', VANTAGE_JOB_BACKGROUND: 'off' }));
    expect(off.proposal).toEqual({ kind: 'length', capableAboveTokens: 9000 });
    expect(off.background).toBeNull();
    expect(off.runs[0]?.backgroundSessionIds).toEqual([]);
    expect(() => defaultJobConfig({ VANTAGE_JOB_PROPOSAL: 'sometimes' })).toThrow(/VANTAGE_JOB_PROPOSAL/);
  });

  it('reads its settings from the environment and refuses bad ones', () => {
    const d = defaultJobConfig({});
    expect(d).toMatchObject({ preset: 'job', attempts: 2, sessions: 8, destinationLimit: 8, proposal: 'fraction:0.2:7' });
    expect(defaultJobConfig({ VANTAGE_JOB_SESSIONS: '3', VANTAGE_JOB_CALIBRATION: 'tiny' })).toMatchObject({ sessions: 3, preset: 'tiny' });
    expect(() => defaultJobConfig({ VANTAGE_JOB_SESSIONS: '0' })).toThrow(/positive integer/);
    expect(() => defaultJobConfig({ VANTAGE_JOB_CALIBRATION: 'huge' })).toThrow(/tiny, small, job or full/);
    // Competing traffic: picked by the offline study by default, off or a custom spec by setting.
    expect(d.background).toBe('pick');
    expect(defaultJobConfig({ VANTAGE_JOB_BACKGROUND: 'off' }).background).toBe('off');
    expect(defaultJobConfig({ VANTAGE_JOB_BACKGROUND: '2:3:500:9' }).background).toBe('2:3:500:9');
    expect(() => defaultJobConfig({ VANTAGE_JOB_BACKGROUND: '2:0:500:9' })).toThrow(/VANTAGE_JOB_BACKGROUND/);
  });
});
