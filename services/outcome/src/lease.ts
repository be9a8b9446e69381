/**
 * The leadership lease (README, "Replicas"): a key in a JetStream KV bucket
 * whose TTL is leaseMs, created if absent and renewed by the holder with a
 * revision-checked update every renewMs.
 *
 *   free ──acquire──▶ held ──renewal refused, or not renewed in time──▶ lost
 *     ▲                 │                                               │
 *     └────release──────┴──────────────release (key left alone)─────────┘
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kvm, type KV } from '@nats-io/kv';
import type { Logger, NatsConnection } from '@vantage/runtime';
import type { OutcomeConfig } from './config';

/** Retries a start-up call that fails transiently (leader elections, coordinator loading): 30 retries, 200 ms apart. */
export async function retrying<T>(what: string, fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (e) {
      if (i >= 30) throw new Error(`${what}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
      await sleep(200);
    }
  }
}

/** What one renewal found: still held, a failure that may be passing, or the lease gone for this term. */
export type Renewal = 'renewed' | 'failed' | 'lost';

/** The lease as a leader term uses it. */
export interface TermLease {
  /**
   * Whether this replica may still act as leader: it holds the lease and its
   * last successful renewal is recent enough that the key cannot have expired.
   */
  valid(nowMs: number): boolean;
  /** One revision-checked renewal (concurrent callers share it). */
  renew(): Promise<Renewal>;
  /** Gives the lease up: the key is deleted unless it was lost (a standby need not wait for the TTL). */
  release(): Promise<void>;
}

export class LeadershipLease implements TermLease {
  private state: 'free' | 'held' | 'lost' = 'free';
  private rev = 0;
  private lastRenewOkMs = 0;
  private renewing: Promise<Renewal> | null = null;

  private constructor(private readonly kv: KV, readonly key: string, readonly holder: string, private readonly cfg: OutcomeConfig['outcome']['leader'], private readonly log: Logger) {}

  static async open(nc: NatsConnection, cfg: OutcomeConfig['outcome']['leader'], transactionalId: string, instanceId: string, log: Logger): Promise<LeadershipLease> {
    const kv = await retrying('leader KV bucket', () => new Kvm(nc).create(cfg.bucket, { ttl: cfg.leaseMs, history: 1 }));
    const key = cfg.key === '' ? transactionalId.replace(/[^-/_=.a-zA-Z0-9]/g, '_') : cfg.key;
    return new LeadershipLease(kv, key, `${instanceId}-${randomBytes(4).toString('hex')}`, cfg, log);
  }

  /** Create-if-absent; also takes back a key still ours (a term ended on a NATS outage while the key outlived it). */
  async acquire(): Promise<boolean> {
    try {
      this.rev = await this.kv.create(this.key, this.holder);
    } catch {
      const e = await this.kv.get(this.key).catch(() => null);
      if (e === null || e.operation !== 'PUT' || e.string() !== this.holder) return false;
      try {
        this.rev = await this.kv.update(this.key, this.holder, e.revision);
      } catch {
        return false;
      }
    }
    this.lastRenewOkMs = Date.now();
    this.state = 'held';
    return true;
  }

  valid(nowMs: number): boolean {
    // Expiry is leaseMs after the last write; one renew period of margin.
    return this.state === 'held' && nowMs - this.lastRenewOkMs < this.cfg.leaseMs - this.cfg.renewMs;
  }

  renew(): Promise<Renewal> {
    if (this.renewing !== null) return this.renewing;
    this.renewing = (async (): Promise<Renewal> => {
      if (this.state !== 'held') return 'lost';
      try {
        this.rev = await this.kv.update(this.key, this.holder, this.rev);
        this.lastRenewOkMs = Date.now();
        return 'renewed';
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        // The server says the key moved on (another holder, or it expired): lost now.
        // Anything else (timeout, disconnected) is lost once the lease may have lapsed.
        if (/wrong last sequence/i.test(msg)) return this.lose('lease revision changed (taken over or expired)', e);
        if (!this.valid(Date.now())) return this.lose('lease not renewed in time', e);
        this.log.warn({ err: e }, 'lease renewal failed; retrying');
        return 'failed';
      }
    })().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  private lose(why: string, err: unknown): 'lost' {
    this.state = 'lost';
    this.log.warn({ err, why, holder: this.holder, key: this.key }, 'leadership lost: stop consuming, release open work unacked');
    return 'lost';
  }

  async release(): Promise<void> {
    if (this.state === 'held') await this.kv.delete(this.key, { previousSeq: this.rev }).catch(() => {});
    this.state = 'free';
  }
}
