/**
 * Entry point: `node --initial-old-space-size=256 --import tsx services/decision/src/main.ts`
 * (the flag: infra's DECISION_NODE_ARGS; configuration: see README).
 */
import { runService } from '@vantage/runtime';
import { decisionConfigSchema, type DecisionSettings } from './config';
import { startDecision } from './service';

await runService<DecisionSettings, false>({
  name: 'decision',
  schema: decisionConfigSchema,
  // Its own bookings come back on the bookings subject it subscribes to for the other replicas': not sent at all.
  noEcho: true,
  async start(ctx) {
    await startDecision(ctx);
  },
});
