/**
 * The five-variant evaluation on the simulated fleet, as the live job runs it (README "What it owns",
 * `runEvaluationOffline`); competing traffic has session ids `evalbg:<attempt>:<variant>:<stream>`.
 */
import {
  backgroundTraffic,
  evaluationBackgroundSessionId,
  stageProposal,
  type BackgroundTrafficSpec,
  type EvaluationSchedule,
  type StageProposalModel,
} from '@vantage/evaluation';
import { freshTokens } from '@vantage/random';
import type { JsonRow, Variant as RecordVariant } from '@vantage/records';
import type { ParameterSet } from '@vantage/rules';
import { DEFAULT_AGENTIC_CONFIG, generateAgenticSessions } from '@vantage/sim';
import { TwoPoolFleet, type FleetSpec } from './fleet';

interface EvaluationRunOptions {
  readonly schedule: EvaluationSchedule;
  readonly fleet: FleetSpec;
  /** The frozen parameter set of each variant (records' variant names). */
  readonly params: Readonly<Record<RecordVariant, ParameterSet>>;
  readonly proposal: StageProposalModel;
  readonly background: BackgroundTrafficSpec | null;
  readonly maxContextTokens?: number;
  readonly seed?: number;
  readonly onProgress?: (line: string) => void;
}

interface RunSummary {
  readonly variant: string;
  /** Busy fraction of each pool's engines over the run. */
  readonly utilisation: { readonly efficient: number; readonly capable: number };
}

interface EvaluationRunResult {
  readonly rows: JsonRow[];
  readonly runs: readonly RunSummary[];
}

export function runEvaluationOffline(o: EvaluationRunOptions): EvaluationRunResult {
  const rows: JsonRow[] = [];
  const runs: RunSummary[] = [];
  const progress = o.onProgress ?? (() => {});
  const bgPlan = o.background === null ? [] : backgroundTraffic(o.background);
  for (const run of o.schedule.runs) {
    const params = o.params[run.variant];
    if (params === undefined) throw new Error(`schedule names variant ${run.variant}, which has no parameter set`);
    const fleet = new TwoPoolFleet(o.fleet, { seed: (o.seed ?? 1) + run.attempt, instanceId: 'study-evaluation' });
    const sessions = generateAgenticSessions({ ...DEFAULT_AGENTIC_CONFIG, sessions: run.sessions.length, seed: String(run.sessionSeed), maxContextTokens: o.maxContextTokens });
    let turns = 0;
    let turnsFailed = 0;
    let completed = 0;
    let overrides = 0;
    for (const s of run.sessions) {
      const sess = sessions[s.sessionIndex];
      if (sess === undefined) throw new Error(`session generator gave ${sessions.length} sessions, the schedule wants index ${s.sessionIndex}`);
      const send = (t: number): void => {
        const turn = sess.turns[t]!;
        const proposal = stageProposal(o.proposal, { matchKey: s.matchKey, turn: t, promptTokens: turn.promptTokens.length });
        turns++;
        const d = fleet.route(
          { requestId: `${s.sessionId}-${t}`, sessionId: s.sessionId, tokens: turn.promptTokens, osl: turn.outputTokens.length, outputTokens: turn.outputTokens, proposal, params },
          {
            onDone: (r) => {
              if (r.row !== null && r.row['status'] !== 'completed') return; // an agent stops when a turn fails
              const next = sess.turns[t + 1];
              if (next === undefined) completed++;
              else fleet.at(r.endMs + next.thinkTimeMs, () => send(t + 1));
            },
          },
        );
        if (d === null) turnsFailed++;
        else if (d.reason === 'overrode') overrides++;
      };
      if (sess.turns.length > 0) fleet.at(sess.startMs, () => send(0));
    }
    for (const b of bgPlan) {
      fleet.at(b.arrivalMs, () => {
        fleet.direct({
          requestId: `${evaluationBackgroundSessionId(run.attempt, run.variant, b.stream)}-${b.index}`,
          sessionId: evaluationBackgroundSessionId(run.attempt, run.variant, b.stream),
          role: b.role,
          tokens: freshTokens(b.contentSeed, b.promptTokens),
          osl: b.outputTokens,
        });
      });
    }
    fleet.run();
    // Failed turns: a turn the engine refused (too long) is a failed outcome row; one no pool could take has none.
    turnsFailed += fleet.rows.filter((r) => r['background'] !== true && r['status'] !== 'completed').length;
    rows.push(...fleet.rows);
    const utilisation = { efficient: fleet.utilisation('efficient'), capable: fleet.utilisation('capable') };
    runs.push({ variant: run.variant, utilisation });
    progress(
      `run ${run.order + 1}/${o.schedule.runs.length}: attempt ${run.attempt}, ${run.variant}: ${completed}/${run.sessions.length} sessions completed, ${turns} turns (${overrides} overrides, ${turnsFailed} failed), ${bgPlan.length} competing requests, efficient pool ${(100 * utilisation.efficient).toFixed(0)} % busy, sim ${(fleet.nowMs / 1000).toFixed(0)} s`,
    );
  }
  return { rows, runs };
}
