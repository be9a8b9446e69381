/** Entry point: `node --import tsx services/outcome/src/main.ts` (configuration from VANTAGE_* variables). */
import { runService } from '@vantage/runtime';
import { outcomeConfigSchema, type OutcomeConfigShape } from './config';
import { startOutcome } from './service';

await runService<OutcomeConfigShape, true>({
  name: 'outcome',
  schema: outcomeConfigSchema,
  kafka: true,
  start: async (ctx) => {
    await startOutcome(ctx);
  },
});
