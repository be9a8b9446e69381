/**
 * The observe endpoint's messages (packages/protocol, schemas/protocol): the
 * request decoded, and the reply built from a PoolObservation.
 */
import {
  OBSERVE_REPLY_FIELD as F,
  ObserveReplyBinaryWriter,
  Le64Scratch,
  binaryNullable,
  decodeObserveRequestHot,
  decodeObserveRequestReusing,
  DEFAULT_MAX_PAYLOAD_BYTES,
  ObserveRequestHot,
  observeReplyCodec,
  observeRequestCodec,
  type ObserveReply,
} from '@vantage/protocol';
import { WORKER_FACTS } from '@vantage/types';
import type { ForwardPassReport, ObserveRows, PoolObservation, PoolState, RowSink } from '@vantage/observation';
import { dynamoChoiceOf, observeReplyOf, policyName, type ReplyMeta } from '@vantage/decision-core';

import type { Decoded } from '@vantage/ingest';

export { observeSubject } from '@vantage/protocol';

interface ObserveQuery {
  readonly requestId: string | null;
  readonly localHashes: BigUint64Array | null;
  readonly tokenIds: Uint32Array | null;
  readonly loraName: string | null;
  readonly promptTokens: number;
  readonly workers: 'all' | 'choice';
  readonly replyEncoding: 'json' | 'binary';
}

export function decodeObserve(data: Uint8Array): Decoded<ObserveQuery> {
  return queryOf(observeRequestCodec.decode(data));
}

const hashScratch = new Le64Scratch();

/**
 * `decodeObserve` for the observe handler, which answers before it reads the next request: the
 * local hashes of a request as encoders write it are decoded into one reused buffer (a view of it,
 * overwritten by the next call), so a query allocates no array for them. Same values and rejections.
 */
export function decodeObserveTransient(data: Uint8Array): Decoded<ObserveQuery> {
  return queryOf(decodeObserveRequestReusing(data, hashScratch));
}

/** What the observe handler reads of a request (not its id). */
type ObserveQueryHot = Omit<ObserveQuery, 'requestId'>;

const hotRequest = new ObserveRequestHot();
const hotDecoded = { ok: true, value: hotRequest } as const;

/**
 * `decodeObserveTransient` for the observe handler, without the request id: the decision
 * service's request (binary, local hashes) is taken apart into one reused record
 * (`decodeObserveRequestHot`), every other request by `decodeObserveTransient`. The result and its
 * hashes are overwritten by the next call. Same values and rejections.
 */
export function decodeObserveHot(data: Uint8Array): Decoded<ObserveQueryHot> {
  if (decodeObserveRequestHot(data, hotRequest, DEFAULT_MAX_PAYLOAD_BYTES)) return hotDecoded;
  return decodeObserveTransient(data);
}

function queryOf(r: ReturnType<typeof observeRequestCodec.decode>): Decoded<ObserveQuery> {
  if (!r.ok) return r;
  const p = r.value.prompt;
  return {
    ok: true,
    value: {
      requestId: r.value.requestId,
      localHashes: p.kind === 'local_hashes' ? p.localHashes : null,
      tokenIds: p.kind === 'token_ids' ? p.tokenIds : null,
      loraName: p.loraName,
      promptTokens: r.value.promptTokens,
      workers: r.value.workers ?? 'all',
      replyEncoding: r.value.replyEncoding ?? 'json',
    },
  };
}

const age = (now: number, t: number | null | undefined): number | null => (t === null || t === undefined ? null : Math.max(0, now - t));

/**
 * The observe reply (schemas/protocol/observe-reply.v1.json), written as a JSON string directly.
 * This is the hot path of every route: building 64 worker objects and handing them to
 * JSON.stringify cost about as much as the whole query, so the text is assembled field by
 * field. `encodeObserveReplyViaCodec` builds the same reply through @vantage/protocol's codec;
 * a test checks the two agree byte for byte after parsing.
 */
