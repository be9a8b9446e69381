import type { WorkerId } from '@vantage/types';
import type {
  BookingEvent,
  CandidateObservation,
  LifecycleEvent,
  MessageCodec,
  ObserveReply,
  ObserveRequest,
  RouteReply,
  RouteRequest,
  WorkerRegistration,
} from '@vantage/protocol';
import {
  bookingEventCodec,
  lifecycleEventCodec,
  observeReplyCodec,
  observeRequestCodec,
  routeReplyCodec,
  routeRequestCodec,
  workerRegistrationCodec,
} from '@vantage/protocol';

/** Values at the edges of u64, where a JS number would already have lost bits. */
export const U64_TOP = 0xffff_ffff_ffff_ffffn;
export const U64_2_63 = 1n << 63n;
export const W = (U64_2_63 + 1n) as WorkerId;

export const observeRequest: ObserveRequest = {
  requestId: 'req-1',
  prompt: { kind: 'local_hashes', localHashes: BigUint64Array.from([U64_TOP, U64_2_63, 0n, 12345n]), loraName: null },
  promptTokens: 300,
  workers: 'all',
};

export const observeRequestTokens: ObserveRequest = {
  requestId: null,
  prompt: { kind: 'token_ids', tokenIds: Uint32Array.from([0, 1, 0xffff_ffff]), loraName: 'adapter-a' },
  promptTokens: 3,
  workers: 'all',
};

export const observeReply: ObserveReply = {
  pool: 'efficient-pool',
  blockSize: 64,
  queryDurationUs: 412,
  atMs: 1_780_000_000_000,
  workers: [
    {
      workerId: W,
      dpRank: 0,
      schedulable: true,
      deviceOverlapBlocks: 3,
      K: 192,
      hostOverlapBlocks: 4,
      diskOverlapBlocks: null,
      anyTierOverlapBlocks: 4,
      R: 2,
      trackedPrefillTokens: 16_000,
      P: 1.953125,
      maxNumBatchedTokens: 8192,
      effectivePrefillTokens: 108,
      newBlocks: 1,
      activeBlocks: 37,
      totalKvBlocks: 16_384,
      treeBlocks: 900,
      reported: { activeDecodeBlocks: 40, activePrefillTokens: null, kvUsedBlocks: 1200 },
      suspect: { reason: 'event_gap', sinceMs: 1_779_999_999_000 },
      ages: { indexMs: 3.5, loadMs: null, bookingMs: 120 },
      dynamoCost: 290.5,
    },
    {
      workerId: U64_TOP as WorkerId,
      dpRank: 7,
      schedulable: false,
      deviceOverlapBlocks: 0,
      K: 0,
      hostOverlapBlocks: null,
      diskOverlapBlocks: null,
      anyTierOverlapBlocks: null,
      R: 0,
      trackedPrefillTokens: 0,
      P: null,
      maxNumBatchedTokens: null,
      effectivePrefillTokens: 300,
      newBlocks: 4,
      activeBlocks: 0,
      totalKvBlocks: null,
      treeBlocks: 0,
      reported: null,
      suspect: null,
      ages: { indexMs: null, loadMs: null, bookingMs: null },
      dynamoCost: null,
    },
  ],
  pending: { requests: 1, tokens: 5000 },
  dynamoChoice: { workerId: W, dpRank: 0, cost: 290.5, policy: { name: 'kv_router', params: { overlapScoreWeight: 1, temperature: 0 } } },
  snapshotRestoredAtMs: 1_779_000_000_000,
};

export const routeRequest: RouteRequest = {
  requestId: 'req-1',
  sessionId: 'sess-9',
  stageProposal: 'efficient',
  candidates: {
    efficient: { model: 'small-model', pool: 'efficient-pool', prompt: observeRequest.prompt, promptTokens: 300 },
    capable: { model: 'large-model', pool: null, prompt: observeRequestTokens.prompt, promptTokens: 3 },
  },
  deadlineMs: 50,
};

const observation: CandidateObservation = {
  model: 'small-model',
  pool: 'efficient-pool',
  promptTokens: 300,
  workerId: W,
  dpRank: 0,
  schedulable: true,
  K: 192,
  R: 2,
  P: 1.953125,
  effectivePrefillTokens: 108,
  hostOverlapBlocks: 4,
  diskOverlapBlocks: null,
  activeBlocks: 37,
  totalKvBlocks: 16_384,
  pending: null,
  ages: { collectedMs: 1.25, indexMs: 3.5, loadMs: null, bookingMs: 120 },
  queryDurationUs: 412,
  error: null,
};

export const routeReply: RouteReply = {
  requestId: 'req-1',
  sessionId: 'sess-9',
  stageProposal: 'efficient',
  model: 'large-model',
  modelRole: 'capable',
  pool: 'capable-pool',
  workerId: U64_TOP as WorkerId,
  dpRank: 1,
  endpoint: 'dyn://ns.backend.generate',
  reason: 'overrode',
  fallback: null,
  detail: 'T_cache advantage 0.5 s > 0.2 s',
  variant: 'ttft_cache',
  observations: {
    efficient: observation,
    capable: { ...observation, model: 'large-model', pool: 'capable-pool', workerId: null, dpRank: null, error: { code: 'timeout', reason: 'no reply in 20 ms' } },
  },
  predictions: { estimator: 'cache', efficientTtftMs: 1400, capableTtftMs: 900, advantageMs: 500, marginMs: 200 },
  parameterVersion: 'params-2026-05-01',
  queryDurationUs: 900,
  decisionDurationUs: 1100,
};

