// The load axis: more competing traffic on the efficient pool shows as a higher measured busy
// fraction, and the report has a chart per metric with every variant's difference from Stage.
import { describe, expect, it } from 'vitest';
import { calibrateAndFit, DEFAULT_FLEET, runLoadStudy } from '../src/index';

describe('runLoadStudy', () => {
  const { fit } = calibrateAndFit({ preset: 'tiny' });
  const r = runLoadStudy({ fleet: DEFAULT_FLEET, fit, gapsMs: [null, 200], capableFractions: [0.2], attempts: 1, sessions: 3, bootstrap: 50, spanMs: 20_000 });

  it('runs every load point and measures a busier efficient pool under more competing traffic', () => {
    expect(r.points.map((p) => p.point)).toEqual([
      { gapMs: null, capableFraction: 0.2 },
      { gapMs: 200, capableFraction: 0.2 },
    ]);
    const [quiet, busy] = r.points;
    expect(busy!.efficientUtilisation).toBeGreaterThan(quiet!.efficientUtilisation);
    for (const p of r.points) expect(p.analysis.variants.map((v) => v.variant).sort()).toEqual(['baseline', 'cache_aware', 'cache_blind', 'count_prefill', 'request_count']);
  });

  it('renders one chart per metric and a row per variant and load point', () => {
    expect(r.html.match(/<svg /g)).toHaveLength(3);
    expect(r.html).toContain('Mean TTFT − Stage (ms)');
    expect(r.html).toContain('Mean session completion time − Stage (ms)');
    expect(r.html.match(/<tr><td>/g)).toHaveLength(2 * 5);
  });
});
