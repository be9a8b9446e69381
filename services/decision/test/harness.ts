/**
 * Integration harness: real nats-server (testkit), two indexers run in-process
 * through runService, simulated Dynamo workers publishing real-format KV events
 * and registrations, the decision service through runService, and the gateway
 * client. Every subject, pool, namespace and stream is unique per harness.
 */
import { writeFileSync } from 'node:fs';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { GatewayClient } from '@vantage/gateway-client';
import { indexerConfigSchema, startIndexer, type IndexerHandle } from '@vantage/indexer';
import { bookingEventCodec, bookingsSubject, observeReplyCodec, observeRequestCodec, observeSubject, workerRegistrationCodec, workersSubject, type WorkerObservation } from '@vantage/protocol';
import { createParameterSet, DEFAULT_PARAMETER_SET, serializeParameterSet, type FittedParameters, type ParameterSet } from '@vantage/rules';
import { runService, type RunningService } from '@vantage/runtime';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import type { KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';
import { decisionConfigSchema, startDecision, type DecisionHandle, type DecisionSettings } from '../src/index';

export const BLOCK = 16;

/** Where the decision service's pools are held: in-process (`local`, the default) or asked of the indexers (`remote`). */
export type PoolSource = 'local' | 'remote';

/** Both modes, for `describe.each`; `VANTAGE_TEST_POOL_SOURCE` narrows a run to one. */
export const POOL_SOURCES: readonly PoolSource[] = process.env.VANTAGE_TEST_POOL_SOURCE === 'local' || process.env.VANTAGE_TEST_POOL_SOURCE === 'remote' ? [process.env.VANTAGE_TEST_POOL_SOURCE] : ['local', 'remote'];

export interface Sink {
  readonly lines: Record<string, unknown>[];
  write(s: string): void;
}

export function logSink(): Sink {
  const lines: Record<string, unknown>[] = [];
  return {
    lines,
    write(s: string) {
      for (const l of s.split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
    },
  };
}

export function parameterSet(over: Partial<FittedParameters> & { effModel: string; capModel: string }): ParameterSet {
  const { effModel, capModel, ...rest } = over;
  const r = createParameterSet({
    variant: 'count',
    models: { efficient: { ...DEFAULT_PARAMETER_SET.models.efficient, name: effModel }, capable: { ...DEFAULT_PARAMETER_SET.models.capable, name: capModel } },
    thresholds: { r: 3, p: null },
    margins: { deltaBlindMs: 200, deltaCacheMs: 200 },
    gate: { maxAgeMs: 1000, destinationLimit: 6, localLimit: 50 },
    ...rest,
  });
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.value;
}

interface IndexerRun {
  readonly svc: RunningService<never, false>;
  readonly handle: IndexerHandle;
}

async function startIndexerFor(pool: string, ns: string, sink: Sink, snapshotIntervalMs: number): Promise<IndexerRun> {
  let handle: IndexerHandle | undefined;
  const svc = await runService({
    name: 'indexer',
    schema: indexerConfigSchema,
    env: {
      VANTAGE_NATS_URL: natsUrl(),
      VANTAGE_LOG_LEVEL: 'warn',
      VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: pool, blockSize: BLOCK, namespace: ns, component: 'backend' }]),
      VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: String(snapshotIntervalMs),
      VANTAGE_SHUTDOWN_DEADLINE_MS: '3000',
    },
    signals: [],
    processHandlers: false,
    exit: () => {},
    logDestination: sink,
    async start(ctx) {
      handle = await startIndexer(ctx);
    },
  });
  return { svc: svc as unknown as RunningService<never, false>, handle: handle! };
}

export class Harness {
  readonly effPool = uniqueName('eff');
  readonly capPool = uniqueName('cap');
  readonly effModel = 'model-8b';
  readonly capModel = 'model-70b';
  readonly ns = uniqueName('ns');
  readonly routeSubject = `${uniqueName('route')}.route`;
  readonly recordsStream = uniqueName('DEC').replace(/-/g, '_');
  readonly recordsSubject = `${uniqueName('dec')}.decisions`;
  readonly logs = logSink();
  nc!: NatsConnection;
  indexers!: { efficient: IndexerRun; capable: IndexerRun };
  decision!: RunningService<DecisionSettings, false>;
  handle!: DecisionHandle;
  client!: GatewayClient;
  private eventIds = new Map<bigint, bigint>();

