// What the secured-pipeline tests share: the two pools and their workers, the prompt, the messages a
// worker publishes, the parameter set and settings the services run with, a service started in
// process with its log lines kept, an operator's observe query and the replay tool.
import { writeFileSync } from 'node:fs';
import { run, type CliIo } from '@vantage/cli';
import { decisionConfigSchema, startDecision } from '@vantage/decision';
import { fleetConfigSchema, startFleet } from '@vantage/fleet';
import { GatewayClient } from '@vantage/gateway-client';
import { indexerConfigSchema, startIndexer } from '@vantage/indexer';
import type { SecurePool } from '@vantage/infra';
import { outcomeConfigSchema, startOutcome } from '@vantage/outcome';
import { observeReplyCodec, observeRequestCodec, observeSubject, workerRegistrationCodec, type ObserveReply } from '@vantage/protocol';
import { createParameterSet, DEFAULT_PARAMETER_SET, serializeParameterSet } from '@vantage/rules';
import { runService, type NatsConnection, type RunningService } from '@vantage/runtime';
import { eventually } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage } from '@vantage/wire';

export const BLOCK = 16;
export const pools: SecurePool[] = [
  { name: 'efficient', namespace: 'dyn-e', component: 'backend' },
  { name: 'capable', namespace: 'dyn-c', component: 'backend' },
];
export const E1 = 0x1111_2222_3333_4444n as WorkerId;
export const C1 = 0xfedc_ba98_7654_3210n as WorkerId;
export const prompt = Uint32Array.from({ length: 40 * BLOCK }, (_, i) => (i * 104729) % 50_000);

/** A service's log destination that keeps every line. */
export interface Sink {
  readonly text: string[];
  write(s: string): void;
}
export const sink = (): Sink => {
  const text: string[] = [];
  return { text, write: (s: string) => void text.push(s) };
};

const schemas = { indexer: indexerConfigSchema, decision: decisionConfigSchema, outcome: outcomeConfigSchema, fleet: fleetConfigSchema } as const;
export type Kind = keyof typeof schemas;
export const KINDS = Object.keys(schemas) as Kind[];

/**
 * Run one service in this process from `env` (no signals, no exit), its log lines into `log`; with
 * `connectOnly` it reads its settings and connects to the brokers but starts nothing.
 */
export async function startService(kind: Kind, env: Record<string, string>, log: Sink, kafka = false, connectOnly = false): Promise<RunningService<never, boolean>> {
  const svc = await runService({
    name: kind,
    schema: schemas[kind] as never,
    kafka,
    env,
    signals: [],
    processHandlers: false,
    exit: () => {},
    logDestination: log,
    async start(ctx) {
      if (connectOnly) return;
      if (kind === 'indexer') await startIndexer(ctx as never);
      else if (kind === 'decision') await startDecision(ctx as never);
      else if (kind === 'outcome') await startOutcome(ctx as never);
      else await startFleet(ctx as never);
    },
  });
  return svc as RunningService<never, boolean>;
}

/** An indexer's own settings for one of the pools. */
export const indexerEnv = (pool: SecurePool): Record<string, string> => ({
  VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: pool.name, blockSize: BLOCK, namespace: pool.namespace, component: pool.component }]),
  VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
});

/** The decision service's own required settings, its parameter set in `paramsFile`. */
export const decisionEnv = (paramsFile: string): Record<string, string> => ({
  VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: 'model-8b',
  VANTAGE_DECISION_POOLS_EFFICIENT_POOL: 'efficient',
  VANTAGE_DECISION_POOLS_EFFICIENT_BLOCK_SIZE: String(BLOCK),
  VANTAGE_DECISION_POOLS_CAPABLE_MODEL: 'model-70b',
  VANTAGE_DECISION_POOLS_CAPABLE_POOL: 'capable',
  VANTAGE_DECISION_POOLS_CAPABLE_BLOCK_SIZE: String(BLOCK),
  VANTAGE_DECISION_POOLS_EFFICIENT_NAMESPACE: 'dyn-e',
  VANTAGE_DECISION_POOLS_CAPABLE_NAMESPACE: 'dyn-c',
  VANTAGE_DECISION_PARAMETER_SET_FILE: paramsFile,
  VANTAGE_DECISION_RELOAD_ON_SIGHUP: 'false',
  VANTAGE_DECISION_OBSERVE_TIMEOUT_MS: '1000',
});

