/**
 * The processes of the benchmark's Dynamo peer, from the virtualenv `@vantage/infra`'s Dynamo
 * helpers install and run (own process group, killed with this process, logs under `.infra/test`):
 * Dynamo's runtime-free selection service and the ZMQ publisher that feeds it vLLM-format KV events.
 */
import { join } from 'node:path';
import { freePort, httpOk, lineRpc, REPO_ROOT, spawnDynamoPython, untilReady, type DynamoProcess } from '@vantage/infra';

export interface SelectServiceProcess extends DynamoProcess {
  /** `http://127.0.0.1:<port>`: its HTTP API (`/health`, `/workers`, `/select`, `/overlap_scores`, ...). */
  readonly url: string;
  readonly port: number;
}

/**
 * Start Dynamo's runtime-free selection service (`python -m dynamo.select_service --port P`) on a free
 * port; resolves once `GET /health` answers. It needs no NATS or discovery: workers are registered over
 * HTTP (`POST /workers`), each naming the ZMQ endpoint where it publishes vLLM-format KV events
 * (`kv_events_endpoint`), which the service subscribes to (`startZmqKvPublisher`). `threads`: KV indexer
 * threads (`--threads`), the service's default (4) when absent.
 */
export async function startSelectService(o: { readonly threads?: number } = {}): Promise<SelectServiceProcess> {
  const port = await freePort();
  const args = ['-m', 'dynamo.select_service', '--port', String(port)];
  if (o.threads !== undefined) args.push('--threads', String(o.threads));
  const { proc } = spawnDynamoPython(args, { logName: `select-service-${port}.log`, stdio: 'log' });
  const url = `http://127.0.0.1:${port}`;
  await untilReady(proc, 'dynamo.select_service answering /health', () => httpOk(`${url}/health`), 60_000);
  return { ...proc, url, port };
}

/** One KV event as vLLM publishes it: stored blocks carry their tokens (the service hashes them itself). */
type VllmKvEvent =
  | { readonly kind: 'stored'; readonly blockHashes: BigUint64Array; readonly parentHash: bigint | null; readonly tokenIds: Uint32Array; readonly blockSize: number }
  | { readonly kind: 'removed'; readonly blockHashes: BigUint64Array }
  | { readonly kind: 'cleared' };

export interface ZmqKvPublisher extends DynamoProcess {
  /** One `tcp://127.0.0.1:<port>` per worker, in order: what each worker registers as `kv_events_endpoint`. */
  readonly endpoints: readonly string[];
  /** Resolves with how many endpoints have a subscriber (all of them, unless the timeout passed first). */
  waitSubscribed(timeoutMs: number): Promise<number>;
  /** Publish one batch on worker `worker`'s endpoint, with ZMQ sequence `seq` (a worker's first batch is 0). */
  publish(worker: number, seq: bigint, events: readonly VllmKvEvent[], dpRank?: number): Promise<void>;
}

const ZMQ_KV_PUBLISHER = join(REPO_ROOT, 'packages', 'testkit', 'python', 'zmq_kv_publisher.py');

const b64 = (a: BigUint64Array | Uint32Array): string => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');

/**
 * Start `python/zmq_kv_publisher.py` (pyzmq from the Dynamo virtualenv): `workers` XPUB sockets on free
 * 127.0.0.1 ports that publish vLLM's KV event batches ([topic, seq u64 BE, msgpack [ts, events, dp_rank]]),
 * the format Dynamo's ZMQ listener decodes. Block hashes cross to it as little-endian u64 bytes (exact).
 */
export async function startZmqKvPublisher(o: { readonly workers: number }): Promise<ZmqKvPublisher> {
  const { child, proc } = spawnDynamoPython([ZMQ_KV_PUBLISHER, '--workers', String(o.workers)], { logName: `zmq-kv-publisher-${Date.now()}.log`, stdio: 'pipe' });
  const { hello, call, stop } = await lineRpc(child, proc, 'zmq publisher', 60_000);
  return {
    ...proc,
    stop: (graceMs = 3_000) => stop(graceMs, 2_000),
    endpoints: hello.endpoints as string[],
    waitSubscribed: async (ms) => Number((await call({ op: 'wait_subscribed', timeout_ms: ms })).subscribed),
    publish: async (worker, seq, events, dpRank = 0) => {
      await call({
        op: 'publish',
        worker,
        seq: seq.toString(),
        dp_rank: dpRank,
        events: events.map((e) =>
          e.kind === 'stored'
            ? { kind: 'stored', block_hashes_b64: b64(e.blockHashes), parent_hash: e.parentHash === null ? null : e.parentHash.toString(), tokens_b64: b64(e.tokenIds), block_size: e.blockSize }
            : e.kind === 'removed'
              ? { kind: 'removed', block_hashes_b64: b64(e.blockHashes) }
              : { kind: 'cleared' },
        ),
      });
    },
  };
}
