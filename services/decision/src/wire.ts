/**
 * The two messages the decision service sends on every route, written as JSON
 * text directly: an observe query per candidate and the booking. Both carry
 * the prompt's local hashes as base64 (`localHashesLe64`), which for a
 * block-hash request is the request's own string, forwarded without decoding
 * and re-encoding. A unit test checks each against @vantage/protocol's codec
 * (same bytes, and the codec decodes them to the same values).
 */
import type { WorkerId } from '@vantage/types';

const utf8 = new TextEncoder();
const str = (s: string): string => JSON.stringify(s);

/** `vantage.v1.observe.{pool}` query for local hashes listing only Dynamo's choice (observe-request.v1.json). */
export function encodeObserveQuery(requestId: string, localHashesLe64: string, promptTokens: number): Uint8Array {
  return utf8.encode(`{"v":1,"requestId":${str(requestId)},"prompt":{"localHashesLe64":"${localHashesLe64}"},"promptTokens":${promptTokens},"workers":"choice"}`);
}

export interface BookingFields {
  readonly requestId: string;
  readonly sessionId: string;
  readonly pool: string;
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly promptTokens: number;
  readonly overlapBlocks: number;
  /** Local hashes, base64 of 8-byte little-endian u64s: the indexer chains them into sequence hashes. */
  readonly localHashesLe64: string;
  readonly expectedOutputTokens: number | null;
  readonly prefillTokens: number | null;
  readonly atMs: number;
}

/** `vantage.v1.bookings.{pool}` event (booking-event.v1.json), in the codec's member order. */
export function encodeBooking(b: BookingFields): Uint8Array {
  return utf8.encode(
    `{"v":1,"requestId":${str(b.requestId)},"sessionId":${str(b.sessionId)},"pool":${str(b.pool)},"workerId":"${b.workerId.toString(10)}",` +
      `"dpRank":${b.dpRank},"promptTokens":${b.promptTokens},"overlapBlocks":${b.overlapBlocks},"localHashesLe64":"${b.localHashesLe64}"` +
      (b.expectedOutputTokens === null ? '' : `,"expectedOutputTokens":${b.expectedOutputTokens}`) +
      (b.prefillTokens === null ? '' : `,"prefillTokens":${b.prefillTokens}`) +
      `,"atMs":${b.atMs}}`,
  );
}

/** base64 of 8-byte little-endian u64s (the `*Le64` wire form). */
export function le64Base64(list: BigUint64Array): string {
  return Buffer.from(list.buffer, list.byteOffset, list.byteLength).toString('base64');
}