/** The parameter set the decision service runs: the count rule on both models. */
export function writeParameterSet(file: string): void {
  const p = createParameterSet({
    variant: 'count',
    models: { efficient: { ...DEFAULT_PARAMETER_SET.models.efficient, name: 'model-8b' }, capable: { ...DEFAULT_PARAMETER_SET.models.capable, name: 'model-70b' } },
    thresholds: { r: 3, p: null },
    margins: { deltaBlindMs: 200, deltaCacheMs: 200 },
    gate: { maxAgeMs: 1000, destinationLimit: 6, localLimit: 50 },
  });
  if (!p.ok) throw new Error(p.errors.join('; '));
  writeFileSync(file, serializeParameterSet(p.value));
}

/** A gateway for both pools on `nc`. */
export const gatewayOn = (nc: NatsConnection): GatewayClient =>
  new GatewayClient({
    nc,
    routeTimeoutMs: 5000,
    pools: { efficient: { model: 'model-8b', pool: 'efficient', blockSize: BLOCK }, capable: { model: 'model-70b', pool: 'capable', blockSize: BLOCK } },
  });

/** Route the prompt with Stage proposing efficient, then report its first token and completion as a gateway does. */
export async function routeAndComplete(gateway: GatewayClient, requestId: string, sessionId: string): Promise<Awaited<ReturnType<GatewayClient['route']>>> {
  const reply = await gateway.route({ requestId, sessionId, stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } });
  const placement = GatewayClient.placement(reply);
  gateway.firstToken(placement);
  gateway.done(placement, { inputTokens: prompt.length, outputTokens: 20, cachedTokens: 30 * BLOCK });
  await gateway.flush();
  return reply;
}

/** The outcome topic's rows as `replay` reads them back, once they hold `requestId`'s. */
export async function outcomeRows(requestId: string, replay: () => Promise<{ code: number; out: string }>): Promise<Record<string, unknown>[]> {
  let rows: Record<string, unknown>[] = [];
  await eventually(
    'the routed request\'s outcome record, read back through the replay tool',
    async () => {
      const r = await replay();
      rows = r.code === 0 ? r.out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>) : [];
      return rows.some((x) => x['requestId'] === requestId);
    },
    60_000,
    1000,
  );
  return rows;
}

/** A worker's registration on its pool. */
export function registration(pool: string, workerId: WorkerId, model: string): Uint8Array {
  return workerRegistrationCodec.encode({
    kind: 'register',
    pool,
    workerId,
    atMs: Date.now(),
    capacity: { blockSize: BLOCK, totalKvBlocks: 4096, maxNumBatchedTokens: 2048, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: true },
    ttlMs: 60_000,
    endpoint: `http://${pool}-${workerId}.local:8000`,
    model,
  });
}

/** A worker's `stored` KV event for blocks with these local hashes. */
export function kvStored(workerId: WorkerId, eventId: bigint, localHashes: BigUint64Array): Uint8Array {
  const event: KvEvent = {
    workerId,
    dpRank: 0,
    storageTier: 'device',
    eventId,
    data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: localHashes.map((h) => h ^ 0x5555n), tokensHashes: localHashes },
  };
  return encodeEventPlaneMessage({ publisherId: workerId, sequence: eventId, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event });
}

/** The pool's workers as its indexer observes them for a prompt. */
export async function observeWorkers(nc: NatsConnection, pool: string, hashes: BigUint64Array): Promise<ObserveReply['workers']> {
  const m = await nc.request(observeSubject(pool), observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes: hashes, loraName: null }, promptTokens: hashes.length * BLOCK }), { timeout: 3000 });
  const r = observeReplyCodec.decode(m.data);
  if (!r.ok) throw new Error(r.reason);
  return r.value.workers;
}

/** `vantage replay` of a topic from its beginning, in process. */
export async function replayTopic(brokers: string, topic: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CliIo = { stdout: (t) => void (out += t), stderr: (t) => void (err += t), readStdin: () => Promise.resolve(new Uint8Array()), readFile: () => Promise.reject(new Error('no files')) };
  const code = await run(['replay', '--brokers', brokers, '--topic', topic, '--from-beginning'], io);
  return { code, out, err };
}
