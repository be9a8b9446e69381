/**
 * Dynamo 1.6.1's own processes for integration tests and `npm start -- --dynamo` (infra/README.md,
 * `dynamo.ts`): its mocker and the testkit's driver (JSON lines, u64s as decimal strings).
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { etcdDiscoveryStore, fileDiscoveryStore, parseDiscoveryEntry } from '@vantage/discovery';
import { endAtExit, freePort, spawnLogged, untilReady, type LoggedProcess } from './exec';
import { INFRA_DIR, REPO_ROOT } from './paths';

let pythonPath: string | undefined;

/** The Dynamo 1.6.1 interpreter, installed on first use by the project's own script. */
function dynamoPython(): string {
  if (pythonPath !== undefined) return pythonPath;
  const script = join(REPO_ROOT, 'packages', 'testkit', 'scripts', 'ensure-dynamo-py.sh');
  const out = execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = out.trim().split('\n');
  pythonPath = lines[lines.length - 1]!.trim();
  return pythonPath;
}

const DYNAMO_DRIVER = join(REPO_ROOT, 'packages', 'testkit', 'python', 'dynamo_driver.py');

/**
 * Dynamo's discovery in etcd (`DYN_DISCOVERY_BACKEND=etcd`): `endpoints` as Dynamo's
 * `ETCD_ENDPOINTS` (comma-separated client URLs); `leaseTtlS` sets `ETCD_LEASE_TTL` (Dynamo's
 * default 30 s), how long a killed worker's keys outlive it.
 */
interface EtcdDiscoveryTarget {
  readonly endpoints: string;
  readonly leaseTtlS?: number;
}

/**
 * Dynamo's environment for the NATS event plane, the TCP request plane and discovery: the file
 * backend in `fileKvDir`, or etcd when `etcd` is given.
 */
async function dynamoEnv(natsUrl: string, fileKvDir: string | undefined, etcd?: EtcdDiscoveryTarget): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // A system port set by the caller's shell would make several workers in one process collide.
  for (const k of ['DYN_SYSTEM_PORT', 'DYN_FILE_KV', 'ETCD_ENDPOINTS', 'ETCD_LEASE_TTL']) delete env[k];
  if (etcd === undefined && fileKvDir === undefined) throw new Error('dynamoEnv: a file discovery directory or an etcd target is needed');
  const discovery: NodeJS.ProcessEnv =
    etcd === undefined
      ? { DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: fileKvDir }
      : { DYN_DISCOVERY_BACKEND: 'etcd', ETCD_ENDPOINTS: etcd.endpoints, ...(etcd.leaseTtlS !== undefined ? { ETCD_LEASE_TTL: String(etcd.leaseTtlS) } : {}) };
  return {
    ...env,
    ...discovery,
    DYN_EVENT_PLANE: 'nats',
    NATS_SERVER: natsUrl,
    DYN_REQUEST_PLANE: 'tcp',
    DYN_TCP_RPC_HOST: '127.0.0.1',
    DYN_TCP_RPC_PORT: String(await freePort()),
    DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1',
    DYN_TCP_RESPONSE_STREAM_PORT: String(await freePort()),
    PYTHONUNBUFFERED: '1',
  };
}

/** Instance ids (exact) of an endpoint's model cards (`ns.comp.ep`) in the discovery store of the workers. */
async function instanceIds(o: Pick<DynamoPlacement, 'fileKvDir' | 'etcd'>, endpointPath: string): Promise<bigint[]> {
  const store = o.etcd !== undefined ? etcdDiscoveryStore({ endpoints: o.etcd.endpoints.split(',') }) : fileDiscoveryStore(o.fileKvDir ?? '');
  const ids: bigint[] = [];
  try {
    await store.watch(`v1/mdc/${endpointPath.replaceAll('.', '/')}/`, (changes) => {
      for (const c of changes) {
        const r = c.kind === 'put' ? parseDiscoveryEntry(c.key, c.value) : undefined;
        if (r?.ok && r.value.kind === 'model_card') ids.push(r.value.instanceId);
      }
    });
  } finally {
    await store.close();
  }
  return ids;
}

/** Where a Dynamo process finds the others: NATS, discovery, its endpoint; and where its log goes. */
interface DynamoPlacement {
  readonly natsUrl: string;
  /** The `DYN_FILE_KV` directory shared by the workers, the indexer and the driver (file discovery). */
  readonly fileKvDir?: string;
  /** Discovery in etcd instead of files (the driver's as the workers were started). */
  readonly etcd?: EtcdDiscoveryTarget;
  /** `namespace.component.endpoint`. */
  readonly endpoint: string;
  readonly blockSize?: number;
  /** Where its log goes; a fresh directory under .infra/test by default. */
  readonly logDir?: string;
}

