/**
 * @vantage/fleet: the simulated Dynamo fleet in live mode (sim engines as a NATS
 * service speaking Dynamo's wire format) and the load generator that drives it
 * through the real decision and indexer services. See README.md.
 */
export { fleetConfigSchema, fleetPoolSchema, workerIdsFor, allWorkerIds, type FleetConfig, type FleetPoolConfig, type FleetSettings } from './config';
export { RealTimeDriver, nodeTimers, type Clock, type Timers, type DriverSink, type DriverOptions, type DriverStats } from './driver';
export {
  GENERATE_PREFIX,
  generateSubject,
  decodeGenerateRequest,
  encodeGenerateRequest,
  encodeProgress,
  decodeProgress,
  tokensToB64,
  type GenerateRequest,
  type GenerateProgress,
  type GenerateDecode,
  type PromptPayload,
} from './generate';
export { startFleet, type FleetHandle, type FleetOptions, type FleetWorker } from './service';
export {
  runLoadgen,
  summarize,
  distribution,
  type LoadgenOptions,
  type LoadgenPool,
  type LoadgenSummary,
  type RequestOutcome,
  type RoutingMode,
  type Workload,
  type Dist,
} from './load-generator';
