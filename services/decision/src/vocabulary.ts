// The variant and reason vocabularies live in @vantage/decision-core, shared with the offline study.
export { RECORD_REASON, RECORD_VARIANT, replyReason } from '@vantage/decision-core';