interface MockerOptions extends DynamoPlacement {
  readonly numWorkers: number;
  /** GPU blocks per dp rank (small: eviction all the time). */
  readonly numGpuBlocks: number;
  readonly speedupRatio: number;
  readonly dataParallelSize?: number;
  readonly maxNumBatchedTokens?: number;
  readonly modelName?: string;
}

/** A Dynamo process: `stop()` is graceful (SIGTERM to the group: discovery entries removed), `kill9()` a crash (entries stay behind in the file backend). */
export type DynamoProcess = LoggedProcess;

export interface MockerProcess extends DynamoProcess {
  /** Instance ids of the workers this process started, exact. */
  readonly workerIds: readonly bigint[];
}

/**
 * Run the Dynamo interpreter with `args` in its own process group (killed with this Node process),
 * output to `<logDir>/<logName>` (a fresh folder under .infra/test unless `logDir` is given); `pipe`
 * keeps stdin and stdout for a JSON-lines child (`lineRpc`).
 */
export function spawnDynamoPython(
  args: string[],
  o: { readonly env?: NodeJS.ProcessEnv; readonly logDir?: string | undefined; readonly logName: string; readonly stdio: 'log' | 'pipe' },
): { child: ChildProcess; proc: DynamoProcess } {
  const logDir = o.logDir ?? join(INFRA_DIR, 'test', `dynamo-${process.pid}-${Date.now()}`);
  mkdirSync(logDir, { recursive: true });
  const env = o.env ?? { ...process.env, PYTHONUNBUFFERED: '1' };
  const spawned = spawnLogged(dynamoPython(), args, { env, logFile: join(logDir, o.logName), stdio: o.stdio, group: true });
  endAtExit(spawned.proc.pid, true);
  return spawned;
}

type Reply = Record<string, unknown>;

/**
 * Speak JSON lines with `child` (spawned with stdio `pipe`), the protocol of the testkit's Python children: one
 * command a line in, one reply a line out. Resolves at its ready line, kills it if none comes in `readyTimeoutMs`.
 */
export async function lineRpc(child: ChildProcess, proc: DynamoProcess, name: string, readyTimeoutMs: number) {
  const pending = new Map<number, { resolve: (v: Reply) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let hello: Reply | undefined;
  let failed: Error | null = null;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let msg: Reply;
    try {
      msg = JSON.parse(line) as Reply;
    } catch {
      return; // not ours (a library printing to stdout)
    }
    if (msg.ready === true && hello === undefined) {
      hello = msg;
      return;
    }
    const id = typeof msg.id === 'number' ? msg.id : -1;
    const p = pending.get(id);
    if (!p) return;
    pending.delete(id);
    if (msg.ok === true) p.resolve(msg);
    else p.reject(new Error(`${name}: ${String(msg.error)}`));
  });
  void proc.exited.then((code) => {
    failed = new Error(`${name} exited (${code}); see ${proc.logFile}`);
    for (const p of pending.values()) p.reject(failed);
    pending.clear();
  });
  await untilReady(proc, name, () => Promise.resolve(hello !== undefined), readyTimeoutMs);
  return {
    /** The child's `{"ready": true, ...}` line. */
    hello: hello!,
    /** Send `cmd` with a fresh `id`; resolves with the reply of that id when it has `ok: true`. */
    call: (cmd: Reply): Promise<Reply> => {
      if (failed) return Promise.reject(failed);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.stdin!.write(`${JSON.stringify({ ...cmd, id })}\n`);
      });
    },
    /** `{"op":"quit"}`, then the group's `stop(graceMs)` if the child is still up after `quitWaitMs`. */
    stop: async (graceMs: number, quitWaitMs: number): Promise<void> => {
      try {
        child.stdin!.write('{"op":"quit"}\n');
      } catch {
        /* closed */
      }
      const t = setTimeout(() => void proc.stop(graceMs), quitWaitMs);
      await proc.exited;
      clearTimeout(t);
    },
  };
}

