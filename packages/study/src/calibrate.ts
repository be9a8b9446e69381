/**
 * The calibration plan (@vantage/evaluation) run on the simulated fleet, in the plan's run order with
 * the live harness's steps (services/fleet/src/calibration.ts) in simulated time: README "What it
 * owns" (`runCalibrationOffline`). Background goes on every worker of a loaded pool, so the worker
 * the probe's candidate gets is loaded whichever it is, and through the ledger routed requests use,
 * so R and P show it. Probes carry the plan's `cal:` session ids, which `vantage fit` reads;
 * warm-ups and background carry theirs, which it skips.
 */
import { calibrationParameterSet, type CalibrationPlan, type Role } from '@vantage/evaluation';
import { concatTokens, freshTokens, labelSeed } from '@vantage/random';
import type { JsonRow, OutcomeRecord } from '@vantage/records';
import { TwoPoolFleet, type FleetSpec } from './fleet';

interface CalibrationOptions {
  readonly plan: CalibrationPlan;
  readonly fleet: FleetSpec;
  readonly seed?: number;
  readonly onProgress?: (line: string) => void;
}

interface CalibrationResult {
  readonly rows: JsonRow[];
  /** The records the rows flatten. */
  readonly outcomes: OutcomeRecord[];
}

export function runCalibrationOffline(o: CalibrationOptions): CalibrationResult {
  const fleet = new TwoPoolFleet(o.fleet, { seed: o.seed ?? 1, instanceId: 'study-calibration' });
  const params = calibrationParameterSet(o.plan.destinationLimit, 'offline');
  const byId = new Map(o.plan.conditions.map((c) => [c.id, c]));
  const order = o.plan.runOrder;
  const counts = { probes: 0, warmups: 0, background: 0 };
  const progress = o.onProgress ?? (() => {});
  let lastReport = -1;
  for (let i = 0; i < order.length; i++) {
    const { conditionId, repeat } = order[i]!;
    const c = byId.get(conditionId);
    const run = c?.runs[repeat];
    if (c === undefined || run === undefined) throw new Error(`plan run order names ${conditionId}:${repeat}, which the plan does not hold`);
    const pct = Math.floor((100 * i) / order.length / 10);
    if (pct !== lastReport) {
      lastReport = pct;
      progress(`calibration ${i + 1}/${order.length} runs (sim ${(fleet.nowMs / 1000).toFixed(0)} s)`);
    }
    const seed = (label: string, k = 0): number => labelSeed(run.contentSeed, label, k);
    const prefix = freshTokens(seed('prefix'), c.probe.prefixTokens);
    const probeTokens = concatTokens(prefix, freshTokens(seed('suffix'), c.probe.promptTokens - c.probe.prefixTokens));
    const routed = (kind: 'probe' | 'warmup', role: Role, sessionId: string, tokens: Uint32Array, osl: number): void => {
      const requestId = `offline-${c.id}-${repeat}-${kind}-${role}`;
      const d = fleet.route({ requestId, sessionId, tokens, osl, proposal: role, params });
      if (d === null || d.choice !== role) throw new Error(`calibration ${requestId}: the decision path ${d === null ? 'offered no worker' : `changed ${role} to ${d.choice}`}`);
      if (kind === 'probe') counts.probes++;
      else counts.warmups++;
    };

    // Warm the reusable prefix on the condition's `warm` candidates; run until they finish.
    if (c.probe.prefixTokens > 0) {
      for (const role of c.warm) routed('warmup', role, run.warmupSessionId, prefix, 1);
      fleet.run();
    }

    // Background load on every worker of each loaded pool.
    let due = 0;
    let seen = 0;
    let probed = false;
    const probe = (): void => {
      if (probed) return;
      probed = true;
      for (const role of c.measure) routed('probe', role, run.sessionId, probeTokens, c.probe.outputTokens);
    };
    for (const [si, spec] of c.background.entries()) {
      const pool = fleet.pools[spec.pool];
      for (const workerId of pool.workerIds) {
        for (let j = 0; j < spec.count; j++) {
          const tokens = freshTokens(seed(`bg-${si}-${workerId.toString()}`, j), spec.promptTokens);
          due++;
          counts.background++;
          fleet.direct(
            { requestId: `offline-${c.id}-${repeat}-bg-${spec.pool}-${si}-${workerId.toString()}-${j}`, sessionId: run.backgroundSessionId, role: spec.pool, tokens, osl: spec.outputTokens, workerId, expectedOutputTokens: spec.outputTokens },
            {
              onFirstToken: () => {
                seen++;
                if (c.probeTiming === 'after_background_first_tokens' && seen === due) probe();
              },
            },
          );
        }
      }
    }
    // Probe both candidates at the same instant, when the condition says; run until everything finished.
    if (due === 0 || c.probeTiming === 'immediate') probe();
    fleet.run();
    if (!probed) throw new Error(`calibration ${c.id}:${repeat}: the background never produced every first token, so the probe was not sent`);
  }
  progress(`calibration: ${order.length} runs, ${counts.probes} probes, ${counts.warmups} warm-ups, ${counts.background} background requests, sim ${(fleet.nowMs / 1000).toFixed(0)} s`);
  return { rows: fleet.rows, outcomes: fleet.outcomes };
}
