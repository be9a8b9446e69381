export { startDecision, type DecisionHandle } from './service';
export { decisionConfigSchema, type DecisionSettings } from './config';
