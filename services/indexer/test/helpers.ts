/**
 * Shared pieces of the indexer's integration tests: the service as a child
 * process (`node --import tsx services/indexer/src/main.ts`), its /metrics,
 * publishers that speak every supported format through @vantage/wire's and
 * @vantage/protocol's encoders, an observe client, and a brute-force
 * reference model of what the answers must say.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { hashPrompt, sequenceHashes } from '@vantage/hashing';
import { REPO_ROOT, endAtExit, forgetAtExit } from '@vantage/infra';
import { mulberry32 } from '@vantage/random';
import {
  bookingEventCodec,
  bookingsSubject,
  lifecycleEventCodec,
  lifecycleSubject,
  observeReplyCodec,
  observeRequestCodec,
  observeSubject,
  workerRegistrationCodec,
  workersSubject,
  type LifecycleKind,
  type ObserveReply,
} from '@vantage/protocol';
import type { ExternalHash, KvEvent, StorageTier, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, jetStreamKvSubject, kvEventsSubject, legacyKvEventsSubject } from '@vantage/wire';
import { encodeRouterEventJson } from '@vantage/wire/test/encode';

export const MAIN = join(REPO_ROOT, 'services', 'indexer', 'src', 'main.ts');

// ---------------------------------------------------------------------------------
// The service as a child process
// ---------------------------------------------------------------------------------

export interface PoolSpec {
  name: string;
  blockSize?: number;
  namespace?: string;
  component?: string;
  endpoint?: string;
  kvEvents?: 'event_plane' | 'legacy_json' | 'jetstream';
  discovery?: { backend: 'none' | 'file' | 'etcd'; dir?: string; endpoints?: string[]; pollMs?: number };
  dynamoRouterSync?: boolean;
  selection?: Record<string, unknown>;
  workers?: Record<string, unknown>[];
}

export interface IndexerChild {
  readonly proc: ChildProcess;
  readonly pid: number;
  readonly opsPort: number;
  /** Every JSON log line so far. */
  readonly lines: Record<string, unknown>[];
  /** Raw /metrics text. */
  metricsText(): Promise<string>;
  /** Sum of a metric's series whose labels include `labels`. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** Resolves with the first log line (already seen or later) for which `pred` holds. */
  waitLog(pred: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  kill9(): Promise<void>;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
  readonly exited: Promise<number | null>;
}

/**
 * Start the indexer as its own process. Only the variables given here reach its
 * configuration (the runtime refuses unknown `VANTAGE_*` variables, and the test
 * process's own must not leak in).
 */
