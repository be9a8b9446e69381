/**
 * What a gateway does on NATS, for the load generator and the calibration harness: ask a pool's
 * indexer (`observe`), book a request on a worker (the bookings subject Dynamo's router uses), route
 * through the decision service, and send a request to a fleet worker and follow it to its end,
 * publishing its lifecycle events.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { createInbox, type NatsConnection } from '@nats-io/transport-node';
import {
  bookingEventCodec,
  bookingsSubject,
  lifecycleEventCodec,
  lifecycleSubject,
  observeReplyCodec,
  observeRequestCodec,
  observeSubject,
  type BookingEvent,
  type LifecycleEvent,
  type ModelRole,
  type ObserveReply,
  type RouteReply,
} from '@vantage/protocol';
import { GatewayClient, type CandidatePrompt, type PoolSpec } from '@vantage/gateway-client';
import { request } from '@vantage/runtime';
import type { PromptBlocks } from '@vantage/sim';
import type { WorkerId } from '@vantage/types';
import { decodeProgress, encodeGenerateRequest, generateSubject, type GenerateRequest } from './generate';

export interface LoadgenPool {
  /** Pool name (indexer pool, fleet pool). */
  readonly name: string;
  readonly blockSize: number;
  /** Served model name put in route candidates. */
  readonly model: string;
}

/** A prompt's blocks at a pool's block size, computed once per block size. */
export function perBlockSize(make: (blockSize: number) => PromptBlocks): (pool: LoadgenPool) => PromptBlocks {
  const cache = new Map<number, PromptBlocks>();
  return (pool) => {
    let b = cache.get(pool.blockSize);
    if (!b) cache.set(pool.blockSize, (b = make(pool.blockSize)));
    return b;
  };
}

/** Background requests' events say so and carry the arrival time (they have no decision record to time them from). */
type BackgroundMark = { readonly background?: true; readonly arrivalMs?: number };

const NO_PROMPT = { requestId: null, localHashes: new BigUint64Array(0), promptTokens: 1 } as const;