  get source(): PoolSource {
    return this.opts.source ?? 'local';
  }

  constructor(
    readonly paramsFile: string,
    private readonly opts: { observeTimeoutMs?: number; inFlightTimeoutMs?: number; source?: PoolSource; decisionEnv?: Record<string, string>; /** Indexers' snapshot interval (0: none); a local pool restores from it. */ indexerSnapshotMs?: number } = {},
  ) {}

  async start(initial: ParameterSet): Promise<void> {
    writeFileSync(this.paramsFile, serializeParameterSet(initial));
    this.nc = await connect({ servers: natsUrl() });
    const [efficient, capable] = await Promise.all([startIndexerFor(this.effPool, `${this.ns}e`, this.logs, this.opts.indexerSnapshotMs ?? 0), startIndexerFor(this.capPool, `${this.ns}c`, this.logs, this.opts.indexerSnapshotMs ?? 0)]);
    this.indexers = { efficient, capable };
    const d = await this.runDecision(this.source, this.routeSubject, this.logs, {
      VANTAGE_DECISION_RECORDS_STREAM: this.recordsStream,
      VANTAGE_DECISION_RECORDS_SUBJECT: this.recordsSubject,
      ...this.opts.decisionEnv,
    });
    this.decision = d.svc;
    this.handle = d.handle;
    this.client = new GatewayClient({
      nc: this.nc,
      routeSubject: this.routeSubject,
      routeTimeoutMs: 5000,
      pools: {
        efficient: { model: this.effModel, pool: this.effPool, blockSize: BLOCK },
        capable: { model: this.capModel, pool: this.capPool, blockSize: BLOCK },
      },
    });
  }

  /** The VANTAGE_* settings of a decision service on this harness's pools (in-process or a child process). */
  decisionEnv(source: PoolSource, subject: string, extra: Record<string, string>): Record<string, string> {
    return {
      VANTAGE_NATS_URL: natsUrl(),
      VANTAGE_LOG_LEVEL: 'info',
      VANTAGE_SHUTDOWN_DEADLINE_MS: '5000',
      VANTAGE_DECISION_SUBJECT: subject,
      VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: this.effModel,
      VANTAGE_DECISION_POOLS_EFFICIENT_POOL: this.effPool,
      VANTAGE_DECISION_POOLS_EFFICIENT_BLOCK_SIZE: String(BLOCK),
      VANTAGE_DECISION_POOLS_CAPABLE_MODEL: this.capModel,
      VANTAGE_DECISION_POOLS_CAPABLE_POOL: this.capPool,
      VANTAGE_DECISION_POOLS_CAPABLE_BLOCK_SIZE: String(BLOCK),
      VANTAGE_DECISION_PARAMETER_SET_FILE: this.paramsFile,
      VANTAGE_DECISION_RELOAD_POLL_MS: '50',
      VANTAGE_DECISION_RELOAD_ON_SIGHUP: 'false',
      VANTAGE_DECISION_OBSERVE_TIMEOUT_MS: String(this.opts.observeTimeoutMs ?? 500),
      VANTAGE_DECISION_IN_FLIGHT_TIMEOUT_MS: String(this.opts.inFlightTimeoutMs ?? 60_000),
      VANTAGE_DECISION_POOLS_EFFICIENT_SOURCE: source,
      VANTAGE_DECISION_POOLS_EFFICIENT_NAMESPACE: `${this.ns}e`,
      VANTAGE_DECISION_POOLS_CAPABLE_SOURCE: source,
      VANTAGE_DECISION_POOLS_CAPABLE_NAMESPACE: `${this.ns}c`,
      ...extra,
    };
  }

