/**
 * The gateway's side of vantage: hash each candidate's prompt at its pool's block size, ask
 * `vantage.v1.route`, report the lifecycle on the chosen pool. `RouteError` kinds: package README.
 */
import { localBlockHashes } from '@vantage/hashing';
import {
  lifecycleEventCodec,
  lifecycleSubject,
  ROUTE_SUBJECT,
  routeReplyCodec,
  routeRequestCodec,
  type LifecycleEvent,
  type LifecycleKind,
  type ModelRole,
  type PromptSpec,
  type RouteReply,
  type Usage,
} from '@vantage/protocol';
import { request, toVantageError, type ErrorCode, type NatsConnection } from '@vantage/runtime';

export type RouteErrorKind = 'no_responders' | 'timeout' | 'service' | 'transport' | 'bad_reply';

export class RouteError extends Error {
  override readonly name = 'RouteError';
  constructor(
    readonly kind: RouteErrorKind,
    /** The stable code: the runtime's (NATS_NO_RESPONDERS, NATS_TIMEOUT, ...) or, for `service`, the decision service's own. */
    readonly code: ErrorCode | 'BAD_REPLY',
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface PoolSpec {
  readonly model: string;
  readonly pool: string;
  /** Tokens per KV block of the pool's engines. */
  readonly blockSize: number;
}

export interface GatewayClientOptions {
  readonly nc: NatsConnection;
  readonly pools: { readonly efficient: PoolSpec; readonly capable: PoolSpec };
  /** Bound on one route request (the decision service's own observe deadline should be well inside it). */
  readonly routeTimeoutMs?: number;
  /** Default 'vantage.v1.route'. */
  readonly routeSubject?: string;
}

/** One candidate's prompt: token ids (hashed here, or sent as is with `sendTokenIds`), or precomputed local hashes. */
export type CandidatePrompt =
  | { readonly tokenIds: Uint32Array | readonly number[]; readonly loraName?: string | null }
  | { readonly localHashes: BigUint64Array; readonly promptTokens: number; readonly loraName?: string | null };

export interface RouteArgs {
  readonly requestId: string;
  readonly sessionId: string;
  readonly stageProposal: ModelRole;
  readonly prompts: { readonly efficient: CandidatePrompt; readonly capable: CandidatePrompt };
  /** Budget for the decision (the service falls back past it). */
  readonly deadlineMs?: number;
  /** Send token ids and let the decision service hash them (default false: hash here; one 8-byte hash per block is far smaller than the block's token ids). */
  readonly sendTokenIds?: boolean;
}

/** Where a routed request went: enough to report its lifecycle. */
export type Placement = Pick<LifecycleEvent, 'requestId' | 'sessionId' | 'pool' | 'workerId' | 'dpRank'>;

export class GatewayClient {
  private readonly timeoutMs: number;
  private readonly subject: string;

  constructor(private readonly o: GatewayClientOptions) {
    this.timeoutMs = o.routeTimeoutMs ?? 1000;
    this.subject = o.routeSubject ?? ROUTE_SUBJECT;
  }

  /** Dynamo's local block hashes of a prompt for one candidate's pool. */
  hashPrompt(role: ModelRole, tokenIds: Uint32Array | readonly number[], loraName: string | null = null): BigUint64Array {
    return localBlockHashes(tokenIds, this.o.pools[role].blockSize, loraName);
  }

  private promptSpec(role: ModelRole, p: CandidatePrompt, sendTokenIds: boolean): { prompt: PromptSpec; promptTokens: number } {
    const loraName = p.loraName ?? null;
    if ('localHashes' in p) return { prompt: { kind: 'local_hashes', localHashes: p.localHashes, loraName }, promptTokens: p.promptTokens };
    const tokens = p.tokenIds;
    if (sendTokenIds) {
      return { prompt: { kind: 'token_ids', tokenIds: tokens instanceof Uint32Array ? tokens : Uint32Array.from(tokens), loraName }, promptTokens: tokens.length };
    }
    return { prompt: { kind: 'local_hashes', localHashes: this.hashPrompt(role, tokens, loraName), loraName }, promptTokens: tokens.length };
  }

  /** The encoded route request (exposed for benchmarks and tests). */
  encodeRoute(a: RouteArgs): Uint8Array {
    const send = a.sendTokenIds ?? false;
    const cand = (role: ModelRole) => {
      const spec = this.o.pools[role];
      return { model: spec.model, pool: spec.pool, ...this.promptSpec(role, a.prompts[role], send) };
    };
    return routeRequestCodec.encode({
      requestId: a.requestId,
      sessionId: a.sessionId,
      stageProposal: a.stageProposal,
      candidates: { efficient: cand('efficient'), capable: cand('capable') },
      deadlineMs: a.deadlineMs ?? null,
    });
  }

  /** Ask the decision service. Rejects only with RouteError. */
  async route(a: RouteArgs): Promise<RouteReply> {
    const body = this.encodeRoute(a);
    let data: Uint8Array;
    try {
      data = (await request(this.o.nc, this.subject, body, { timeoutMs: this.timeoutMs })).data;
    } catch (e) {
      const v = toVantageError(e, 'NATS_REQUEST_FAILED');
      const kind: RouteErrorKind =
        v.details['remote'] === true ? 'service' : v.code === 'NATS_NO_RESPONDERS' ? 'no_responders' : v.code === 'NATS_TIMEOUT' ? 'timeout' : 'transport';
      throw new RouteError(kind, v.code, v.message, v.retryable, { cause: v });
    }
    const r = routeReplyCodec.decode(data);
    if (!r.ok) throw new RouteError('bad_reply', 'BAD_REPLY', `route reply: ${r.code}: ${r.reason}`, false);
    return r.value;
  }

  /** Placement of a route reply, for the lifecycle calls. */
  static placement(reply: RouteReply): Placement {
    if (reply.pool === null) throw new RangeError(`route reply for ${reply.requestId} names no pool`);
    return { requestId: reply.requestId, sessionId: reply.sessionId ?? reply.requestId, pool: reply.pool, workerId: reply.workerId, dpRank: reply.dpRank };
  }

  firstToken(p: Placement, atMs = Date.now()): void {
    this.lifecycle(p, 'first_token', atMs, null, null);
  }

  done(p: Placement, usage: Usage | null = null, atMs = Date.now()): void {
    this.lifecycle(p, 'done', atMs, usage, null);
  }

  cancelled(p: Placement, atMs = Date.now()): void {
    this.lifecycle(p, 'cancelled', atMs, null, null);
  }

  failed(p: Placement, error: { code: string; message: string | null }, atMs = Date.now()): void {
    this.lifecycle(p, 'failed', atMs, null, error);
  }

  usage(p: Placement, usage: Usage, atMs = Date.now()): void {
    this.lifecycle(p, 'usage', atMs, usage, null);
  }

  /** Resolves when the server has everything published so far. */
  flush(): Promise<void> {
    return this.o.nc.flush();
  }

  private lifecycle(p: Placement, kind: LifecycleKind, atMs: number, usage: Usage | null, error: { code: string; message: string | null } | null): void {
    this.o.nc.publish(
      lifecycleSubject(p.pool),
      lifecycleEventCodec.encode({ requestId: p.requestId, sessionId: p.sessionId, pool: p.pool, kind, atMs, workerId: p.workerId, dpRank: p.dpRank, usage, error }),
    );
  }
}