export async function spawnIndexer(opts: {
  natsUrl: string;
  pools: PoolSpec[];
  env?: Record<string, string>;
  startTimeoutMs?: number;
  /** Node flags before the indexer's own (`--import tsx`), e.g. a diagnostics preload. */
  nodeArgs?: string[];
}): Promise<IndexerChild> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('VANTAGE_') && v !== undefined) env[k] = v;
  Object.assign(env, {
    VANTAGE_NATS_URL: opts.natsUrl,
    VANTAGE_HTTP_PORT: '0',
    VANTAGE_HTTP_HOST: '127.0.0.1',
    VANTAGE_NATS_RECONNECT_TIME_WAIT_MS: '100',
    VANTAGE_NATS_RECONNECT_JITTER_MS: '0',
    VANTAGE_INDEXER_POOLS: JSON.stringify(opts.pools),
    VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
    VANTAGE_INDEXER_HOUSEKEEPING_MS: '100',
    ...opts.env,
  });
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), '--import', 'tsx', MAIN], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  // Killed if the test process exits first.
  if (proc.pid !== undefined) endAtExit(proc.pid);
  const lines: Record<string, unknown>[] = [];
  const waiters: { pred: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] = [];
  let stderr = '';
  let buf = '';
  proc.stdout!.setEncoding('utf8');
  proc.stdout!.on('data', (chunk: string) => {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const text = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        line = { msg: text, raw: true };
      }
      lines.push(line);
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i]!.pred(line)) waiters.splice(i, 1)[0]!.resolve(line);
      }
    }
  });
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (c: string) => {
    stderr = (stderr + c).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) =>
    proc.on('exit', (code) => {
      if (proc.pid !== undefined) forgetAtExit(proc.pid);
      resolve(code);
    }),
  );

  const waitLog = (pred: (l: Record<string, unknown>) => boolean, timeoutMs = 20_000): Promise<Record<string, unknown>> => {
    const seen = lines.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = {
        pred,
        resolve: (l: Record<string, unknown>) => {
          clearTimeout(t);
          resolve(l);
        },
      };
      const t = setTimeout(() => {
        const i = waiters.indexOf(w);
        if (i >= 0) waiters.splice(i, 1);
        reject(new Error(`indexer ${proc.pid}: no matching log line in ${timeoutMs} ms; last lines:\n${lines.slice(-8).map((l) => JSON.stringify(l)).join('\n')}\n${stderr}`));
      }, timeoutMs);
      waiters.push(w);
    });
  };

  const started = waitLog((l) => l['msg'] === 'service started', opts.startTimeoutMs ?? 30_000);
  const early = exited.then((code) => {
    throw new Error(`indexer exited with ${code} during start-up:\n${lines.map((l) => JSON.stringify(l)).join('\n')}\n${stderr}`);
  });
  const line = await Promise.race([started, early]);
  early.catch(() => {}); // later exits are reported through `exited`
  const opsPort = Number(line['opsPort']);

  const metricsText = async (): Promise<string> => {
    const res = await fetch(`http://127.0.0.1:${opsPort}/metrics`);
    return res.text();
  };
  return {
    proc,
    pid: proc.pid!,
    opsPort,
    lines,
    metricsText,
    metric: async (name, labels = {}) => sumMetric(await metricsText(), name, labels),
    waitLog,
    exited,
    async kill9() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

/** Sum of the samples of `name` (exact series name) whose labels include every given label. */
export function sumMetric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    const m = /^(?:\{(.*)\})? (\S+)/.exec(rest);
    if (!m) continue;
    const got: Record<string, string> = {};
    for (const p of (m[1] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) got[p[1]!] = p[2]!;
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) sum += Number(m[2]);
  }
  return sum;
}

// ---------------------------------------------------------------------------------
// Publishing in every format
// ---------------------------------------------------------------------------------

export type KvFormat = 'event_plane' | 'legacy_json' | 'jetstream';

/** Publishes KV events the way a Dynamo worker does in the given mode. */
export function kvPublisher(nc: NatsConnection, format: KvFormat, ns: string, comp: string): (ev: KvEvent) => Promise<void> {
  const te = new TextEncoder();
  let seq = 0n;
  const publisherId = 0xfeed_0000_0000_0001n;
  if (format === 'event_plane') {
    const subject = kvEventsSubject(ns, comp);
    return (ev) => {
      nc.publish(subject, encodeEventPlaneMessage({ publisherId, sequence: seq++, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event: ev }));
      return Promise.resolve();
    };
  }
  if (format === 'legacy_json') {
    const subject = legacyKvEventsSubject(ns, comp);
    return (ev) => {
      nc.publish(subject, te.encode(encodeRouterEventJson(ev)));
      return Promise.resolve();
    };
  }
  const js = jetstream(nc);
  const subject = jetStreamKvSubject(ns, comp);
  return async (ev) => {
    await js.publish(subject, encodeRouterEventJson(ev));
  };
}

export interface Capacity {
  totalKvBlocks: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  dpStartRank: number;
  dpSize: number;
  schedulable: boolean;
}

export function publishRegistration(nc: NatsConnection, pool: string, blockSize: number, workerId: bigint, cap: Capacity, ttlMs = 600_000): void {
  nc.publish(
    workersSubject(pool),
    workerRegistrationCodec.encode({
      kind: 'register',
      pool,
      workerId: workerId as WorkerId,
      atMs: Date.now(),
      capacity: { blockSize, ...cap },
      ttlMs,
      endpoint: null,
      model: null,
    }),
  );
}

export function publishDeregistration(nc: NatsConnection, pool: string, workerId: bigint): void {
  nc.publish(workersSubject(pool), workerRegistrationCodec.encode({ kind: 'deregister', pool, workerId: workerId as WorkerId, atMs: Date.now() }));
}

export interface Booking {
  requestId: string;
  workerId: bigint;
  dpRank: number;
  promptTokens: number;
  overlapBlocks: number;
  sequenceHashes: BigUint64Array;
}