  /** A decision service on this harness's pools and parameter file (own route subject), in-process. */
  async runDecision(source: PoolSource, subject: string, sink: Sink, extra: Record<string, string>): Promise<{ svc: RunningService<DecisionSettings, false>; handle: DecisionHandle }> {
    let handle: DecisionHandle | undefined;
    const svc = await runService<DecisionSettings, false>({
      name: 'decision',
      schema: decisionConfigSchema,
      env: this.decisionEnv(source, subject, extra),
      signals: [],
      processHandlers: false,
      exit: () => {},
      logDestination: sink,
      start: async (ctx) => {
        handle = await startDecision(ctx);
      },
    });
    return { svc, handle: handle! };
  }

  /** A gateway client of a decision service on `subject`. */
  clientFor(subject: string): GatewayClient {
    return new GatewayClient({
      nc: this.nc,
      routeSubject: subject,
      routeTimeoutMs: 5000,
      pools: {
        efficient: { model: this.effModel, pool: this.effPool, blockSize: BLOCK },
        capable: { model: this.capModel, pool: this.capPool, blockSize: BLOCK },
      },
    });
  }

  async stop(): Promise<void> {
    await this.decision?.stop('test done');
    await this.indexers?.efficient.svc.stop('test done');
    await this.indexers?.capable.svc.stop('test done');
    await this.nc?.close();
  }

  poolOf(role: 'efficient' | 'capable'): string {
    return role === 'efficient' ? this.effPool : this.capPool;
  }

  /** A simulated Dynamo worker announces itself (capacity, endpoint). */
  register(role: 'efficient' | 'capable', workerId: WorkerId, over: { schedulable?: boolean; maxNumBatchedTokens?: number } = {}): void {
    const pool = this.poolOf(role);
    this.nc.publish(
      workersSubject(pool),
      workerRegistrationCodec.encode({
        kind: 'register',
        pool,
        workerId,
        atMs: Date.now(),
        capacity: { blockSize: BLOCK, totalKvBlocks: 4096, maxNumBatchedTokens: over.maxNumBatchedTokens ?? 2048, maxNumSeqs: 64, dpStartRank: 0, dpSize: 1, schedulable: over.schedulable ?? true },
        ttlMs: 60_000,
        endpoint: `http://${role}-${workerId}.local:8000`,
        model: role === 'efficient' ? this.effModel : this.capModel,
      }),
    );
  }

