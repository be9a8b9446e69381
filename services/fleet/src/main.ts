/**
 * Entry point: `node --import tsx services/fleet/src/main.ts`.
 * Configuration: `VANTAGE_FLEET_POOLS`, `VANTAGE_FLEET_TIME_SCALE`, ... (see README).
 */
import { runService } from '@vantage/runtime';
import { fleetConfigSchema, type FleetSettings } from './config';
import { startFleet } from './service';

await runService<FleetSettings, false>({
  name: 'fleet',
  schema: fleetConfigSchema,
  async start(ctx) {
    await startFleet(ctx);
  },
});
