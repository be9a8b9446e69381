export type { StepShape, TimingModel, TimingTable } from './timing';
export { polynomialPrefillMs, polynomialDecodeMs, polynomialTiming, scaledTiming, tableTiming } from './timing';
export type { PromptBlocks } from './prompt';
export { promptFromTokens, promptFromLocalHashes, MooncakePromptHasher, MOONCAKE_CHUNK_TOKENS } from './prompt';
export type { EngineConfig, EngineRequest, StepOptions, AddResult, FirstToken, Finished, StepResult, EngineLoad } from './engine';
export { Engine } from './engine';
export { EventHeap, type Timed } from './heap';
export type { MooncakeRecord, TraceParse, Arrival } from './mooncake';
export { parseMooncakeTrace, loadMooncakeTrace, openLoopArrivals, ClosedLoop } from './mooncake';
export type { Dist, AgenticSessionConfig, SessionTurn, AgenticSession } from './sessions';
export { sample, generateAgenticSessions, DEFAULT_AGENTIC_CONFIG } from './sessions';
export type { Distribution, RequestRecord, ReplayMetrics } from './metrics';
export { percentile, weightedPercentile, distribution, computeMetrics } from './metrics';
export type {
  RouteContext,
  RoutingPolicy,
  RouterSpec,
  PreparedTrace,
  Workload,
  ReplayEngineConfig,
  ReplayProgress,
  ReplayOptions,
  ReplayCounters,
  ReplayResult,
} from './replay';
export { runReplay, prepareTrace, routerName, stderrProgress, DEFAULT_KV_ROUTER, DEFAULT_LLMD } from './replay';
export type { GpOptions } from './gp';
export { GaussianProcess, cholesky, expectedImprovement, normalCdf, normalPdf, DEFAULT_LENGTH_SCALE_GRID } from './gp';
export type {
  RouterKnobs,
  KnobGrid,
  TrialMethod,
  Trial,
  Evaluator,
  SmartSearchOptions,
  SmartSearchResult,
  SweepTraceConfig,
  SweepConfig,
  ComparisonRow,
  Comparison,
  Delta,
  SweepReport,
} from './sweep';
export {
  DEFAULT_KNOBS,
  SEED001_GRID,
  KNOB_BOUNDS,
  knobsToUnit,
  unitToKnobs,
  knobsPolicy,
  knobsKey,
  gridPoints,
  objectiveOf,
  bestTrial,
  gridSearch,
  smartSearch,
  deltaOf,
  runSweep,
} from './sweep';
export { renderSweepReportHtml, sweepReportJson, lineChartSvg, barChartSvg } from './report';
