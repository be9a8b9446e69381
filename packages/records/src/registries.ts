import { SchemaRegistry } from './framing';
import { DECISION_RECORD_CURRENT, DECISION_RECORD_VERSIONS, OUTCOME_RECORD_CURRENT, OUTCOME_RECORD_VERSIONS } from './schemas';
import type { DecisionRecord, OutcomeRecord } from './types';

/** Reads every DecisionRecord version this build ships, as the current shape. */
export const DECISION_REGISTRY: SchemaRegistry<DecisionRecord> = new SchemaRegistry(DECISION_RECORD_CURRENT, DECISION_RECORD_VERSIONS);

/** Reads every OutcomeRecord version this build ships (v1, v2), as the current shape (v2). */
export const OUTCOME_REGISTRY: SchemaRegistry<OutcomeRecord> = new SchemaRegistry(OUTCOME_RECORD_CURRENT, OUTCOME_RECORD_VERSIONS);