export function encodeBooking(pool: string, b: Booking): Uint8Array {
  return bookingEventCodec.encode({
    requestId: b.requestId,
    sessionId: 's',
    pool,
    workerId: b.workerId as WorkerId,
    dpRank: b.dpRank,
    promptTokens: b.promptTokens,
    overlapBlocks: b.overlapBlocks,
    sequenceHashes: b.sequenceHashes,
    localHashes: null,
    expectedOutputTokens: null,
    prefillTokens: null,
    atMs: Date.now(),
  });
}

export function publishBooking(nc: NatsConnection, pool: string, b: Booking): void {
  nc.publish(bookingsSubject(pool), encodeBooking(pool, b));
}

export function publishLifecycle(nc: NatsConnection, pool: string, requestId: string, kind: LifecycleKind): void {
  nc.publish(
    lifecycleSubject(pool),
    lifecycleEventCodec.encode({ requestId, sessionId: 's', pool, kind, atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null }),
  );
}

let binaryNext = false;

/**
 * One observe round trip, decoded (throws on an error reply). Calls alternate between the JSON and
 * the binary reply encoding, so every integration assertion holds for both.
 */
export async function observe(nc: NatsConnection, pool: string, localHashes: BigUint64Array, promptTokens: number, timeoutMs = 5_000): Promise<ObserveReply> {
  binaryNext = !binaryNext;
  const req = observeRequestCodec.encode({
    requestId: null,
    prompt: { kind: 'local_hashes', localHashes, loraName: null },
    promptTokens,
    replyEncoding: binaryNext ? 'binary' : 'json',
  });
  const m = await nc.request(observeSubject(pool), req, { timeout: timeoutMs });
  if (m.headers?.get('Vantage-Error-Code')) throw new Error(`observe error ${m.headers.get('Vantage-Error-Code')}: ${m.headers.get('Nats-Service-Error')}`);
  const r = observeReplyCodec.decode(m.data);
  if (!r.ok) throw new Error(`bad observe reply: ${r.reason}`);
  return r.value;
}

// ---------------------------------------------------------------------------------
// Workload: seeded documents with shared prefixes, and workers' KV events
// ---------------------------------------------------------------------------------

/** The project's seeded generator (@vantage/random), with an integer helper. */
export function rng(seed: number): { next: () => number; int: (n: number) => number } {
  const next = mulberry32(seed);
  return { next, int: (n) => Math.floor(next() * n) };
}

export interface Doc {
  readonly tokens: number[];
  readonly local: BigUint64Array;
  readonly sequence: BigUint64Array;
}

/** `groups` shared system prompts, each followed by `perGroup` distinct continuations. */
export function makeDocs(seed: number, blockSize: number, groups: number, perGroup: number, sharedBlocks: number, ownBlocks: number): Doc[] {
  const r = rng(seed);
  const docs: Doc[] = [];
  for (let g = 0; g < groups; g++) {
    const shared = Array.from({ length: sharedBlocks * blockSize }, () => 1 + r.int(50_000));
    for (let k = 0; k < perGroup; k++) {
      const tokens = [...shared, ...Array.from({ length: ownBlocks * blockSize }, () => 1 + r.int(50_000))];
      const { local, sequence } = hashPrompt(tokens, blockSize);
      docs.push({ tokens, local, sequence });
    }
  }
  return docs;
}

export interface Publisher {
  readonly workerId: WorkerId;
  readonly dpRank: number;
}

/**
 * Generates a plausible event stream for a set of publishers: stores that extend
 * a held prefix of a document (engine block id = sequence hash, parent = the
 * previous block, as Dynamo's mocker does), tail removals, offloads to host and
 * disk tiers, and occasional clears. Event ids are contiguous per publisher from 1.
 */
export class EventGen {
  private readonly r: ReturnType<typeof rng>;
  private readonly held = new Map<string, Map<StorageTier, Set<bigint>>>();
  private readonly ids = new Map<string, bigint>();

  constructor(
    seed: number,
    private readonly docs: readonly Doc[],
    private readonly pubs: readonly Publisher[],
    private readonly opts: { clearEvery?: number } = {},
  ) {
    this.r = rng(seed);
  }

