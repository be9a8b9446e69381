/**
 * Dead-letter records. The Kafka message value is the original message bytes
 * (cut to `maxBytes`), so a fixed decoder or a person can replay it; the
 * reason and the source position travel as headers:
 *
 *   vantage-dlq-reason      stable code (RECORD_BAD_MARKER, LIFECYCLE_INVALID, OVERSIZED, JOIN_LATE, ...)
 *   vantage-dlq-detail      one line for people (at most 1 KiB)
 *   vantage-source-subject  NATS subject the message was published on
 *   vantage-source-stream   JetStream stream
 *   vantage-source-seq      JetStream stream sequence (decimal)
 *   vantage-original-bytes  size of the original message
 *   vantage-truncated       "true" when the value holds only a prefix
 *
 * Key: `<stream>:<seq>`, unique per source message.
 */
import type { JsMsg } from '@nats-io/jetstream';
import type { RecordRejectionCode } from '@vantage/records';
import type { Message } from 'kafkajs';
import type { LifecycleRejectionCode } from './lifecycle';

export type DeadLetterReason = RecordRejectionCode | LifecycleRejectionCode | 'OVERSIZED' | 'DECISION_INVALID' | 'JOIN_LATE' | 'OUTCOME_ENCODE_FAILED';

export const DLQ_HEADERS = Object.freeze({
  reason: 'vantage-dlq-reason',
  detail: 'vantage-dlq-detail',
  subject: 'vantage-source-subject',
  stream: 'vantage-source-stream',
  seq: 'vantage-source-seq',
  originalBytes: 'vantage-original-bytes',
  truncated: 'vantage-truncated',
});

function oneLine(text: string): string {
  const t = text.replace(/[\r\n]+/g, ' ');
  return t.length > 1024 ? `${t.slice(0, 1021)}...` : t;
}

export function deadLetterMessage(msg: Pick<JsMsg, 'data' | 'subject' | 'seq'>, stream: string, reason: DeadLetterReason, detail: string, maxBytes: number): Message {
  const truncated = msg.data.length > maxBytes;
  const data = truncated ? msg.data.subarray(0, maxBytes) : msg.data;
  return {
    key: `${stream}:${msg.seq}`,
    value: Buffer.from(data.buffer, data.byteOffset, data.byteLength),
    headers: {
      [DLQ_HEADERS.reason]: reason,
      [DLQ_HEADERS.detail]: oneLine(detail),
      [DLQ_HEADERS.subject]: msg.subject,
      [DLQ_HEADERS.stream]: stream,
      [DLQ_HEADERS.seq]: String(msg.seq),
      [DLQ_HEADERS.originalBytes]: String(msg.data.length),
      [DLQ_HEADERS.truncated]: truncated ? 'true' : 'false',
    },
  };
}