  /** The worker stores a prompt's blocks in its KV cache (Dynamo's event-plane `stored`). */
  store(role: 'efficient' | 'capable', workerId: WorkerId, localHashes: BigUint64Array): void {
    const id = (this.eventIds.get(workerId) ?? 0n) + 1n;
    this.eventIds.set(workerId, id);
    const event: KvEvent = {
      workerId,
      dpRank: 0,
      storageTier: 'device',
      eventId: id,
      data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: localHashes.map((h) => h ^ 0x5555n), tokensHashes: localHashes },
    };
    const ns = `${this.ns}${role === 'efficient' ? 'e' : 'c'}`;
    this.nc.publish(kvEventsSubject(ns, 'backend'), encodeEventPlaneMessage({ publisherId: workerId, sequence: id, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event }));
  }

  /**
   * Any KV event of a worker (event plane). `skip` event ids are lost first (a gap); `repeat` publishes
   * the worker's last id again (a duplicate) instead of the next.
   */
  kv(role: 'efficient' | 'capable', workerId: WorkerId, data: KvEvent['data'], o: { skip?: number; repeat?: boolean } = {}): void {
    const last = this.eventIds.get(workerId) ?? 0n;
    const id = o.repeat === true && last > 0n ? last : last + 1n + BigInt(o.skip ?? 0);
    this.eventIds.set(workerId, id);
    const event: KvEvent = { workerId, dpRank: 0, storageTier: 'device', eventId: id, data };
    const ns = `${this.ns}${role === 'efficient' ? 'e' : 'c'}`;
    this.nc.publish(kvEventsSubject(ns, 'backend'), encodeEventPlaneMessage({ publisherId: workerId, sequence: id, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event }));
  }

  /** A worker leaves (deregistration). */
  deregister(role: 'efficient' | 'capable', workerId: WorkerId): void {
    const pool = this.poolOf(role);
    this.nc.publish(workersSubject(pool), workerRegistrationCodec.encode({ kind: 'deregister', pool, workerId, atMs: Date.now() }));
  }

  /** Competing traffic booked through the same accounting path. */
  book(role: 'efficient' | 'capable', workerId: WorkerId, requestId: string, promptTokens = 256): void {
    const pool = this.poolOf(role);
    this.nc.publish(
      bookingsSubject(pool),
      bookingEventCodec.encode({ requestId, sessionId: 'bg', pool, workerId, dpRank: 0, promptTokens, overlapBlocks: 0, sequenceHashes: null, localHashes: null, expectedOutputTokens: null, prefillTokens: null, atMs: Date.now() }),
    );
  }

  /**
   * One registered worker per pool, the efficient one holding the first `held` blocks of the prompt
   * (`localHashes`, as hashed for the efficient pool), once both indexers show it.
   */
  async seedWorkers(efficient: WorkerId, capable: WorkerId, localHashes: BigUint64Array, held: number): Promise<void> {
    this.register('efficient', efficient);
    this.register('capable', capable);
    this.store('efficient', efficient, localHashes.subarray(0, held));
    await eventually('both indexers know their worker', async () => {
      const e = await this.observeWorker('efficient', efficient, localHashes);
      const c = await this.observeWorker('capable', capable, localHashes);
      return e?.K === held * BLOCK && c !== undefined && c.schedulable;
    });
    if (this.source === 'local') {
      await eventually('the decision service\'s local pools know their worker', () => {
        const e = this.localWorker('efficient', efficient, localHashes);
        const c = this.localWorker('capable', capable, localHashes);
        return e?.K === held * BLOCK && c !== undefined && c.schedulable;
      });
    }
  }

  /** A worker's facts in the decision service's own state of a local pool (undefined: not held there). */
  localWorker(role: 'efficient' | 'capable', workerId: WorkerId, localHashes: BigUint64Array): { K: number; R: number; P: number | null; schedulable: boolean } | undefined {
    const p = this.handle.pools.get(role);
    if (p === undefined || !p.readiness().ready) return undefined;
    const o = p.state.observe(localHashes, localHashes.length * BLOCK, Date.now());
    const w = o.workers.find((x) => x.workerId === workerId);
    if (w === undefined) return undefined;
    return { K: w.match?.deviceTokens ?? 0, R: w.load.requests, P: w.load.prefillPressure, schedulable: w.schedulable === true };
  }

  /** R of a worker wherever the decision service reads it: its local pool, else the indexer. */
  async bookedR(role: 'efficient' | 'capable', workerId: WorkerId, localHashes: BigUint64Array): Promise<number | undefined> {
    if (this.source === 'local') return this.localWorker(role, workerId, localHashes)?.R;
    return (await this.observeWorker(role, workerId, localHashes))?.R;
  }

  /** Ask an indexer directly (as the decision service does) for one worker's facts. */
  async observeWorker(role: 'efficient' | 'capable', workerId: WorkerId, localHashes: BigUint64Array): Promise<WorkerObservation | undefined> {
    const m = await this.nc.request(observeSubject(this.poolOf(role)), observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes, loraName: null }, promptTokens: localHashes.length * BLOCK }), { timeout: 2000 });
    const r = observeReplyCodec.decode(m.data);
    if (!r.ok) throw new Error(r.reason);
    return r.value.workers.find((w) => w.workerId === workerId);
  }

  logged(msg: string): Record<string, unknown>[] {
    return this.logs.lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).includes(msg));
  }
}

export function tokens(n: number, seed: number): Uint32Array {
  const t = new Uint32Array(n);
  for (let i = 0; i < n; i++) t[i] = (seed * 7919 + i * 104729) % 50_000;
  return t;
}
