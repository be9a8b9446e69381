/**
 * Request and session ids, as every message of ours carries them: 1 to ID_MAX_LENGTH characters
 * (the schemas' `requestId` and `sessionId`). The one rule the schemas, the hot-path decoders
 * (which also insist on printable ASCII, one byte a character, before they take a message) and
 * the fleet's generate endpoint check. Dynamo's own request ids, which reach the booking ledger
 * without passing through our protocol, are bounded there separately (`@vantage/bookings`).
 */
export const ID_MAX_LENGTH = 256;

/** A request id or session id our protocol accepts (one rule; the session id is also the Kafka partition key downstream). */
export function isValidId(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= ID_MAX_LENGTH;
}