export function encodeObserveReply(o: PoolObservation, meta: ReplyMeta): Uint8Array {
  const now = meta.nowMs;
  let out = `{"v":1,"pool":${JSON.stringify(o.pool)},"blockSize":${o.blockSize},"queryDurationUs":${Math.round(meta.queryDurationUs)},"atMs":${now},"workers":[`;
  const only = meta.workers === 'choice' ? o.chosenIndex : -2;
  let written = 0;
  for (let i = 0; i < o.workers.length; i++) {
    if (only !== -2 && i !== only) continue;
    const w = o.workers[i]!;
    const m = w.match;
    const l = w.load;
    const r = w.report;
    const cost = o.costs[i];
    if (written++ > 0) out += ',';
    out +=
      `{"workerId":"${w.workerId}","dpRank":${w.dpRank},"schedulable":${w.schedulable === true},` +
      `"deviceOverlapBlocks":${m ? m.deviceBlocks : 0},"K":${m ? m.deviceTokens : 0},` +
      `"hostOverlapBlocks":${m ? m.hostBlocks : null},"diskOverlapBlocks":${m ? m.diskBlocks : null},"anyTierOverlapBlocks":${m ? m.anyBlocks : null},` +
      `"R":${l.requests},"trackedPrefillTokens":${l.trackedPrefillTokens},"P":${num(l.prefillPressure)},` +
      `"maxNumBatchedTokens":${w.capacity ? w.capacity.maxNumBatchedTokens : null},"effectivePrefillTokens":${w.effectivePrefillTokens},` +
      `"newBlocks":${w.newRequestBlocks},"activeBlocks":${l.activeBlocks},"totalKvBlocks":${l.totalKvBlocks},"treeBlocks":${m ? m.treeSize : 0},` +
      `"reported":${r ? `{"activeDecodeBlocks":${r.activeDecodeBlocks},"activePrefillTokens":${r.activePrefillTokens},"kvUsedBlocks":${r.kvUsedBlocks}}` : 'null'},` +
      `"suspect":${w.suspect ? `{"reason":${JSON.stringify(w.suspect.reason)},"sinceMs":${w.suspect.sinceMs}}` : 'null'},` +
      `"ages":{"indexMs":${age(now, w.lastEventMs)},"loadMs":${age(now, r?.atMs)},"bookingMs":${age(now, l.lastChangeMs)}},` +
      `"dynamoCost":${num(cost ?? null)}${w.forwardPass === null ? '' : forwardPassJson(w.forwardPass, now)}` +
      `${w.recoveredAtMs === null ? '' : `,"recoveredAtMs":${w.recoveredAtMs}`}}`;
  }
  out += `],"pending":{"requests":${o.pending.requests},"tokens":${o.pending.tokens}},"dynamoChoice":`;
  const choice = dynamoChoiceOf(o);
  if (choice !== null) {
    out += `{"workerId":"${choice.workerId}","dpRank":${choice.dpRank},"cost":${num(choice.cost)},"policy":{"name":${JSON.stringify(choice.policy.name)},"params":${JSON.stringify(choice.policy.params)}}}`;
  } else out += 'null';
  // Like the codec: the field is present only after a snapshot restore.
  out += meta.restoredAtMs === null ? '}' : `,"snapshotRestoredAtMs":${meta.restoredAtMs}}`;
  return utf8.encode(out);
}

const utf8 = new TextEncoder();

/** `,"forwardPass":{…}`: present only when the worker sent one (1.6.1), like the codec writes it. */
function forwardPassJson(f: ForwardPassReport, now: number): string {
  return (
    `,"forwardPass":{"scheduledRequests":${f.scheduledRequests},"scheduledPrefillTokens":${f.scheduledPrefillTokens},` +
    `"scheduledDecodeKvTokens":${f.scheduledDecodeKvTokens},"queuedRequests":${f.queuedRequests},"queuedPrefillTokens":${f.queuedPrefillTokens},` +
    `"wallTimeS":${num(f.wallTimeS) === 'null' ? 0 : f.wallTimeS},"ageMs":${Math.max(0, now - f.atMs)}}`
  );
}

/** Writes each binary reply into a buffer of its own (the default; the service passes its pooled writer). */
const copying = new ObserveReplyBinaryWriter();

