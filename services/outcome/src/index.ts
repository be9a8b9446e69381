/** @vantage/outcome: joins decisions with lifecycle events and writes them to Kafka exactly once. See README.md. */
export { outcomeConfigSchema } from './config';
export type { OutcomeConfigShape } from './config';
export { startOutcome } from './service';
export type { OutcomeService } from './service';
