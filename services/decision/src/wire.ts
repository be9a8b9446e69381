/**
 * The messages the decision service sends on every route: an observe query per
 * candidate (in the protocol's binary request encoding: the hashes as raw
 * integers, which the indexer copies instead of decoding base64 out of JSON),
 * and the booking and the reply, written as JSON text directly. The booking
 * carries the prompt's local hashes as base64 (`localHashesLe64`), which for a
 * block-hash request is the request's own string, forwarded without decoding
 * and re-encoding. Unit tests check each against @vantage/protocol's codec
 * (same bytes, and the codec decodes them to the same values).
 */
import { encodeObserveRequestBinary, le64Base64 as le64Base64String, type BookingEvent, type CandidateObservation, type RouteReply } from '@vantage/protocol';

const utf8 = new TextEncoder();
const str = (s: string): string => JSON.stringify(s);

/** head + bulk + tail as UTF-8, with the (large, ASCII) bulk copied in as bytes rather than through a string. */
function withBulk(head: string, bulk: Uint8Array, tail: string): Uint8Array {
  const h = Buffer.byteLength(head);
  const out = Buffer.allocUnsafe(h + bulk.length + Buffer.byteLength(tail));
  out.write(head, 0, 'utf8');
  out.set(bulk, h);
  out.write(tail, h + bulk.length, 'utf8');
  return out;
}

/**
 * `vantage.v1.observe.{pool}` query for local hashes listing only Dynamo's choice, answered in the
 * protocol's binary reply encoding (`observeReplyCodec.decode` reads it), sent in the binary request
 * encoding (observe-request.v1.json's content; schemas/protocol/README.md).
 */
export function encodeObserveQuery(requestId: string, localHashes: BigUint64Array, promptTokens: number): Uint8Array {
  return encodeObserveRequestBinary({ requestId, prompt: { kind: 'local_hashes', localHashes, loraName: null }, promptTokens, workers: 'choice', replyEncoding: 'binary' });
}

/** A booking's fields, with the local hashes already in their wire form (no sequence hashes: the decision service books local hashes). */
export type BookingFields = Omit<BookingEvent, 'sequenceHashes' | 'localHashes'> & {
  /** Local hashes, canonical base64 of 8-byte little-endian u64s as ASCII bytes: the indexer chains them into sequence hashes. */
  readonly localHashesLe64: Uint8Array;
};

/** `vantage.v1.bookings.{pool}` event (booking-event.v1.json), in the codec's member order. */
export function encodeBooking(b: BookingFields): Uint8Array {
  return withBulk(
    `{"v":1,"requestId":${str(b.requestId)},"sessionId":${str(b.sessionId)},"pool":${str(b.pool)},"workerId":"${b.workerId.toString(10)}",` +
      `"dpRank":${b.dpRank},"promptTokens":${b.promptTokens},"overlapBlocks":${b.overlapBlocks},"localHashesLe64":"`,
    b.localHashesLe64,
    '"' +
      (b.expectedOutputTokens === null ? '' : `,"expectedOutputTokens":${b.expectedOutputTokens}`) +
      (b.prefillTokens === null ? '' : `,"prefillTokens":${b.prefillTokens}`) +
      `,"atMs":${b.atMs}}`,
  );
}

/** Canonical base64 of 8-byte little-endian u64s (the `*Le64` wire form), as ASCII bytes. */
export function le64Base64(list: BigUint64Array): Uint8Array {
  return Buffer.from(le64Base64String(list), 'latin1');
}

// --- the route reply -------------------------------------------------------------------

/** JSON number: a non-finite value is written `null`, as JSON.stringify does. */
const num = (v: number | null): string => (v === null || !Number.isFinite(v) ? 'null' : String(v));
const strOrNull = (s: string | null): string => (s === null ? 'null' : JSON.stringify(s));
const boolOrNull = (b: boolean | null): string => (b === null ? 'null' : b ? 'true' : 'false');

function observationJson(o: CandidateObservation | null): string {
  if (o === null) return 'null';
  const a = o.ages;
  return (
    `{"model":${str(o.model)},"pool":${str(o.pool)},"promptTokens":${num(o.promptTokens)},"queryDurationUs":${num(o.queryDurationUs)},` +
    `"workerId":${o.workerId === null ? 'null' : `"${o.workerId.toString(10)}"`},"dpRank":${num(o.dpRank)},"schedulable":${boolOrNull(o.schedulable)},` +
    `"K":${num(o.K)},"R":${num(o.R)},"P":${num(o.P)},"effectivePrefillTokens":${num(o.effectivePrefillTokens)},` +
    `"hostOverlapBlocks":${num(o.hostOverlapBlocks)},"diskOverlapBlocks":${num(o.diskOverlapBlocks)},"activeBlocks":${num(o.activeBlocks)},"totalKvBlocks":${num(o.totalKvBlocks)},` +
    `"pending":${o.pending === null ? 'null' : `{"requests":${num(o.pending.requests)},"tokens":${num(o.pending.tokens)}}`},` +
    `"ages":{"indexMs":${num(a.indexMs)},"loadMs":${num(a.loadMs)},"bookingMs":${num(a.bookingMs)},"collectedMs":${num(a.collectedMs)}},` +
    `"error":${o.error === null ? 'null' : `{"code":${str(o.error.code)},"reason":${strOrNull(o.error.reason)}}`}}`
  );
}

/**
 * `vantage.v1.route` reply (route-reply.v1.json) written directly; the same members and values as
 * `routeReplyCodec.encode` (a unit test compares the two on generated replies).
 */
export function encodeRouteReply(m: RouteReply): Uint8Array {
  const p = m.predictions;
  return utf8.encode(
    `{"v":1,"requestId":${str(m.requestId)}${m.sessionId === null ? '' : `,"sessionId":${str(m.sessionId)}`},"stageProposal":${str(m.stageProposal)},` +
      `"model":${str(m.model)},"modelRole":${str(m.modelRole)},"pool":${strOrNull(m.pool)},"workerId":${m.workerId === null ? 'null' : `"${m.workerId.toString(10)}"`},` +
      `"dpRank":${num(m.dpRank)},"endpoint":${strOrNull(m.endpoint)},"reason":${str(m.reason)},"fallback":${strOrNull(m.fallback)},"detail":${strOrNull(m.detail)},` +
      `"variant":${str(m.variant)},"observations":{"efficient":${observationJson(m.observations.efficient)},"capable":${observationJson(m.observations.capable)}},` +
      `"predictions":{"estimator":${str(p.estimator)},"efficientTtftMs":${num(p.efficientTtftMs)},"capableTtftMs":${num(p.capableTtftMs)},"advantageMs":${num(p.advantageMs)},"marginMs":${num(p.marginMs)}},` +
      `"parameterVersion":${strOrNull(m.parameterVersion)},"queryDurationUs":${num(m.queryDurationUs)},"decisionDurationUs":${num(m.decisionDurationUs)}}`,
  );
}