/**
 * The observe reply in the protocol's binary encoding (`replyEncoding: "binary"`), written straight
 * from the observation into the writer's typed arrays: no text, no intermediate objects. Same
 * content as `encodeObserveReply` (a test decodes both and compares). `writer`: the service passes
 * its pooled writer (replies as views of slabs it recycles after a NATS flush); by default each
 * reply is a buffer of its own.
 */
export function encodeObserveReplyBinary(o: PoolObservation, meta: ReplyMeta, binary: ObserveReplyBinaryWriter = copying): Uint8Array {
  const now = meta.nowMs;
  const only = meta.workers === 'choice' ? o.chosenIndex : -2;
  const n = only === -2 ? o.workers.length : only >= 0 ? 1 : 0;
  binary.begin(n);
  const f = binary.f64;
  let k = 0;
  for (let i = 0; i < o.workers.length; i++) {
    if (only !== -2 && i !== only) continue;
    const w = o.workers[i]!;
    const m = w.match;
    const l = w.load;
    const r = w.report;
    binary.head(k, w.workerId, w.dpRank, w.schedulable === true, r !== null, w.suspect ? w.suspect.reason : null);
    const b = binary.slots(k++);
    f[b + F.deviceOverlapBlocks] = m ? m.deviceBlocks : 0;
    f[b + F.K] = m ? m.deviceTokens : 0;
    f[b + F.hostOverlapBlocks] = m ? m.hostBlocks : NaN;
    f[b + F.diskOverlapBlocks] = m ? m.diskBlocks : NaN;
    f[b + F.anyTierOverlapBlocks] = m ? m.anyBlocks : NaN;
    f[b + F.R] = l.requests;
    f[b + F.trackedPrefillTokens] = l.trackedPrefillTokens;
    f[b + F.P] = binaryNullable(l.prefillPressure);
    f[b + F.maxNumBatchedTokens] = binaryNullable(w.capacity ? w.capacity.maxNumBatchedTokens : null);
    f[b + F.effectivePrefillTokens] = w.effectivePrefillTokens;
    f[b + F.newBlocks] = w.newRequestBlocks;
    f[b + F.activeBlocks] = l.activeBlocks;
    f[b + F.totalKvBlocks] = binaryNullable(l.totalKvBlocks);
    f[b + F.treeBlocks] = m ? m.treeSize : 0;
    f[b + F.reportedActiveDecodeBlocks] = r ? binaryNullable(r.activeDecodeBlocks) : NaN;
    f[b + F.reportedActivePrefillTokens] = r ? binaryNullable(r.activePrefillTokens) : NaN;
    f[b + F.reportedKvUsedBlocks] = r ? binaryNullable(r.kvUsedBlocks) : NaN;
    f[b + F.suspectSinceMs] = w.suspect ? w.suspect.sinceMs : NaN;
    f[b + F.indexAgeMs] = w.lastEventMs === null ? NaN : Math.max(0, now - w.lastEventMs);
    f[b + F.loadAgeMs] = r ? Math.max(0, now - r.atMs) : NaN;
    f[b + F.bookingAgeMs] = l.lastChangeMs === null ? NaN : Math.max(0, now - l.lastChangeMs);
    f[b + F.dynamoCost] = binaryNullable(o.costs[i]);
  }
  return binary.finish({
    pool: o.pool,
    blockSize: o.blockSize,
    queryDurationUs: Math.round(meta.queryDurationUs),
    atMs: now,
    pending: o.pending,
    dynamoChoice: dynamoChoiceOf(o),
    snapshotRestoredAtMs: meta.restoredAtMs,
  });
}

/** A binary writer as the pool's row sink: `reserve(n)` begins a reply of n records. */
class RecordSink implements RowSink {
  out = new Float64Array(0);
  base = 0;
  stride = 0;
  constructor(readonly writer: ObserveReplyBinaryWriter) {}
  reserve(rows: number): void {
    const w = this.writer;
    w.begin(rows);
    this.out = w.f64;
    this.base = w.slots(0);
    this.stride = w.slots(1) - this.base;
  }
}

const sinks = new WeakMap<ObserveReplyBinaryWriter, RecordSink>();