/** The pool's observe answer for a prompt (by local block hashes; default none: just the workers); an error reply throws. */
export async function observePool(
  nc: NatsConnection,
  pool: string,
  timeoutMs: number,
  q: { readonly requestId: string | null; readonly localHashes: BigUint64Array; readonly promptTokens: number } = NO_PROMPT,
): Promise<ObserveReply> {
  const m = await request(nc, observeSubject(pool), observeRequestCodec.encode({ requestId: q.requestId, prompt: { kind: 'local_hashes', localHashes: q.localHashes, loraName: null }, promptTokens: q.promptTokens }), {
    timeoutMs,
  });
  const r = observeReplyCodec.decode(m.data);
  if (!r.ok) throw new Error(`observe ${pool}: ${r.reason}`);
  return r.value;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  signal?.aborted === true || ms <= 0 ? Promise.resolve() : delay(ms, undefined, signal ? { signal } : {}).catch(() => {});

/**
 * Polls `observe` on `pools` every `everyMs` until `ok` holds for all of them in one round, `waitMs`
 * has passed or `signal` aborts. Resolves with the names of the pools it did not hold for (a pool
 * that does not answer counts as not holding).
 */
export async function waitForPools(
  nc: NatsConnection,
  pools: readonly LoadgenPool[],
  ok: (pool: LoadgenPool, r: ObserveReply) => boolean,
  o: { readonly waitMs: number; readonly everyMs: number; readonly timeoutMs: number; readonly signal?: AbortSignal },
): Promise<string[]> {
  const until = performance.now() + o.waitMs;
  for (;;) {
    const failing: string[] = [];
    for (const p of pools) {
      try {
        if (!ok(p, await observePool(nc, p.name, o.timeoutMs))) failing.push(p.name);
      } catch {
        failing.push(p.name);
      }
    }
    if (failing.length === 0 || performance.now() > until || o.signal?.aborted === true) return failing;
    await sleep(o.everyMs, o.signal);
  }
}

/** Book a request on a worker as Dynamo's router does, so the pool's indexers count it. */
export function publishBooking(nc: NatsConnection, pool: string, b: Omit<BookingEvent, 'pool' | 'localHashes' | 'prefillTokens' | 'atMs'>): void {
  nc.publish(bookingsSubject(pool), bookingEventCodec.encode({ ...b, pool, localHashes: null, prefillTokens: null, atMs: Date.now() }));
}

/** Ask the decision service where a request goes, both pools as candidates (`@vantage/gateway-client`); rejects with its RouteError. */
export function routeRequest(
  nc: NatsConnection,
  subject: string,
  q: {
    readonly requestId: string;
    readonly sessionId: string;
    readonly stageProposal: ModelRole;
    readonly pools: { readonly efficient: LoadgenPool; readonly capable: LoadgenPool };
    /** The prompt's local block hashes at a pool's block size. */
    readonly localHashes: (pool: LoadgenPool) => BigUint64Array;
    readonly promptTokens: number;
  },
  timeoutMs: number,
): Promise<RouteReply> {
  const { efficient, capable } = q.pools;
  const spec = (p: LoadgenPool): PoolSpec => ({ model: p.model, pool: p.name, blockSize: p.blockSize });
  const prompt = (p: LoadgenPool): CandidatePrompt => ({ localHashes: q.localHashes(p), promptTokens: q.promptTokens });
  const client = new GatewayClient({ nc, pools: { efficient: spec(efficient), capable: spec(capable) }, routeTimeoutMs: timeoutMs, routeSubject: subject });
  return client.route({ requestId: q.requestId, sessionId: q.sessionId, stageProposal: q.stageProposal, prompts: { efficient: prompt(efficient), capable: prompt(capable) } });
}

/** The engine's and the client's measures of a request that did not complete. */
export const NOT_SERVED = { ttftMs: null, e2eMs: null, reusedTokens: null, outputTokens: null, wallTtftMs: null, wallE2eMs: null } as const;

/** How a followed request ended: the engine's measures (sim ms) and the client's (wall ms from `t0`). */
export interface Served {
  readonly status: 'done' | 'failed' | 'cancelled';
  /** The worker's failure code, the client's `request_timeout` / `run_deadline`, or (load generator) the route's or `no_route`. */
  readonly error: string | null;
  /** Human-readable cause of `error`. */
  readonly detail: string | null;
  /** Arrival at the worker to first / last token. */
  readonly ttftMs: number | null;
  readonly e2eMs: number | null;
  readonly reusedTokens: number | null;
  readonly outputTokens: number | null;
  readonly wallTtftMs: number | null;
  readonly wallE2eMs: number | null;
}

/**
 * Send `req` to a worker of `pool` and follow its progress until done, failed, `timeoutMs` or `signal`
 * (the run's deadline), publishing its lifecycle events on the pool's subject as a gateway does.
 * Wall times count from `t0` (default: now).
 */
export function followRequest(
  nc: NatsConnection,
  pool: string,
  workerId: WorkerId,
  req: GenerateRequest & { readonly sessionId: string },
  o: { readonly timeoutMs: number; readonly signal?: AbortSignal; readonly mark?: BackgroundMark; readonly t0?: number; readonly onFirstToken?: () => void },
): Promise<Served> {
  const t0 = o.t0 ?? performance.now();
  return new Promise((resolve) => {
    const inbox = createInbox();
    const report = (kind: LifecycleEvent['kind'], usage: LifecycleEvent['usage'], error: LifecycleEvent['error']): void =>
      nc.publish(lifecycleSubject(pool), lifecycleEventCodec.encode({ requestId: req.requestId, sessionId: req.sessionId, pool, kind, atMs: Date.now(), workerId, dpRank: 0, usage, error, ...o.mark }));
    let finished = false;
    let wallTtftMs: number | null = null;
    const finish = (r: Served): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
      sub.unsubscribe();
      resolve(r);
    };
    const cancel = (code: 'request_timeout' | 'run_deadline'): void => {
      report('cancelled', null, { code, message: null });
      finish({ ...NOT_SERVED, wallTtftMs, status: 'cancelled', error: code, detail: null });
    };
    const onAbort = (): void => cancel('run_deadline');
    const timer = setTimeout(() => cancel('request_timeout'), o.timeoutMs);
    o.signal?.addEventListener('abort', onAbort, { once: true });
    const sub = nc.subscribe(inbox, {
      callback: (err, m) => {
        if (err) return;
        const p = decodeProgress(m.data);
        if (p === null) return;
        if (p.kind === 'first_token') {
          report('first_token', null, null);
          wallTtftMs = performance.now() - t0;
          o.onFirstToken?.();
        } else if (p.kind === 'done') {
          const usage = { inputTokens: p.isl, outputTokens: p.outputTokens, cachedTokens: p.reusedTokens };
          report('done', usage, null);
          report('usage', usage, null);
          const engine = { ttftMs: p.firstTokenMs - p.arrivalMs, e2eMs: p.atMs - p.arrivalMs, reusedTokens: p.reusedTokens, outputTokens: p.outputTokens };
          finish({ status: 'done', error: null, detail: null, ...engine, wallTtftMs, wallE2eMs: performance.now() - t0 });
        } else if (p.kind === 'failed') {
          report('failed', null, { code: p.code, message: p.reason.slice(0, 500) });
          finish({ ...NOT_SERVED, status: 'failed', error: p.code, detail: p.reason });
        }
      },
    });
    nc.publish(generateSubject(pool, workerId), encodeGenerateRequest(req), { reply: inbox });
  });
}
