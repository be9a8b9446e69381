export type { StepShape, TimingModel } from './timing';
export { polynomialPrefillMs, polynomialDecodeMs, polynomialTiming, scaledTiming } from './timing';
export type { PromptBlocks } from './prompt';
export { promptFromTokens, MooncakePromptHasher, MOONCAKE_CHUNK_TOKENS } from './prompt';
export type { EngineRequest, AddResult, FirstToken, Finished, NextPass, StepResult } from './engine';
export { Engine, nextPass } from './engine';
export { EventHeap } from './heap';
export type { MooncakeRecord } from './mooncake';
export { parseMooncakeTrace, loadMooncakeTrace, openLoopArrivals, traceSessions, ClosedLoop } from './mooncake';
export type { AgenticSessionConfig, SessionTurn, AgenticSession, Dist } from './sessions';
export { generateAgenticSessions, DEFAULT_AGENTIC_CONFIG, sample } from './sessions';
export type { Distribution, RequestRecord, ReplayMetrics } from './metrics';
export { computeMetrics } from './metrics';
export type { RouterSpec, PreparedTrace, Workload, ReplayEngineConfig } from './replay';
export { runReplay, prepareTrace, stderrProgress, DEFAULT_KV_ROUTER } from './replay';
export { GaussianProcess, cholesky, expectedImprovement, normalCdf } from './gp';
export type { RouterKnobs, KnobGrid, SweepReport } from './sweep';
export {
  SEED001_GRID,
  knobsToUnit,
  unitToKnobs,
  knobsKey,
  gridPoints,
  gridSearch,
  smartSearch,
  runSweep,
} from './sweep';
export { renderSweepReportHtml, sweepReportJson, lineChartSvg } from './report';