/** Start `python -m dynamo.mocker`; resolves once its workers' model cards are in discovery. */
export async function startMocker(o: MockerOptions): Promise<MockerProcess> {
  if (o.etcd === undefined && o.fileKvDir !== undefined) mkdirSync(o.fileKvDir, { recursive: true });
  const listIds = (): Promise<bigint[]> => instanceIds(o, o.endpoint);
  const before = new Set(await listIds());
  const flags: [string, string | number | undefined][] = [
    ['--endpoint', `dyn://${o.endpoint}`],
    ['--model-name', o.modelName ?? 'mock'],
    ['--num-workers', o.numWorkers],
    ['--block-size', o.blockSize ?? 64],
    ['--num-gpu-blocks-override', o.numGpuBlocks],
    ['--speedup-ratio', o.speedupRatio],
    ['--data-parallel-size', o.dataParallelSize],
    ['--max-num-batched-tokens', o.maxNumBatchedTokens],
  ];
  const args = ['-m', 'dynamo.mocker', ...flags.flatMap(([f, v]) => (v === undefined ? [] : [f, String(v)]))];
  const env = await dynamoEnv(o.natsUrl, o.fileKvDir, o.etcd);
  const { proc } = spawnDynamoPython(args, { env, logDir: o.logDir, logName: `mocker-${o.endpoint}-${Date.now()}.log`, stdio: 'log' });
  let ids: bigint[] = [];
  await untilReady(
    proc,
    `dynamo.mocker's ${o.numWorkers} workers in discovery`,
    async () => (ids = (await listIds()).filter((id) => !before.has(id))).length >= o.numWorkers,
    90_000,
  );
  return { ...proc, workerIds: ids.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) };
}

export type DynamoDriver = Awaited<ReturnType<typeof startDynamoDriver>>;

interface DriverOptions extends DynamoPlacement {
  readonly minWorkers: number;
  /** Do not start a KvRouter (no overlap queries). */
  readonly noRouter?: boolean;
  /** The KvRouter publishes its bookings to other routers (`router_replica_sync`): indexers see them as Dynamo's load. */
  readonly routerReplicaSync?: boolean;
}

/** Start the Dynamo-side driver; resolves when its client sees `minWorkers` instances. */
export async function startDynamoDriver(o: DriverOptions) {
  const args = [DYNAMO_DRIVER, '--endpoint', o.endpoint, '--block-size', String(o.blockSize ?? 64), '--min-workers', String(o.minWorkers)];
  if (o.noRouter) args.push('--no-router');
  if (o.routerReplicaSync) args.push('--router-replica-sync');
  const env = await dynamoEnv(o.natsUrl, o.fileKvDir, o.etcd);
  const { child, proc } = spawnDynamoPython(args, { env, logDir: o.logDir, logName: `driver-${Date.now()}.log`, stdio: 'pipe' });
  const { call, stop } = await lineRpc(child, proc, 'dynamo driver', 90_000);
  return {
    ...proc,
    stop: (graceMs = 5_000) => stop(graceMs, 3_000),
    /** One request through `client.direct` (a worker given) or `client.generate` (round robin). */
    generate: async (tokens: readonly number[], opts: { maxTokens?: number; worker?: bigint } = {}) => {
      const r = await call({
        op: 'generate',
        tokens,
        max_tokens: opts.maxTokens ?? 2,
        worker: opts.worker === undefined ? null : String(opts.worker),
      });
      return { tokensOut: Number(r.tokens_out), cachedTokens: r.cached_tokens === null ? null : Number(r.cached_tokens) };
    },
    /** `KvRouter.best_worker(tokens, request_id)`: the worker Dynamo picks, ids exact; with a request id it also books it there. */
    bestWorker: async (tokens: readonly number[], requestId?: string) => {
      const r = await call({ op: 'best_worker', tokens, request_id: requestId ?? null });
      return { workerId: BigInt(r.worker_id as string), dpRank: Number(r.dp_rank), overlapBlocks: Number(r.overlap_blocks) };
    },
    /** `KvRouter.free(request_id)`. */
    free: (requestId: string) => call({ op: 'free', request_id: requestId }).then(() => {}),
    /** `KvRouter.mark_prefill_complete(request_id)`. */
    prefillComplete: (requestId: string) => call({ op: 'prefill_complete', request_id: requestId }).then(() => {}),
    /** `KvRouter.get_potential_loads(tokens)`, per (worker, dp rank). */
    potentialLoads: async (tokens: readonly number[]) => {
      const r = await call({ op: 'potential_loads', tokens });
      return (r.loads as Record<string, string | number>[]).map((l) => ({
        workerId: BigInt(l.worker_id as string),
        dpRank: Number(l.dp_rank),
        potentialPrefillTokens: Number(l.potential_prefill_tokens),
        potentialDecodeBlocks: Number(l.potential_decode_blocks),
        activeRequests: Number(l.active_requests),
      }));
    },
    /** `KvRouter.get_overlap_scores(tokens)`: device blocks per (worker, dp rank). */
    overlap: async (tokens: readonly number[]) => {
      const r = await call({ op: 'overlap', tokens });
      const rows = r.workers as { worker_id: string; dp_rank: number; device_blocks: number }[];
      return { blockSize: Number(r.block_size), workers: rows.map((w) => ({ workerId: BigInt(w.worker_id), dpRank: w.dp_rank, deviceBlocks: w.device_blocks })) };
    },
    instances: async () => ((await call({ op: 'instances' })).workers as string[]).map((w) => BigInt(w)),
  };
}
