/**
 * @vantage/fleet: the simulated Dynamo fleet in live mode (sim engines as a NATS
 * service speaking Dynamo's wire format) and the load generator that drives it
 * through the real decision and indexer services. See README.md.
 */
export { fleetConfigSchema } from './config';
export { startFleet } from './service';
