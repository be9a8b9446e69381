/** Entry point: `node --import tsx services/outcome/src/main.ts` (configuration from VANTAGE_* variables). */
import { runService } from '@vantage/runtime';
import { outcomeConfigSchema, type OutcomeConfig } from './config';
import { startOutcome } from './service';

await runService<OutcomeConfig & Record<string, never>, true>({
  name: 'outcome',
  schema: outcomeConfigSchema as never,
  kafka: true,
  start: async (ctx) => {
    await startOutcome(ctx as never);
  },
});