  private set(p: Publisher, tier: StorageTier): Set<bigint> {
    const k = `${p.workerId}:${p.dpRank}`;
    let m = this.held.get(k);
    if (!m) this.held.set(k, (m = new Map()));
    let s = m.get(tier);
    if (!s) m.set(tier, (s = new Set()));
    return s;
  }

  nextId(p: Publisher): bigint {
    const k = `${p.workerId}:${p.dpRank}`;
    const id = (this.ids.get(k) ?? 0n) + 1n;
    this.ids.set(k, id);
    return id;
  }

  /** Skip ids (as if events were lost) without emitting them. */
  skip(p: Publisher, n: bigint): void {
    const k = `${p.workerId}:${p.dpRank}`;
    this.ids.set(k, (this.ids.get(k) ?? 0n) + n);
  }

  /** A removal of a block the publisher never held (changes nothing but the event id). */
  noop(p: Publisher): KvEvent {
    return { workerId: p.workerId, dpRank: p.dpRank, storageTier: 'device', eventId: this.nextId(p), data: { kind: 'removed', blockHashes: BigUint64Array.of(12345n) } };
  }

  cleared(p: Publisher): KvEvent {
    for (const t of ['device', 'host_pinned', 'disk'] as const) this.set(p, t).clear();
    return { workerId: p.workerId, dpRank: p.dpRank, storageTier: 'device', eventId: this.nextId(p), data: { kind: 'cleared' } };
  }

  /** A stored event for `doc` on `p` extending its held prefix on `tier` (undefined when fully held). */
  store(p: Publisher, doc: Doc, tier: StorageTier, upTo?: number): KvEvent | undefined {
    const s = this.set(p, tier);
    let h = 0;
    while (h < doc.sequence.length && s.has(doc.sequence[h]!)) h++;
    if (h === doc.sequence.length) return undefined;
    const end = Math.min(doc.sequence.length, upTo ?? h + 1 + this.r.int(doc.sequence.length - h));
    if (end <= h) return undefined;
    for (let i = h; i < end; i++) s.add(doc.sequence[i]!);
    return {
      workerId: p.workerId,
      dpRank: p.dpRank,
      storageTier: tier,
      eventId: this.nextId(p),
      data: {
        kind: 'stored',
        parentHash: h === 0 ? null : (doc.sequence[h - 1]! as ExternalHash),
        startPosition: h,
        blockHashes: doc.sequence.slice(h, end),
        tokensHashes: doc.local.slice(h, end) as BigUint64Array,
      },
    };
  }

  /** Remove the tail of the held prefix of `doc` on `tier`. */
  remove(p: Publisher, doc: Doc, tier: StorageTier): KvEvent | undefined {
    const s = this.set(p, tier);
    let h = 0;
    while (h < doc.sequence.length && s.has(doc.sequence[h]!)) h++;
    if (h === 0) return undefined;
    const from = this.r.int(h);
    const ids = doc.sequence.slice(from, h);
    for (const x of ids) s.delete(x);
    return { workerId: p.workerId, dpRank: p.dpRank, storageTier: tier, eventId: this.nextId(p), data: { kind: 'removed', blockHashes: ids } };
  }

  /** One random event (or undefined when the pick was a no-op). */
  random(): KvEvent | undefined {
    const p = this.pubs[this.r.int(this.pubs.length)]!;
    const doc = this.docs[this.r.int(this.docs.length)]!;
    const x = this.r.next();
    if (this.opts.clearEvery && this.r.int(this.opts.clearEvery) === 0) return this.cleared(p);
    if (x < 0.55) return this.store(p, doc, 'device');
    if (x < 0.7) return this.store(p, doc, 'host_pinned');
    if (x < 0.78) return this.store(p, doc, 'disk');
    if (x < 0.93) return this.remove(p, doc, 'device');
    return this.remove(p, doc, this.r.next() < 0.5 ? 'host_pinned' : 'disk');
  }

