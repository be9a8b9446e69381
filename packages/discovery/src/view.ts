/**
 * One Dynamo endpoint's workers and their capacity (model cards), the NATS subject prefixes of their
 * events (event channels) and the worker and dp rank behind each envelope `publisher_id` (event
 * sources), kept current from a DiscoveryStore's changes (README.md, "Membership" and "Failure
 * behaviour"). Nothing a store sends throws out of the view.
 */
import { isDeepStrictEqual } from 'node:util';
import type { WorkerId } from '@vantage/types';
import {
  DISCOVERY_PREFIX,
  parseDiscoveryEntry,
  type DiscoveryEntry,
  type DiscoveryRejectCode,
  type EndpointScope,
  type EventSourceEntry,
  type InstanceEntry,
  type ModelCardEntry,
} from './entries';
import type { DiscoveryChange, DiscoveryStore } from './store';

/** A listed worker: its model card and the request-plane transport of its endpoint instance. */
export type DiscoveredWorker = Omit<ModelCardEntry, 'kind' | 'key' | 'kvEventPublishing'> & Pick<InstanceEntry, 'transport'>;

export type PublisherInfo = Omit<EventSourceEntry, 'kind' | 'key'>;

export type DiscoveryEvent =
  | { readonly kind: 'worker_added'; readonly worker: DiscoveredWorker }
  | { readonly kind: 'worker_changed'; readonly worker: DiscoveredWorker; readonly previous: DiscoveredWorker }
  | { readonly kind: 'worker_removed'; readonly worker: DiscoveredWorker }
  /** The set of subject prefixes in scope changed (the full new set). */
  | { readonly kind: 'subjects_changed'; readonly prefixes: readonly string[] }
  /** A publisher was added, removed or changed (read the new mapping through `publisher()`). */
  | { readonly kind: 'publishers_changed'; readonly publishers: readonly PublisherInfo[] }
  | { readonly kind: 'rejected'; readonly key: string; readonly code: DiscoveryRejectCode; readonly reason: string };

interface DiscoveryViewOptions {
  /** Dynamo namespace of the pool (required). */
  readonly namespace: string;
  /** Component and endpoint; any when absent (Dynamo's defaults are `backend` and `generate`). */
  readonly component?: string;
  readonly endpoint?: string;
  /** Errors of the store itself (listing, connection); entry rejections arrive as `rejected` events. */
  readonly onStoreError?: (err: Error) => void;
}

const scopeKey = (s: EndpointScope): string => `${s.namespace}\u0000${s.component}\u0000${s.endpoint}`;

export class DiscoveryView {
  /** Puts that failed to parse (each also a `rejected` event). */
  readonly counters = { rejected: 0 };
  /** The last good in-scope entry under each key. */
  private readonly entries = new Map<string, Exclude<DiscoveryEntry, { kind: 'other' }>>();
  private workerSet = new Map<WorkerId, DiscoveredWorker>();
  private prefixSet: string[] = [];
  private publisherMap = new Map<bigint, PublisherInfo>();
  private readonly listeners = new Set<(e: DiscoveryEvent) => void>();
  private started = false;

  constructor(
    readonly store: DiscoveryStore,
    readonly opts: DiscoveryViewOptions,
  ) {
    if (typeof opts.namespace !== 'string' || opts.namespace.length === 0) throw new RangeError('DiscoveryView: namespace is required');
  }

  /** Listen to changes; returns the unsubscribe function. Listeners' throws are contained. */
  subscribe(listener: (e: DiscoveryEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Watch the store; resolves once its initial listing is applied (and its events delivered). */
  async start(): Promise<void> {
    if (this.started) throw new Error('DiscoveryView already started');
    this.started = true;
    await this.store.watch(DISCOVERY_PREFIX, (changes) => this.apply(changes), this.opts.onStoreError);
  }

  async close(): Promise<void> {
    await this.store.close();
  }

  /** Workers in scope, ordered by instance id. */
  workers(): readonly DiscoveredWorker[] {
    return [...this.workerSet.values()];
  }

  /** NATS subject prefixes of the scope's event channels (`{prefix}.{topic}`), sorted. */
  subjectPrefixes(): readonly string[] {
    return this.prefixSet;
  }

  /** The worker and dp rank behind an envelope's `publisher_id` (from `v1/event_sources`). */
  publisher(publisherId: bigint): PublisherInfo | undefined {
    return this.publisherMap.get(publisherId);
  }

  publishers(): readonly PublisherInfo[] {
    return [...this.publisherMap.values()];
  }

  private inScope(s: EndpointScope): boolean {
    const o = this.opts;
    return s.namespace === o.namespace && (o.component === undefined || s.component === o.component) && (o.endpoint === undefined || s.endpoint === o.endpoint);
  }

  private emit(e: DiscoveryEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        /* a listener's failure is its own; the view stays consistent */
      }
    }
  }

  /** Apply a batch of store changes (also usable directly, e.g. by tests or another transport). */
  apply(changes: readonly DiscoveryChange[]): void {
    for (const c of changes) {
      if (c.kind === 'delete') {
        this.entries.delete(c.key);
        continue;
      }
      const r = parseDiscoveryEntry(c.key, c.value);
      if (!r.ok) {
        this.counters.rejected++;
        this.emit({ kind: 'rejected', key: c.key, code: r.code, reason: r.reason });
        continue; // the last good value under this key stays
      }
      const e = r.value;
      if (e.kind !== 'other' && this.inScope(e)) this.entries.set(e.key, e);
    }
    this.recompute();
  }

  private recompute(): void {
    const all = [...this.entries.values()];
    const inst = new Map<string, InstanceEntry>();
    for (const i of all) if (i.kind === 'instance') inst.set(`${scopeKey(i)}\u0000${i.instanceId}`, i);
    const next = new Map<WorkerId, DiscoveredWorker>();
    const cards = all.filter((c) => c.kind === 'model_card').sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0));
    for (const c of cards) {
      const i = inst.get(`${scopeKey(c)}\u0000${c.instanceId}`);
      if (i === undefined) continue;
      const { kind: _kind, key: _key, kvEventPublishing: _publishing, ...card } = c;
      next.set(c.instanceId, { ...card, transport: i.transport });
    }
    const prev = this.workerSet;
    this.workerSet = next;
    for (const [id, w] of prev) if (!next.has(id)) this.emit({ kind: 'worker_removed', worker: w });
    for (const [id, w] of next) {
      const p = prev.get(id);
      if (p === undefined) this.emit({ kind: 'worker_added', worker: w });
      else if (!isDeepStrictEqual(p, w)) this.emit({ kind: 'worker_changed', worker: w, previous: p });
    }

    const prefixes = [...new Set(all.flatMap((c) => (c.kind === 'event_channel' && c.subjectPrefix !== null ? [c.subjectPrefix] : [])))].sort();
    if (prefixes.join('\n') !== this.prefixSet.join('\n')) {
      this.prefixSet = prefixes;
      this.emit({ kind: 'subjects_changed', prefixes });
    }

    const pubs = new Map<bigint, PublisherInfo>();
    for (const s of all) {
      if (s.kind !== 'event_source') continue;
      const { kind: _kind, key: _key, ...info } = s;
      pubs.set(s.publisherId, info);
    }
    const changed = !isDeepStrictEqual(pubs, this.publisherMap);
    this.publisherMap = pubs;
    if (changed) this.emit({ kind: 'publishers_changed', publishers: [...pubs.values()] });
  }
}
