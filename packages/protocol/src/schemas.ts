import { ID_MAX_LENGTH } from './ids';
import { LIFECYCLE_KINDS } from './messages';
import { POOL_NAME_PATTERN } from './subjects';

/** JSON Schemas (draft-07) of every message: the package README's "Schemas and evolution". */

type Schema = Record<string, unknown>;

const SAFE_MAX = Number.MAX_SAFE_INTEGER;
const U32_MAX = 0xffff_ffff;
/** 2^17 blocks: 2M tokens at block size 16, beyond any context window we serve. */
export const MAX_HASHES = 131_072;
/** Most token ids a prompt may carry (`tokenIds` maxItems). */
export const MAX_TOKENS = 2_097_152;
/** Most worker records an observe reply may carry. */
export const MAX_WORKERS = 4096;
/** Longest `*Le64` string the schemas accept: base64 of MAX_HASHES u64s. */
export const MAX_LE64_CHARS = Math.ceil((MAX_HASHES * 8) / 3) * 4;

const id = (name: string): string => `urn:vantage:protocol:v1:${name}`;

// Shared pieces, inlined into each file so that every schema stands alone.
const u64: Schema = {
  type: 'string',
  description: 'Unsigned 64-bit integer as a decimal string (no sign, no leading zeros, at most 2^64-1).',
  pattern: '^(0|[1-9][0-9]{0,19})$',
};
const nonNegInt: Schema = { type: 'integer', minimum: 0, maximum: SAFE_MAX };
const nullableNonNegInt: Schema = { type: ['integer', 'null'], minimum: 0, maximum: SAFE_MAX };
const u32: Schema = { type: 'integer', minimum: 0, maximum: U32_MAX };
const posInt: Schema = { type: 'integer', minimum: 1, maximum: SAFE_MAX };
const nonNegNumber: Schema = { type: 'number', minimum: 0 };
const nullableNonNegNumber: Schema = { type: ['number', 'null'], minimum: 0 };
const epochMs: Schema = { ...nonNegInt, description: 'Milliseconds since the Unix epoch.' };
const version: Schema = { const: 1, description: 'Message version; a different value is rejected as unsupported.' };
const shortString = (maxLength: number): Schema => ({ type: 'string', minLength: 1, maxLength });
const requestId = { ...shortString(ID_MAX_LENGTH), description: 'Request id, shared by route, booking, lifecycle and decision records.' };
const sessionId = { ...shortString(ID_MAX_LENGTH), description: 'Agent session id (the Kafka partition key downstream).' };
const pool: Schema = { type: 'string', pattern: POOL_NAME_PATTERN, description: 'Model pool: one NATS subject token.' };
const nullableString = (maxLength: number): Schema => ({ type: ['string', 'null'], maxLength });
const role: Schema = { enum: ['efficient', 'capable'] };
const code: Schema = { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$' };

function obj(required: string[], properties: Record<string, Schema>, extra: Schema = {}): Schema {
  return { type: 'object', required, properties, ...extra };
}

/** A u64 list in its compact form: base64 of consecutive 8-byte little-endian integers. */
const u64Le64: Schema = {
  type: 'string',
  maxLength: MAX_LE64_CHARS,
  pattern: '^[A-Za-z0-9+/]*={0,2}$',
};

const prompt: Schema = obj(
  [],
  {
    localHashes: {
      type: 'array',
      maxItems: MAX_HASHES,
      items: u64,
      description: "Dynamo local block hashes (XXH3-64, seed 1337, LoRA-adjusted) of the prompt's full blocks, in order.",
    },
    localHashesLe64: {
      ...u64Le64,
      description:
        'The same local block hashes, compactly: base64 of the u64 values as consecutive 8-byte little-endian integers. ' +
        'What encoders send by default on the request path (exact, about 3x smaller than decimal strings and parsed without BigInt arithmetic).',
    },
    tokenIds: {
      type: 'array',
      maxItems: MAX_TOKENS,
      items: u32,
      description: "Token ids after the model's chat template and tokenizer; the receiver hashes them.",
    },
    loraName: { ...nullableString(256), description: 'LoRA adapter name; null or absent for the base model.' },
  },
  {
    description: 'Exactly one of localHashes, localHashesLe64 or tokenIds.',
    oneOf: [{ required: ['localHashes'] }, { required: ['localHashesLe64'] }, { required: ['tokenIds'] }],
  },
);

const pending: Schema = obj(['requests', 'tokens'], { requests: nonNegInt, tokens: nonNegInt }, {
  description: "Work in the pool's admission queue; zero does not establish an empty backend queue.",
});

const ages: Schema = obj(['indexMs', 'loadMs', 'bookingMs'], {
  indexMs: { ...nullableNonNegNumber, description: 'Since the last KV event applied for this worker; null if none.' },
  loadMs: { ...nullableNonNegNumber, description: 'Since the last load report (kv_metrics); null if none.' },
  bookingMs: { ...nullableNonNegNumber, description: 'Since the last booking change on this worker; null if none.' },
});

const suspect: Schema = {
  oneOf: [
    { type: 'null' },
    obj(['reason', 'sinceMs'], { reason: code, sinceMs: epochMs }, {
      description: 'Why this worker\'s index may be wrong (e.g. event_gap, unknown_parent) and since when.',
    }),
  ],
};

const workerObservation: Schema = obj(
  [
    'workerId', 'dpRank', 'schedulable', 'deviceOverlapBlocks', 'K', 'hostOverlapBlocks', 'diskOverlapBlocks',
    'anyTierOverlapBlocks', 'R', 'trackedPrefillTokens', 'P', 'maxNumBatchedTokens', 'effectivePrefillTokens',
    'newBlocks', 'activeBlocks', 'totalKvBlocks', 'treeBlocks', 'reported', 'suspect', 'ages', 'dynamoCost',
  ],
  {
    workerId: u64,
    dpRank: u32,
    schedulable: { type: 'boolean' },
    deviceOverlapBlocks: { ...nonNegInt, description: 'Leading prompt blocks held in device (GPU) memory.' },
    K: { ...nonNegInt, description: 'Reusable device-prefix tokens: min(N, deviceOverlapBlocks × blockSize).' },
    hostOverlapBlocks: { ...nullableNonNegInt, description: 'Leading blocks available from host memory or faster (cumulative, not additive).' },
    diskOverlapBlocks: { ...nullableNonNegInt, description: 'Leading blocks available from disk or faster (cumulative, not additive).' },
    anyTierOverlapBlocks: { ...nullableNonNegInt, description: 'Leading blocks available from any tier.' },
    R: { ...nonNegInt, description: 'Booked requests on this worker and rank, executing ones included.' },
    trackedPrefillTokens: { ...nonNegInt, description: 'Booked, cache-adjusted prefill tokens not yet prefilled.' },
    P: { ...nullableNonNegNumber, description: 'trackedPrefillTokens / maxNumBatchedTokens; null when capacity is unknown.' },
    maxNumBatchedTokens: nullableNonNegInt,
    effectivePrefillTokens: { ...nonNegInt, description: "Dynamo's prefill-work estimate for this request on this worker." },
    newBlocks: { ...nonNegInt, description: 'Request blocks not already active on this worker.' },
    activeBlocks: { ...nonNegInt, description: 'Tracked decode blocks: unique blocks of the booked requests.' },
    totalKvBlocks: { ...nullableNonNegInt, description: 'Advertised KV-block capacity; null when unknown.' },
    treeBlocks: { ...nonNegInt, description: "Blocks this worker holds in the index (Dynamo's tie-break)." },
    reported: {
      oneOf: [
        { type: 'null' },
        obj(['activeDecodeBlocks', 'activePrefillTokens', 'kvUsedBlocks'], {
          activeDecodeBlocks: nullableNonNegInt,
          activePrefillTokens: nullableNonNegInt,
          kvUsedBlocks: nullableNonNegInt,
        }, { description: "The worker's own last ActiveLoad report." }),
      ],
    },
    suspect,
    ages,
    dynamoCost: { type: ['number', 'null'], description: "Dynamo's cost for this worker under dynamoChoice.policy." },
    forwardPass: {
      oneOf: [
        { type: 'null' },
        obj(['scheduledRequests', 'scheduledPrefillTokens', 'scheduledDecodeKvTokens', 'queuedRequests', 'queuedPrefillTokens', 'wallTimeS', 'ageMs'], {
          scheduledRequests: { ...nonNegInt, description: 'Requests in the last forward pass (prefill and decode).' },
          scheduledPrefillTokens: { ...nonNegInt, description: 'Prompt tokens prefilled in that pass.' },
          scheduledDecodeKvTokens: { ...nonNegInt, description: 'KV tokens held by the decoding requests of that pass.' },
          queuedRequests: { ...nonNegInt, description: "Requests waiting in the worker's own queue." },
          queuedPrefillTokens: { ...nonNegInt, description: 'Their prompt tokens still to prefill.' },
          wallTimeS: { type: 'number', minimum: 0, description: 'Seconds the last forward pass took (0 when idle).' },
          ageMs: { ...nonNegNumber, description: 'Since that report arrived.' },
        }, { description: "The worker's own last forward-pass-metrics report (Dynamo 1.6.1); absent or null when none arrived." }),
      ],
    },
    recoveredAtMs: {
      type: ['number', 'null'],
      minimum: 0,
      description: "When the indexer last recovered this worker's blocks from the worker's own local index (ms since epoch); absent or null when never.",
    },
  },
);

const policy: Schema = obj(['name', 'params'], {
  name: shortString(64),
  params: { type: 'object', additionalProperties: { type: 'number' }, description: 'e.g. overlapScoreWeight, temperature.' },
});

const observeRequest: Schema = obj(['v', 'prompt', 'promptTokens'], {
  v: version,
  requestId: { ...requestId, description: 'Present when the query is for a real request (diagnostics, tracing).' },
  prompt,
  promptTokens: { ...nonNegInt, description: 'N: input tokens after chat template and tokenizer.' },
  workers: {
    enum: ['all', 'choice'],
    description:
      "Which workers the reply lists: every (worker, dp rank) of the pool (default), or only the one Dynamo's cost would choose " +
      '(for callers such as the decision service that read only that one; saves encoding and parsing the rest).',
  },
  replyEncoding: {
    enum: ['json', 'binary'],
    description:
      'Encoding of the reply: JSON per observe-reply.v1.json (default), or the compact binary layout described in ' +
      'schemas/protocol/README.md (same content and validation; numbers written as little-endian doubles instead of text).',
  },
});

const observeReply: Schema = obj(['v', 'pool', 'blockSize', 'queryDurationUs', 'atMs', 'workers', 'pending', 'dynamoChoice'], {
  v: version,
  pool,
  blockSize: posInt,
  queryDurationUs: { ...nonNegInt, description: 'Time the indexer spent answering.' },
  atMs: { ...epochMs, description: "Indexer's clock when the answer was computed; ages are relative to it." },
  workers: { type: 'array', maxItems: MAX_WORKERS, items: workerObservation },
  pending: { oneOf: [{ type: 'null' }, pending] },
  dynamoChoice: {
    oneOf: [
      { type: 'null' },
      obj(['workerId', 'dpRank', 'cost', 'policy'], { workerId: u64, dpRank: u32, cost: { type: 'number' }, policy }, {
        description: "The worker Dynamo's own selection would pick for this prompt.",
      }),
    ],
  },
  snapshotRestoredAtMs: { ...nullableNonNegNumber, description: 'When the index was last restored from a snapshot, if ever.' },
});

const candidate: Schema = obj(['model', 'prompt', 'promptTokens'], {
  model: shortString(256),
  pool: { ...pool, description: "Pool serving the model; absent means the decision service's configured mapping." },
  prompt,
  promptTokens: nonNegInt,
});

const routeRequest: Schema = obj(['v', 'requestId', 'sessionId', 'stageProposal', 'candidates'], {
  v: version,
  requestId,
  sessionId,
  stageProposal: role,
  candidates: obj(['efficient', 'capable'], { efficient: candidate, capable: candidate }),
  deadlineMs: { ...nonNegInt, description: 'Time budget for the decision; past it the service answers with a fallback.' },
});

const candidateObservation: Schema = obj(
  ['model', 'pool', 'promptTokens', 'workerId', 'dpRank', 'schedulable', 'K', 'R', 'P', 'effectivePrefillTokens',
    'hostOverlapBlocks', 'diskOverlapBlocks', 'activeBlocks', 'totalKvBlocks', 'pending', 'ages', 'queryDurationUs', 'error'],
  {
    model: shortString(256),
    pool,
    promptTokens: nonNegInt,
    workerId: { oneOf: [{ type: 'null' }, u64] },
    dpRank: { oneOf: [{ type: 'null' }, u32] },
    schedulable: { type: ['boolean', 'null'] },
    K: nullableNonNegInt,
    R: nullableNonNegInt,
    P: nullableNonNegNumber,
    effectivePrefillTokens: nullableNonNegInt,
    hostOverlapBlocks: nullableNonNegInt,
    diskOverlapBlocks: nullableNonNegInt,
    activeBlocks: nullableNonNegInt,
    totalKvBlocks: nullableNonNegInt,
    pending: { oneOf: [{ type: 'null' }, pending] },
    ages: obj(['collectedMs', 'indexMs', 'loadMs', 'bookingMs'], {
      collectedMs: { ...nonNegNumber, description: 'Since the observation was collected, at decision time.' },
      indexMs: nullableNonNegNumber,
      loadMs: nullableNonNegNumber,
      bookingMs: nullableNonNegNumber,
    }),
    queryDurationUs: nullableNonNegInt,
    error: { oneOf: [{ type: 'null' }, obj(['code', 'reason'], { code, reason: nullableString(1024) })] },
  },
);

const routeReply: Schema = obj(
  ['v', 'requestId', 'stageProposal', 'model', 'modelRole', 'workerId', 'dpRank', 'reason', 'variant', 'observations',
    'predictions', 'parameterVersion', 'queryDurationUs', 'decisionDurationUs'],
  {
    v: version,
    requestId,
    sessionId,
    stageProposal: role,
    model: shortString(256),
    modelRole: role,
    pool: { oneOf: [{ type: 'null' }, pool] },
    workerId: { oneOf: [{ type: 'null' }, u64], description: 'Reserved worker; null when no worker could be observed.' },
    dpRank: { oneOf: [{ type: 'null' }, u32] },
    endpoint: nullableString(1024),
    reason: { enum: ['kept', 'overrode', 'fallback'] },
    fallback: { oneOf: [{ type: 'null' }, code], description: 'Which fallback, when reason is fallback.' },
    detail: nullableString(1024),
    variant: { ...code, description: 'Rule variant in force (baseline, request_count, count_prefill, ttft_blind, ttft_cache).' },
    observations: obj(['efficient', 'capable'], {
      efficient: { oneOf: [{ type: 'null' }, candidateObservation] },
      capable: { oneOf: [{ type: 'null' }, candidateObservation] },
    }),
    predictions: obj(['estimator', 'efficientTtftMs', 'capableTtftMs', 'advantageMs', 'marginMs'], {
      estimator: { enum: ['none', 'blind', 'cache'] },
      efficientTtftMs: { type: ['number', 'null'] },
      capableTtftMs: { type: ['number', 'null'] },
      advantageMs: { type: ['number', 'null'] },
      marginMs: { type: ['number', 'null'] },
    }),
    parameterVersion: nullableString(256),
    queryDurationUs: nonNegInt,
    decisionDurationUs: nonNegInt,
  },
);

const HASH_LISTS = ['sequenceHashes', 'sequenceHashesLe64', 'localHashes', 'localHashesLe64'];
const bookingEvent: Schema = obj(
  ['v', 'requestId', 'sessionId', 'pool', 'workerId', 'dpRank', 'promptTokens', 'overlapBlocks', 'atMs'],
  {
    v: version,
    requestId,
    sessionId,
    pool,
    workerId: u64,
    dpRank: u32,
    promptTokens: nonNegInt,
    overlapBlocks: { ...nonNegInt, description: 'Device overlap blocks on the chosen worker at booking time.' },
    sequenceHashes: { type: 'array', maxItems: MAX_HASHES, items: u64 },
    sequenceHashesLe64: { ...u64Le64, description: 'sequenceHashes in the compact form (base64 of 8-byte little-endian u64s); what encoders send.' },
    localHashes: { type: 'array', maxItems: MAX_HASHES, items: u64, description: 'Alternative to sequenceHashes; the indexer chains them.' },
    localHashesLe64: { ...u64Le64, description: 'localHashes in the compact form; what encoders send.' },
    expectedOutputTokens: nullableNonNegInt,
    prefillTokens: { ...nonNegInt, description: 'Uncached prefill tokens to track, when the booker computed them.' },
    atMs: epochMs,
  },
  {
    // Every pair of the four lists.
    not: { anyOf: HASH_LISTS.flatMap((a, i) => HASH_LISTS.slice(i + 1).map((b) => ({ required: [a, b] }))) },
    description: 'A reservation: at most one hash list (sequence or local hashes, decimal or compact).',
  },
);

const lifecycleEvent: Schema = obj(
  ['v', 'requestId', 'sessionId', 'pool', 'kind', 'atMs'],
  {
    v: version,
    requestId,
    sessionId,
    pool,
    kind: { enum: LIFECYCLE_KINDS },
    atMs: epochMs,
    workerId: { oneOf: [{ type: 'null' }, u64] },
    dpRank: { oneOf: [{ type: 'null' }, u32] },
    usage: obj(['inputTokens', 'outputTokens', 'cachedTokens'], {
      inputTokens: nonNegInt,
      outputTokens: nonNegInt,
      cachedTokens: { ...nullableNonNegInt, description: 'Reported cache reuse; null when the backend does not report it.' },
    }),
    error: obj(['code', 'message'], { code: shortString(128), message: nullableString(4096) }),
    background: {
      type: 'boolean',
      description: 'Competing (background) traffic, not a request of the sessions under study. Absent means false.',
    },
    arrivalMs: { ...epochMs, description: 'Arrival of the request (ms since the Unix epoch), for requests without a decision record to time them from.' },
  },
  {
    description: 'Gateway lifecycle of one request. kind usage carries usage.',
    allOf: [{ if: { properties: { kind: { const: 'usage' } }, required: ['kind'] }, then: { required: ['usage'] } }],
  },
);

const workerRegistration: Schema = obj(
  ['v', 'pool', 'kind', 'workerId', 'atMs'],
  {
    v: version,
    pool,
    kind: { enum: ['register', 'heartbeat', 'deregister'] },
    workerId: u64,
    atMs: epochMs,
    blockSize: posInt,
    totalKvBlocks: nullableNonNegInt,
    maxNumBatchedTokens: nullableNonNegInt,
    maxNumSeqs: nullableNonNegInt,
    dpStartRank: u32,
    dpSize: { type: 'integer', minimum: 1, maximum: U32_MAX },
    schedulable: { type: 'boolean' },
    ttlMs: { ...posInt, description: 'The registration lapses unless renewed within this time.' },
    endpoint: nullableString(1024),
    model: nullableString(256),
  },
  {
    description: 'Worker registration or heartbeat with capacity; deregister needs only the worker id.',
    allOf: [
      {
        if: { properties: { kind: { enum: ['register', 'heartbeat'] } }, required: ['kind'] },
        then: { required: ['blockSize', 'totalKvBlocks', 'maxNumBatchedTokens', 'maxNumSeqs', 'dpStartRank', 'dpSize', 'schedulable', 'ttlMs'] },
      },
    ],
  },
);

function file(name: string, title: string, schema: Schema): Schema {
  return { $schema: 'http://json-schema.org/draft-07/schema#', $id: id(name), title, ...schema };
}

/** Schema file name (under schemas/protocol/) → schema. */
export const PROTOCOL_SCHEMAS = {
  'observe-request.v1.json': file('observe-request', 'vantage.v1.observe.{pool} request', observeRequest),
  'observe-reply.v1.json': file('observe-reply', 'vantage.v1.observe.{pool} reply', observeReply),
  'route-request.v1.json': file('route-request', 'vantage.v1.route request', routeRequest),
  'route-reply.v1.json': file('route-reply', 'vantage.v1.route reply', routeReply),
  'booking-event.v1.json': file('booking-event', 'vantage.v1.bookings.{pool} event', bookingEvent),
  'lifecycle-event.v1.json': file('lifecycle-event', 'vantage.v1.lifecycle.{pool} event', lifecycleEvent),
  'worker-registration.v1.json': file('worker-registration', 'vantage.v1.workers.{pool} event', workerRegistration),
} as const satisfies Record<string, Schema>;

export type ProtocolSchemaFile = keyof typeof PROTOCOL_SCHEMAS;