  events(n: number): KvEvent[] {
    const out: KvEvent[] = [];
    while (out.length < n) {
      const e = this.random();
      if (e) out.push(e);
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------
// Brute-force reference: sets of held blocks, event-id bookkeeping, bookings
// ---------------------------------------------------------------------------------

interface RefPub {
  tiers: Map<StorageTier, Set<bigint>>;
  lastId: bigint | null;
  suspect: string | null;
}

export interface RefWorker {
  workerId: bigint;
  dpRank: number;
  device: number;
  host: number;
  disk: number;
  any: number;
  treeBlocks: number;
  suspect: string | null;
  R: number;
  tracked: number;
  P: number | null;
  activeBlocks: number;
  newBlocks: number;
  cost: number;
}

export class RefModel {
  readonly pubs = new Map<string, RefPub & Publisher>();
  readonly caps = new Map<bigint, Capacity>();
  readonly bookings = new Map<string, Booking & { prefillDone: boolean }>();

  constructor(readonly blockSize: number) {}

  private pub(w: WorkerId, dp: number): RefPub & Publisher {
    const k = `${w}:${dp}`;
    let p = this.pubs.get(k);
    if (!p) this.pubs.set(k, (p = { workerId: w, dpRank: dp, tiers: new Map(), lastId: null, suspect: null }));
    return p;
  }

  apply(ev: KvEvent): void {
    const p = this.pub(ev.workerId, ev.dpRank);
    if (p.lastId !== null && ev.eventId <= p.lastId) return; // duplicate
    if (p.lastId !== null && ev.eventId !== p.lastId + 1n) p.suspect ??= 'event_gap';
    if (p.lastId === null && ev.eventId > 1n) p.suspect ??= 'missed_start';
    p.lastId = ev.eventId;
    const tier = (t: StorageTier): Set<bigint> => {
      let s = p.tiers.get(t);
      if (!s) p.tiers.set(t, (s = new Set()));
      return s;
    };
    const d = ev.data;
    if (d.kind === 'stored') {
      if (d.parentHash !== null && ![...p.tiers.values()].some((s) => s.has(d.parentHash!))) p.suspect ??= 'unknown_parent';
      for (const b of d.blockHashes) tier(ev.storageTier).add(b);
    } else if (d.kind === 'removed') {
      for (const b of d.blockHashes) tier(ev.storageTier).delete(b);
    } else {
      p.tiers.clear();
      p.suspect = null;
    }
  }

  register(workerId: bigint, cap: Capacity): void {
    this.caps.set(workerId, cap);
  }

  deregister(workerId: bigint): void {
    this.caps.delete(workerId);
    for (const k of [...this.pubs.keys()]) if (this.pubs.get(k)!.workerId === workerId) this.pubs.delete(k);
    for (const [id, b] of this.bookings) if (b.workerId === workerId) this.bookings.delete(id);
  }

  book(b: Booking): void {
    if (!this.bookings.has(b.requestId)) this.bookings.set(b.requestId, { ...b, prefillDone: false });
  }

  lifecycle(requestId: string, kind: LifecycleKind): void {
    const b = this.bookings.get(requestId);
    if (!b) return;
    if (kind === 'first_token') b.prefillDone = true;
    else if (kind !== 'usage') this.bookings.delete(requestId);
  }

  /** What the service must answer for this prompt, per (worker, dp rank). */
  expect(local: BigUint64Array, promptTokens: number): RefWorker[] {
    const bs = this.blockSize;
    const sequence = sequenceHashes(local);
    const keys = new Map<string, Publisher>();
    for (const p of this.pubs.values()) keys.set(`${p.workerId}:${p.dpRank}`, p);
    for (const [w, c] of this.caps) for (let i = 0; i < c.dpSize; i++) keys.set(`${w}:${c.dpStartRank + i}`, { workerId: w as WorkerId, dpRank: c.dpStartRank + i });
    for (const b of this.bookings.values()) keys.set(`${b.workerId}:${b.dpRank}`, { workerId: b.workerId as WorkerId, dpRank: b.dpRank });
    const requestBlocks = Math.ceil(promptTokens / bs);
    const out: RefWorker[] = [];
    for (const [k, { workerId, dpRank }] of keys) {
      const p = this.pubs.get(k);
      const has = (t: StorageTier, h: bigint): boolean => p?.tiers.get(t)?.has(h) === true;
      const lead = (tiers: StorageTier[]): number => {
        let n = 0;
        while (n < sequence.length && tiers.some((t) => has(t, sequence[n]!))) n++;
        return n;
      };
      const device = lead(['device']);
      const host = lead(['device', 'host_pinned']);
      const disk = lead(['device', 'host_pinned', 'disk']);
      const any = lead(['device', 'host_pinned', 'disk', 'external']);
      const all = new Set<bigint>();
      for (const s of p?.tiers.values() ?? []) for (const h of s) all.add(h);
      let R = 0;
      let tracked = 0;
      const active = new Set<bigint>();
      for (const b of this.bookings.values()) {
        if (b.workerId !== workerId || b.dpRank !== dpRank) continue;
        R++;
        if (!b.prefillDone) tracked += Math.max(0, b.promptTokens - b.overlapBlocks * bs);
        for (const h of b.sequenceHashes) active.add(h);
      }
      let newBlocks = 0;
      for (const h of sequence) if (!active.has(h)) newBlocks++;
      newBlocks += Math.max(0, requestBlocks - sequence.length);
      const cap = this.caps.get(workerId);
      // prefill_load_scale with the pool's defaults (credit 1, scale 1, host 0.75, disk 0.25, request weight 0).
      const credit = device + 0.75 * (host - device) + 0.25 * (disk - host);
      const cost = Math.max(0, (tracked + promptTokens) / bs - credit) + active.size + newBlocks;
      out.push({
        workerId,
        dpRank,
        device,
        host,
        disk,
        any,
        treeBlocks: all.size,
        suspect: p?.suspect ?? null,
        R,
        tracked,
        P: cap ? tracked / cap.maxNumBatchedTokens : null,
        activeBlocks: active.size,
        newBlocks,
        cost,
      });
    }
    return out.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : a.dpRank - b.dpRank));
  }
}

/**
 * Compare a reply with the reference; returns a list of differences (empty when equal).
 * Dynamo's choice is checked by cost: the chosen worker's cost must be the lowest.
 */
export function diffReply(reply: ObserveReply, ref: RefWorker[], bs: number): string[] {
  const diffs: string[] = [];
  const byKey = new Map(reply.workers.map((w) => [`${w.workerId}:${w.dpRank}`, w]));
  if (reply.workers.length !== ref.length) diffs.push(`workers: got ${reply.workers.length}, want ${ref.length}`);
  for (const e of ref) {
    const k = `${e.workerId}:${e.dpRank}`;
    const g = byKey.get(k);
    if (!g) {
      diffs.push(`${k}: missing`);
      continue;
    }
    const check = (what: string, got: unknown, want: unknown): void => {
      const same = typeof got === 'number' && typeof want === 'number' ? Math.abs(got - want) < 1e-9 : got === want;
      if (!same) diffs.push(`${k} ${what}: got ${String(got)}, want ${String(want)}`);
    };
    check('K', g.K, e.device * bs);
    check('deviceOverlapBlocks', g.deviceOverlapBlocks, e.device);
    check('hostOverlapBlocks', g.hostOverlapBlocks ?? 0, e.host);
    check('diskOverlapBlocks', g.diskOverlapBlocks ?? 0, e.disk);
    check('anyTierOverlapBlocks', g.anyTierOverlapBlocks ?? 0, e.any);
    check('treeBlocks', g.treeBlocks, e.treeBlocks);
    check('suspect', g.suspect?.reason ?? null, e.suspect);
    check('R', g.R, e.R);
    check('trackedPrefillTokens', g.trackedPrefillTokens, e.tracked);
    check('P', g.P, e.P);
    check('activeBlocks', g.activeBlocks, e.activeBlocks);
    check('newBlocks', g.newBlocks, e.newBlocks);
    if (g.schedulable) check('dynamoCost', g.dynamoCost, e.cost);
  }
  const eligible = ref.filter((e) => reply.workers.find((w) => w.workerId === e.workerId && w.dpRank === e.dpRank)?.schedulable);
  if (eligible.length > 0) {
    const best = Math.min(...eligible.map((e) => e.cost));
    const c = reply.dynamoChoice;
    if (!c) diffs.push('dynamoChoice: null');
    else {
      const chosen = ref.find((e) => e.workerId === c.workerId && e.dpRank === c.dpRank);
      if (!chosen || Math.abs(chosen.cost - best) > 1e-9) diffs.push(`dynamoChoice ${c.workerId}:${c.dpRank} costs ${chosen?.cost}, best is ${best}`);
      if (Math.abs(c.cost - best) > 1e-9) diffs.push(`dynamoChoice.cost ${c.cost}, want ${best}`);
    }
  }
  return diffs;
}
