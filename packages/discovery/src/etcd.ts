/**
 * Dynamo's discovery store in etcd, as a `DiscoveryStore` (README.md, "etcd backend": a listing at
 * one revision, resume without loss or repeats, a new listing after a compaction). Resumes start
 * after the revision of the last event this store delivered, not the etcd3 client's own counter:
 * that one jumps to the stream header's revision and could skip events still being replayed when a
 * connection drops.
 */
import { Etcd3, Range, type IKeyValue, type IOptions, type IWatchResponse, type Watcher } from 'etcd3';
import { VantageError } from '@vantage/runtime';
import { logicalKeyOf, type EtcdKeyRejection } from './etcd-keys';
import type { DiscoveryChange, DiscoveryStore } from './store';

interface EtcdDiscoveryOptions {
  /** Client URLs, `http://host:port` (Dynamo's `ETCD_ENDPOINTS`, comma-separated there). */
  readonly endpoints: readonly string[];
  /** Prepended to every logical key in etcd (default none, as Dynamo 1.6.1 writes them). */
  readonly root?: string;
  /** etcd user and password (Dynamo's `ETCD_AUTH_USERNAME` / `ETCD_AUTH_PASSWORD`). */
  readonly auth?: { readonly username: string; readonly password: string };
  /** TLS, PEM contents (Dynamo's `ETCD_AUTH_CA`, `ETCD_AUTH_CLIENT_CERT`, `ETCD_AUTH_CLIENT_KEY` name the files). */
  readonly tls?: { readonly ca?: Uint8Array; readonly cert?: Uint8Array; readonly key?: Uint8Array };
  /** Time allowed to connect for a call, ms (default 5,000). */
  readonly dialTimeoutMs?: number;
  /** Keys read per page of a listing (default 500). */
  readonly pageSize?: number;
  /** Delay before re-attaching a dropped watch, doubling per failed attempt up to the maximum (default 100 to 2,000 ms). */
  readonly resumeBackoffMs?: { readonly initial: number; readonly max: number };
}

export interface EtcdStoreStats {
  /** Keys reported by initial listings. */
  listed: number;
  /** Puts and deletes delivered after the initial listing (relist differences included). */
  puts: number;
  deletes: number;
  /** Events dropped as already delivered (replayed after a resume) or deletes of keys never held. */
  duplicatesDropped: number;
  /** Keys refused by the key mapping, by code. */
  rejectedKeys: Record<EtcdKeyRejection['code'], number>;
  /** Watch streams lost (connection dropped, etcd restarted) and re-attached. */
  disconnects: number;
  reattaches: number;
  /** Watches cancelled by etcd (for example the resume revision was compacted) and rebuilt by a new listing. */
  relists: number;
  /** Revision of the last change delivered (or of the listing), as a decimal string; `0` before any. */
  revision: string;
}

/** An etcd-backed `DiscoveryStore` with its counters. */
export interface EtcdDiscoveryStore extends DiscoveryStore {
  readonly backend: 'etcd';
  stats(): EtcdStoreStats;
}

type OnChanges = (changes: readonly DiscoveryChange[], initial: boolean) => void;
type OnError = (err: Error) => void;

/** One page-through listing of a prefix at a single revision. */
interface Listing {
  readonly revision: bigint;
  readonly kvs: readonly IKeyValue[];
}

/**
 * A fixed backoff schedule in the shape the etcd3 client's watch manager takes (cockatiel's
 * `IBackoff`: a `duration` and a `next()`); the client's default grows to 30 s, far too slow for
 * discovery. Only used for the client's own re-attach of the shared watch stream.
 */
class CappedBackoff {
  constructor(
    readonly duration: number,
    private readonly max: number,
  ) {}
  next(): CappedBackoff {
    return new CappedBackoff(Math.min(this.max, Math.max(1, this.duration) * 2), this.max);
  }
}