/** Rows of a `workers: "choice"` reply: written here, then the chosen one is copied into the reply. */
class ScratchSink implements RowSink {
  out = new Float64Array(0);
  readonly base = 0;
  readonly stride = WORKER_FACTS.length;
  reserve(rows: number): void {
    if (this.out.length < rows * this.stride) this.out = new Float64Array(Math.max(rows * this.stride, 2 * this.out.length));
  }
}

const choiceRows = new ScratchSink();

/**
 * A binary observe reply, computed and encoded in one pass. Listing every worker, the pool writes its
 * rows into the reply's records (`PoolState.observeRows`; rows and records both lay out
 * `WORKER_FACTS` from @vantage/types), then the records' heads and the header are added. The same
 * bytes as `encodeObserveReplyBinary(state.observeTransient(...))` (tested), without a record object
 * per worker; with `workers: "choice"` the chosen row alone is copied in. `queryDurationUs` runs from
 * `receivedAtNs` until the rows are written, so unlike the object path's (which stops before anything
 * is encoded) it includes writing the records' values.
 */
export function observeBinary(
  state: PoolState,
  localHashes: BigUint64Array,
  promptTokens: number,
  nowMs: number,
  receivedAtNs: bigint,
  restoredAtMs: number | null,
  writer: ObserveReplyBinaryWriter = copying,
  workers: 'all' | 'choice' = 'all',
): Uint8Array {
  let rows: ObserveRows;
  if (workers === 'all') {
    let sink = sinks.get(writer);
    if (sink === undefined) sinks.set(writer, (sink = new RecordSink(writer)));
    rows = state.observeRows(localHashes, promptTokens, nowMs, sink);
  } else {
    // Only Dynamo's choice is listed: every rank's row is computed (the choice needs them all) into
    // a scratch, and the chosen one is copied into the reply's single record.
    rows = state.observeRows(localHashes, promptTokens, nowMs, choiceRows);
    const c = rows.chosenIndex;
    writer.begin(c >= 0 ? 1 : 0);
    if (c >= 0) writer.f64.set(choiceRows.out.subarray(c * choiceRows.stride, (c + 1) * choiceRows.stride), writer.slots(0));
  }
  const queryDurationUs = Number(process.hrtime.bigint() - receivedAtNs) / 1000;
  if (workers === 'all') {
    for (let i = 0; i < rows.n; i++) head(writer, i, rows, i);
  } else if (rows.chosenIndex >= 0) head(writer, 0, rows, rows.chosenIndex);
  return writer.finish({
    pool: state.name,
    blockSize: state.blockSize,
    queryDurationUs: Math.round(queryDurationUs),
    atMs: nowMs,
    pending: { requests: rows.pendingRequests, tokens: rows.pendingTokens },
    dynamoChoice: choiceOfRows(rows),
    snapshotRestoredAtMs: restoredAtMs,
  });
}

/** Record k's head from rank i of a rows answer. */
function head(writer: ObserveReplyBinaryWriter, k: number, rows: ObserveRows, i: number): void {
  writer.headHalves(k, rows.idHalves[2 * i]!, rows.idHalves[2 * i + 1]!, rows.ranks[i]!.dpRank, rows.schedulable[i] === true, rows.reported[i] === 1, rows.suspect[i]?.reason ?? null);
}

/** JSON has no NaN or Infinity: a non-finite number is reported as unknown. */
const num = (v: number | null): string => (v === null || !Number.isFinite(v) ? 'null' : String(v));

/** The same reply through the protocol codec (reference for the fast encoder; also used in tests). */
export function encodeObserveReplyViaCodec(o: PoolObservation, meta: ReplyMeta): Uint8Array {
  return observeReplyCodec.encode(observeReplyOf(o, meta));
}

/** The worker Dynamo's cost chose, with its cost and terms; null when none was chosen or it has no cost. */
/** `choiceOf` for a rows answer. */
function choiceOfRows(rows: ObserveRows): ObserveReply['dynamoChoice'] {
  const c = rows.chosenIndex;
  if (c < 0 || rows.choice === null || rows.chosenCost === null) return null;
  const r = rows.ranks[c]!;
  return { workerId: r.workerId, dpRank: r.dpRank, cost: rows.chosenCost, policy: { name: policyName(rows.choice.reason), params: rows.choice.terms } };
}