export const bookingEvent: BookingEvent = {
  requestId: 'req-1',
  sessionId: 'sess-9',
  pool: 'capable-pool',
  workerId: U64_TOP as WorkerId,
  dpRank: 1,
  promptTokens: 300,
  overlapBlocks: 3,
  sequenceHashes: BigUint64Array.from([U64_TOP, U64_2_63 + 5n]),
  localHashes: null,
  expectedOutputTokens: 256,
  prefillTokens: null,
  atMs: 1_780_000_000_001,
};

export const lifecycleEvent: LifecycleEvent = {
  requestId: 'req-1',
  sessionId: 'sess-9',
  pool: 'capable-pool',
  kind: 'usage',
  atMs: 1_780_000_000_900,
  workerId: W,
  dpRank: 1,
  usage: { inputTokens: 300, outputTokens: 120, cachedTokens: 192 },
  error: null,
  background: false,
  arrivalMs: null,
};

/** Competing traffic: marked background, timed from its own arrival. */
export const backgroundLifecycleEvent: LifecycleEvent = {
  ...lifecycleEvent,
  requestId: 'bg-1',
  sessionId: 'evalbg:a0',
  kind: 'first_token',
  usage: null,
  background: true,
  arrivalMs: 1_780_000_000_100,
};

export const registration: WorkerRegistration = {
  kind: 'register',
  pool: 'capable-pool',
  workerId: U64_TOP as WorkerId,
  atMs: 1_780_000_000_000,
  capacity: {
    blockSize: 64,
    totalKvBlocks: 16_384,
    maxNumBatchedTokens: 8192,
    maxNumSeqs: 256,
    dpStartRank: 0,
    dpSize: 2,
    schedulable: true,
  },
  ttlMs: 10_000,
  endpoint: null,
  model: 'large-model',
};

export const deregistration: WorkerRegistration = { kind: 'deregister', pool: 'capable-pool', workerId: W, atMs: 1_780_000_001_000 };

/** Every message with its codec: what the round-trip and schema-file tests iterate. */
export const CASES: ReadonlyArray<readonly [string, MessageCodec<never>, unknown]> = [
  ['observe request (local hashes)', observeRequestCodec as MessageCodec<never>, observeRequest],
  ['observe request (token ids)', observeRequestCodec as MessageCodec<never>, observeRequestTokens],
  ['observe request (only Dynamo\'s choice)', observeRequestCodec as MessageCodec<never>, { ...observeRequest, workers: 'choice' }],
  ['observe request (binary reply)', observeRequestCodec as MessageCodec<never>, { ...observeRequest, replyEncoding: 'binary' }],
  ['observe reply', observeReplyCodec as MessageCodec<never>, observeReply],
  ['observe reply (empty)', observeReplyCodec as MessageCodec<never>, { ...observeReply, workers: [], pending: null, dynamoChoice: null, snapshotRestoredAtMs: null }],
  ['route request', routeRequestCodec as MessageCodec<never>, routeRequest],
  ['route reply', routeReplyCodec as MessageCodec<never>, routeReply],
  [
    'route reply (fallback)',
    routeReplyCodec as MessageCodec<never>,
    { ...routeReply, sessionId: null, reason: 'fallback', fallback: 'stale_observation', workerId: null, dpRank: null, pool: null, endpoint: null, detail: null, parameterVersion: null, observations: { efficient: null, capable: null }, predictions: { estimator: 'none', efficientTtftMs: null, capableTtftMs: null, advantageMs: null, marginMs: null } },
  ],
  ['booking event', bookingEventCodec as MessageCodec<never>, bookingEvent],
  ['booking event (local hashes)', bookingEventCodec as MessageCodec<never>, { ...bookingEvent, sequenceHashes: null, localHashes: BigUint64Array.from([1n]), expectedOutputTokens: null, prefillTokens: 40 }],
  ['booking event (no hashes)', bookingEventCodec as MessageCodec<never>, { ...bookingEvent, sequenceHashes: null }],
  ['lifecycle event', lifecycleEventCodec as MessageCodec<never>, lifecycleEvent],
  ['lifecycle event (background)', lifecycleEventCodec as MessageCodec<never>, backgroundLifecycleEvent],
  ['lifecycle event (failed)', lifecycleEventCodec as MessageCodec<never>, { ...lifecycleEvent, kind: 'failed', usage: null, workerId: null, dpRank: null, error: { code: 'upstream_503', message: null } }],
  ['worker registration', workerRegistrationCodec as MessageCodec<never>, registration],
  ['worker deregistration', workerRegistrationCodec as MessageCodec<never>, deregistration],
];
