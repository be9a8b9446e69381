/** @vantage/fleet: the simulated Dynamo fleet as a NATS service speaking Dynamo's wire format (README.md). */
export { fleetConfigSchema } from './config';
export { startFleet } from './service';