export function etcdDiscoveryStore(opts: EtcdDiscoveryOptions): EtcdDiscoveryStore {
  if (opts.endpoints.length === 0) throw new VantageError('CONFIG_INVALID', 'etcd discovery needs at least one endpoint');
  const root = opts.root ?? '';
  const pageSize = opts.pageSize ?? 500;
  const backoff = opts.resumeBackoffMs ?? { initial: 100, max: 2_000 };
  const clientOptions: IOptions = {
    hosts: [...opts.endpoints],
    dialTimeout: opts.dialTimeoutMs ?? 5_000,
    // gRPC's own reconnect backoff grows to 120 s by default; discovery should be back within
    // seconds of etcd.
    grpcOptions: { 'grpc.initial_reconnect_backoff_ms': backoff.initial, 'grpc.max_reconnect_backoff_ms': backoff.max },
    faultHandling: { watchBackoff: new CappedBackoff(backoff.initial, backoff.max) },
  };
  if (opts.auth) clientOptions.auth = { username: opts.auth.username, password: opts.auth.password };
  if (opts.tls) {
    clientOptions.credentials = {
      rootCertificate: opts.tls.ca ? Buffer.from(opts.tls.ca) : Buffer.alloc(0),
      ...(opts.tls.cert ? { certChain: Buffer.from(opts.tls.cert) } : {}),
      ...(opts.tls.key ? { privateKey: Buffer.from(opts.tls.key) } : {}),
    };
  }
  const client = new Etcd3(clientOptions);
  const counters: EtcdStoreStats = {
    listed: 0,
    puts: 0,
    deletes: 0,
    duplicatesDropped: 0,
    rejectedKeys: { key_not_utf8: 0, key_outside_root: 0 },
    disconnects: 0,
    reattaches: 0,
    relists: 0,
    revision: '0',
  };
  const watches = new Set<PrefixWatch>();
  let closed = false;

  async function list(prefix: string): Promise<Listing> {
    const { start, end } = Range.prefix(root + prefix);
    const kvs: IKeyValue[] = [];
    let from = start;
    let revision: bigint | undefined;
    for (;;) {
      const res = await client.kv.range({
        key: from,
        range_end: end,
        limit: pageSize,
        sort_order: 'Ascend',
        sort_target: 'Key',
        ...(revision !== undefined ? { revision: revision.toString() } : {}),
      });
      revision ??= BigInt(res.header.revision);
      kvs.push(...res.kvs);
      const last = res.kvs[res.kvs.length - 1];
      if (!res.more || last === undefined) break;
      // The next page starts just after the last key read: that key with a 0 byte appended.
      from = Buffer.concat([last.key, Buffer.of(0)]);
    }
    return { revision, kvs };
  }

  class PrefixWatch {
    /** Logical key -> mod revision, of every key delivered and not deleted since. */
    private readonly held = new Map<string, bigint>();
    private lastRevision = 0n;
    private watcher: Watcher | undefined;
    private timer: NodeJS.Timeout | undefined;
    private failures = 0;
    private reportedOutage = false;

    constructor(
      private readonly prefix: string,
      private readonly onChanges: OnChanges,
      private readonly onError: OnError | undefined,
    ) {}

    /** A new watch from the last delivered revision + 1 (the client re-attaches it after drops). */
    private attach(): void {
      if (closed) return;
      const w = client
        .watch()
        .prefix(root + this.prefix)
        .startRevision((this.lastRevision + 1n).toString())
        // Not `create()`: that resolves a tick after the watch is connected, and a response
        // delivered in that tick would reach no listener. `watcher()` attaches now, and the
        // listeners below are on before any response can arrive.
        .watcher();
      this.watcher = w;
      w.on('connecting', () => {
        // Every (re-)attach resumes from what this store delivered, whatever the client counted.
        w.request.start_revision = (this.lastRevision + 1n).toString();
      });
      w.on('connected', () => {
        if (this.reportedOutage) counters.reattaches++;
        this.failures = 0;
        this.reportedOutage = false;
      });
      w.on('data', (res) => {
        // The client rethrows a listener's exception outside any handler (a crash): nothing may escape.
        try {
          this.onResponse(res);
        } catch (e) {
          this.onError?.(new VantageError('INTERNAL', `etcd watch response not handled: ${(e as Error).message}`, { cause: e, details: { backend: 'etcd' } }));
        }
      });
      w.on('disconnected', (err) => {
        counters.disconnects++;
        if (!this.reportedOutage) {
          this.reportedOutage = true;
          this.unavailable(`etcd watch of ${JSON.stringify(this.prefix)} lost its connection; resuming from revision ${this.lastRevision + 1n}`, err);
        }
      });
      w.on('error', (err) => {
        // The watch was cancelled by etcd: the client has dropped it. The usual cause is a resume
        // revision etcd has compacted (the client passes on only the cancel reason, which etcd
        // leaves empty then); another is a permission change. Rebuild from a fresh listing.
        if (this.watcher === w) this.watcher = undefined;
        this.unavailable(`etcd cancelled the watch of ${JSON.stringify(this.prefix)} from revision ${this.lastRevision + 1n} (compacted, or refused: ${err.message}); listing again`, err);
        this.scheduleRelist();
      });
    }

    private unavailable(message: string, cause: unknown): void {
      this.onError?.(new VantageError('UPSTREAM_UNAVAILABLE', message, { cause, details: { backend: 'etcd', prefix: this.prefix } }));
    }

    private scheduleRelist(): void {
      if (closed || this.timer !== undefined) return;
      const delay = Math.min(backoff.max, backoff.initial * 2 ** Math.min(this.failures, 16));
      this.failures++;
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.load(false).catch((e: unknown) => {
          this.unavailable(`etcd listing of ${JSON.stringify(this.prefix)} failed: ${(e as Error).message}; retrying`, e);
          this.scheduleRelist();
        });
      }, delay);
    }

    /**
     * A listing, reported as the difference to what was delivered (all of it, the first time: that one
     * is delivered even if the store closed meanwhile), then a watch after it.
     */
    async load(initial: boolean): Promise<void> {
      if (!initial && closed) return;
      const listing = await list(this.prefix);
      if (!initial && closed) return;
      const seen = new Map<string, IKeyValue>();
      for (const kv of listing.kvs) {
        const key = this.mapKey(kv.key);
        if (key !== undefined) seen.set(key, kv);
      }
      const changes: DiscoveryChange[] = [];
      for (const key of [...this.held.keys()]) {
        if (seen.has(key)) continue;
        this.held.delete(key);
        changes.push({ kind: 'delete', key });
      }
      for (const [key, kv] of seen) {
        const rev = BigInt(kv.mod_revision);
        if (this.held.get(key) === rev) continue;
        this.held.set(key, rev);
        changes.push({ kind: 'put', key, value: kv.value });
      }
      if (initial) counters.listed += changes.length;
      else {
        counters.relists++;
        for (const c of changes) counters[c.kind === 'put' ? 'puts' : 'deletes']++;
      }
      this.lastRevision = 0n; // the listing's revision is authoritative, even if lower (etcd restored from an older snapshot)
      this.advance(listing.revision);
      if (initial || changes.length > 0) this.deliver(changes, initial);
      this.attach();
    }

    private onResponse(res: IWatchResponse): void {
      if (res.created || res.canceled) return; // creation carries no events; cancellation arrives as 'error'
      if (res.events.length === 0) {
        // A progress notification: etcd sends one only when every event up to its header
        // revision has been delivered on this watch.
        this.advance(BigInt(res.header.revision));
        return;
      }
      const changes: DiscoveryChange[] = [];
      let top = this.lastRevision;
      for (const ev of res.events) {
        const rev = BigInt(ev.kv.mod_revision);
        if (rev <= this.lastRevision) {
          counters.duplicatesDropped++;
          continue;
        }
        if (rev > top) top = rev;
        const key = this.mapKey(ev.kv.key);
        if (key === undefined) continue;
        if (ev.type === 'Put') {
          this.held.set(key, rev);
          changes.push({ kind: 'put', key, value: ev.kv.value });
          counters.puts++;
        } else if (this.held.delete(key)) {
          changes.push({ kind: 'delete', key });
          counters.deletes++;
        } else {
          counters.duplicatesDropped++;
        }
      }
      // All of a revision's events come in one response (no fragmenting is asked for), so the
      // revision is complete once this response is handled.
      this.advance(top);
      if (changes.length > 0) this.deliver(changes, false);
    }

    /** Hands changes to the consumer; a consumer that throws is reported, never allowed to break the watch. */
    private deliver(changes: readonly DiscoveryChange[], initial: boolean): void {
      try {
        this.onChanges(changes, initial);
      } catch (e) {
        this.onError?.(new VantageError('INTERNAL', `discovery consumer failed on ${changes.length} change(s): ${(e as Error).message}`, { cause: e, details: { backend: 'etcd' } }));
      }
    }

    private advance(rev: bigint): void {
      if (rev > this.lastRevision) this.lastRevision = rev;
      if (this.lastRevision > BigInt(counters.revision)) counters.revision = this.lastRevision.toString();
    }

    private mapKey(raw: Uint8Array): string | undefined {
      const r = logicalKeyOf(raw, root);
      if (r.ok) return r.key;
      counters.rejectedKeys[r.code]++;
      this.onError?.(new VantageError('DECODE_FAILED', r.reason, { details: { backend: 'etcd', code: r.code } }));
      return undefined;
    }

    async stop(): Promise<void> {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      const w = this.watcher;
      this.watcher = undefined;
      if (w) await w.cancel().catch(() => {});
    }
  }

  return {
    backend: 'etcd',
    async watch(prefix, onChanges, onError): Promise<void> {
      if (closed) throw new VantageError('SHUTTING_DOWN', 'etcd discovery store is closed');
      const pw = new PrefixWatch(prefix, onChanges, onError);
      try {
        await pw.load(true);
      } catch (e) {
        throw new VantageError('UPSTREAM_UNAVAILABLE', `etcd listing of ${JSON.stringify(prefix)} at ${opts.endpoints.join(',')} failed: ${(e as Error).message}`, {
          cause: e,
          details: { backend: 'etcd', prefix },
        });
      }
      watches.add(pw);
    },
    stats(): EtcdStoreStats {
      return { ...counters, rejectedKeys: { ...counters.rejectedKeys } };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await Promise.all([...watches].map((w) => w.stop()));
      watches.clear();
      client.close();
    },
  };
}
