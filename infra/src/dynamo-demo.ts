/**
 * `npm start -- --dynamo`: Dynamo 1.6.1's own mocker as both model pools (one mocker process per
 * pool, Dynamo namespaces `efficient` and `capable`, file discovery under .infra/run/dynamo-kv), a
 * small load through Dynamo's own client (agent-like sessions whose prompts grow turn by turn), and
 * every few seconds what our indexers observe of Dynamo's workers, until Ctrl-C.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { observeReplyCodec, observeRequestCodec, observeSubject, type ObserveReply } from '@vantage/protocol';
import { mulberry32 } from '@vantage/random';
import { startDynamoDriver, startMocker, type DynamoDriver, type MockerProcess } from './dynamo';
import { RUN_DIR } from './paths';

export const DYNAMO_KV_DIR = join(RUN_DIR, 'dynamo-kv');

interface DynamoPoolSpec {
  readonly pool: string;
  readonly workers: number;
  readonly dataParallelSize: number;
  readonly speedupRatio: number;
  readonly gpuBlocks: number;
}

const DYNAMO_POOLS: readonly DynamoPoolSpec[] = [
  { pool: 'efficient', workers: 3, dataParallelSize: 1, speedupRatio: 20, gpuBlocks: 256 },
  { pool: 'capable', workers: 1, dataParallelSize: 2, speedupRatio: 8, gpuBlocks: 512 },
];

export interface DynamoFleet {
  stop(): Promise<void>;
}

/** Start the mockers (before the indexers, so the cards are there when they start). */
export async function startDynamoFleet(natsUrl: string, log: (m: string) => void): Promise<DynamoFleet> {
  rmSync(DYNAMO_KV_DIR, { recursive: true, force: true });
  const logDir = join(RUN_DIR, 'dynamo');
  const mockers: MockerProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(mockers.map((m) => m.stop()));
  };
  try {
    for (const p of DYNAMO_POOLS) {
      const t = Date.now();
      const m = await startMocker({
        natsUrl,
        fileKvDir: DYNAMO_KV_DIR,
        endpoint: `${p.pool}.backend.generate`,
        numWorkers: p.workers,
        dataParallelSize: p.dataParallelSize,
        numGpuBlocks: p.gpuBlocks,
        speedupRatio: p.speedupRatio,
        modelName: p.pool,
        logDir,
      });
      mockers.push(m);
      log(`dynamo.mocker for ${p.pool}: ${m.workerIds.length} worker(s) x ${p.dataParallelSize} dp rank(s) in discovery after ${Date.now() - t} ms; log ${m.logFile}`);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { stop };
}

async function observe(nc: NatsConnection, pool: string, tokens: readonly number[]): Promise<ObserveReply> {
  const req = observeRequestCodec.encode({ requestId: null, prompt: { kind: 'token_ids', tokenIds: Uint32Array.from(tokens), loraName: null }, promptTokens: tokens.length, replyEncoding: 'json' });
  const m = await nc.request(observeSubject(pool), req, { timeout: 2_000 });
  const r = observeReplyCodec.decode(m.data);
  if (!r.ok) throw new Error(r.reason);
  return r.value;
}

const secs = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(1)}s`);

/**
 * Run the load and print observations until `stopped()` says so. Resolves when the loops have
 * ended and the drivers are stopped.
 */
export async function runDynamoLoad(natsUrl: string, log: (m: string) => void, stopped: () => boolean): Promise<void> {
  const nc = await connect({ servers: natsUrl });
  const drivers: DynamoDriver[] = [];
  try {
    for (const p of DYNAMO_POOLS) {
      drivers.push(await startDynamoDriver({ natsUrl, fileKvDir: DYNAMO_KV_DIR, endpoint: `${p.pool}.backend.generate`, minWorkers: p.workers, noRouter: true, logDir: join(RUN_DIR, 'dynamo') }));
    }
    const rand = mulberry32(7);
    const tok = (): number => 1 + Math.floor(rand() * 30_000);
    const systems = Array.from({ length: 3 }, () => Array.from({ length: 64 * (4 + Math.floor(rand() * 4)) }, tok));
    const sent = new Map<string, number>();
    const latest = new Map<string, number[]>();
    const session = async (pool: string, d: DynamoDriver): Promise<void> => {
      while (!stopped()) {
        let prompt = [...systems[Math.floor(rand() * systems.length)]!, ...Array.from({ length: 50 + Math.floor(rand() * 100) }, tok)];
        for (let turn = 0; turn < 8 && !stopped(); turn++) {
          try {
            const r = await d.generate(prompt, { maxTokens: 8 });
            sent.set(pool, (sent.get(pool) ?? 0) + 1);
            latest.set(pool, prompt);
            prompt = [...prompt, ...Array.from({ length: r.tokensOut }, tok), ...Array.from({ length: 20 + Math.floor(rand() * 80) }, tok)];
          } catch (e) {
            log(`dynamo client (${pool}): ${(e as Error).message}`);
          }
          await sleep(100 + rand() * 400);
        }
      }
    };
    const loops = DYNAMO_POOLS.flatMap((p, i) => [session(p.pool, drivers[i]!), session(p.pool, drivers[i]!)]);
    const printer = (async () => {
      while (!stopped()) {
        await sleep(3_000);
        if (stopped()) break;
        for (const p of DYNAMO_POOLS) {
          try {
            const o = await observe(nc, p.pool, latest.get(p.pool) ?? [1]);
            const rows = o.workers.map((w) => {
              const fp = w.forwardPass;
              return (
                `  ${w.workerId.toString(16)}:${w.dpRank} blocks ${w.treeBlocks}/${w.totalKvBlocks ?? '?'} overlap ${w.deviceOverlapBlocks} R ${w.R} P ${w.P === null ? '-' : w.P.toFixed(2)}` +
                ` event ${secs(w.ages.indexMs)} load ${secs(w.ages.loadMs)}` +
                (fp ? ` fwd sched ${fp.scheduledRequests}/${fp.scheduledPrefillTokens}t queued ${fp.queuedRequests}/${fp.queuedPrefillTokens}t (${secs(fp.ageMs)})` : ' fwd -')
              );
            });
            log(`[dynamo] ${p.pool}: ${o.workers.length} rank(s), block size ${o.blockSize}, ${sent.get(p.pool) ?? 0} requests sent, choice ${o.dynamoChoice ? `${o.dynamoChoice.workerId.toString(16)}:${o.dynamoChoice.dpRank}` : '-'}\n${rows.join('\n')}`);
          } catch (e) {
            log(`[dynamo] ${p.pool}: observe failed: ${(e as Error).message}`);
          }
        }
      }
    })();
    await Promise.all([...loops, printer]);
  } finally {
    await Promise.all(drivers.map((d) => d.stop()));
    await nc.close();
  }
}
