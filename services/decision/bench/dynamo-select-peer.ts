/**
 * Dynamo's runtime-free selection service (`python -m dynamo.select_service`, PyPI `ai-dynamo-runtime`
 * 1.6.1) as the decision benchmark's peer: what an operator would otherwise run to pick a worker by KV
 * overlap and load over HTTP.
 *
 *   select service (child process, 127.0.0.1, a free port; `GET /health`, `POST /workers`,
 *     `POST /select`, `POST /overlap_scores`)
 *   ZMQ publisher (child process, pyzmq from the Dynamo virtualenv): one XPUB endpoint per worker,
 *     publishing vLLM-format KV event batches; each worker is registered with its endpoint as
 *     `kv_events_endpoint` and the service subscribes to it (the only way 1.6.1 takes KV events)
 *   load generator (this process): HTTP/1.1 keep-alive, open loop at a fixed offered rate, latency
 *     from each request's *scheduled* send time (no coordinated omission)
 *
 * It is given the decision benchmark's workload (`./workload`): the same 64 workers with the same
 * registration figures and the same stored prefixes (the very `KvEvent`s the benchmark publishes to
 * our indexers; vLLM's format carries the blocks' tokens, from which Dynamo computes the same local
 * hashes), and asked the same prompts (sessions 0..3, 32k tokens by default), as local block hashes
 * (`block_hashes` with `sequence_hashes`) or as token ids. Its JSON decoder reads hashes as i64, so a
 * u64 hash at or above 2^63 is sent as the i64 with the same bits (checked: its overlaps for such
 * hashes equal ours).
 *
 * Before measuring, every worker's overlap for every session's full prompt, both forms, must equal
 * what our own `PoolState` fed the same events answers, and each chosen worker must have the longest
 * overlap (all loads are equal: `/select` books nothing); a mismatch throws.
 */
import { Agent, request } from 'node:http';
import { loadavg } from 'node:os';
import { localBlockHashes, sequenceHashes } from '@vantage/hashing';
import { processCpuUs } from '@vantage/infra';
import { PoolState } from '@vantage/observation';
import type { KvEvent, WorkerId } from '@vantage/types';
import { startSelectService, startZmqKvPublisher, type SelectServiceProcess, type ZmqKvPublisher } from './dynamo-select-service';
import { BLOCK, PROMPT_SESSIONS, SESSION_TOKENS, SESSIONS, WORKER_CAPACITY, WORKERS, storedPrefixEvent, tokensFor } from './workload';

/** The model the workers serve (the benchmark's efficient pool). */
const PEER_MODEL = 'bench-8b';
/** Highest sustained rate: every select answered with 200, achieved ≥ 97 % of offered, p99 under this. */
const P99_LIMIT_US = 20_000;

export type PromptForm = 'block_hashes' | 'token_ids';

export interface PeerWorker {
  readonly index: number;
  readonly workerId: WorkerId;
  /** The event our indexers are given for this worker (its whole KV state). */
  readonly event: KvEvent;
}

/** What `/select` answered, ids exact. */
export interface SelectAnswer {
  readonly workerId: bigint;
  readonly dpRank: number;
  /** `overlap.gpu`: matched tokens on the device tier. */
  readonly overlapTokens: number;
  readonly effectivePrefillTokens: number;
}

export interface DynamoSelectPeer {
  readonly service: SelectServiceProcess;
  readonly publisher: ZmqKvPublisher;
  readonly workers: readonly PeerWorker[];
  /** Our own pool state, fed the same registrations and events: the reference for its answers. */
  readonly pool: PoolState;
  /** Every session's token stream (`SESSION_TOKENS` long) and its local block hashes. */
  readonly sessionTokens: readonly Uint32Array[];
  readonly sessionHashes: readonly BigUint64Array[];
  /** The JSON body of a select about `tokens` in `form` (the load generator builds each once and resends it). */
  body(tokens: Uint32Array, form: PromptForm): Buffer;
  select(tokens: Uint32Array, form: PromptForm): Promise<SelectAnswer>;
  /** `/overlap_scores`: device blocks per worker (workers absent from the reply count 0). */
  overlapBlocks(tokens: Uint32Array, form: PromptForm): Promise<Map<bigint, number>>;
  post(path: string, body: Buffer | string, timeoutMs?: number): Promise<{ status: number; text: string }>;
  stop(): Promise<void>;
}

interface PeerOptions {
  /** Workers of the benchmark's pool given to the service (default 64, the benchmark's). */
  readonly workers?: number;
  /** The service's KV indexer threads (`--threads`; its default 4 when absent). */
  readonly threads?: number;
  /** Worker w's id is this plus w (default 1000, the benchmark's efficient pool). */
  readonly firstWorkerId?: bigint;
  /** Keep-alive connections of the load generator (default 64). */
  readonly maxSockets?: number;
  readonly log?: (s: string) => void;
}

const i64 = (h: bigint): string => BigInt.asIntN(64, h).toString();

function selectJson(tokens: Uint32Array, form: PromptForm): string {
  const isl = tokens.length;
  if (form === 'token_ids') return `{"model_name":${JSON.stringify(PEER_MODEL)},"token_ids":[${tokens.join(',')}],"isl_tokens":${isl}}`;
  const locals = localBlockHashes(tokens, BLOCK);
  const seq = sequenceHashes(locals);
  return `{"model_name":${JSON.stringify(PEER_MODEL)},"block_hashes":[${Array.from(locals, i64).join(',')}],"sequence_hashes":[${Array.from(seq, i64).join(',')}],"isl_tokens":${isl}}`;
}

/** `"key":<unsigned integer>` from a JSON text, exact (ids never pass through a JS number). */
function u64Field(text: string, key: string): bigint {
  const m = new RegExp(`"${key}":(\\d+)`).exec(text);
  if (!m) throw new Error(`no ${key} in ${text.slice(0, 200)}`);
  return BigInt(m[1]!);
}

function parseSelect(text: string): SelectAnswer {
  const r = JSON.parse(text) as { dp_rank: number; overlap: { gpu: number }; effective_prefill_tokens: number };
  return { workerId: u64Field(text, 'worker_id'), dpRank: r.dp_rank, overlapTokens: r.overlap.gpu, effectivePrefillTokens: r.effective_prefill_tokens };
}

/** Start the service and the publisher, give them the workload's workers and events, and wait until its answers equal ours. */
export async function startDynamoSelectPeer(o: PeerOptions = {}): Promise<DynamoSelectPeer> {
  const n = o.workers ?? WORKERS;
  const log = o.log ?? ((): void => {});
  const sessionTokens = Array.from({ length: SESSIONS }, (_, s) => tokensFor(s, SESSION_TOKENS));
  const sessionHashes = sessionTokens.map((t) => localBlockHashes(t, BLOCK));
  const workers: PeerWorker[] = [];
  for (let w = 0; w < n; w++) {
    const workerId = BigInt.asUintN(64, (o.firstWorkerId ?? 1000n) + BigInt(w)) as WorkerId;
    workers.push({ index: w, workerId, event: storedPrefixEvent(workerId, w, sessionHashes) });
  }
  const pool = new PoolState({ pool: 'bench-eff', blockSize: BLOCK, selection: { kind: 'kv_router', formula: 'prefill_load_scale' }, bookingTtlMs: 300_000, workerTtlMs: 3_600_000 });
  const now = Date.now();
  for (const w of workers) {
    const bad = pool.register(w.workerId, WORKER_CAPACITY, null, now, true);
    if (bad !== undefined) throw new Error(`our pool refused worker ${w.workerId}: ${bad}`);
    pool.applyKvEvent(w.event, now);
  }

  const service = await startSelectService(o.threads === undefined ? {} : { threads: o.threads });
  let publisher: ZmqKvPublisher;
  try {
    publisher = await startZmqKvPublisher({ workers: n });
  } catch (e) {
    await service.stop();
    throw e;
  }
  const agent = new Agent({ keepAlive: true, maxSockets: o.maxSockets ?? 64 });
  const post = (path: string, body: Buffer | string, timeoutMs = 10_000): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const req = request({ agent, host: '127.0.0.1', port: service.port, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      const t = setTimeout(() => req.destroy(new Error(`${path}: no answer in ${timeoutMs} ms`)), timeoutMs);
      req.on('close', () => clearTimeout(t));
      req.on('error', reject);
      req.end(body);
    });
  const body = (tokens: Uint32Array, form: PromptForm): Buffer => Buffer.from(selectJson(tokens, form));
  const ok = async (path: string, b: Buffer | string): Promise<string> => {
    const r = await post(path, b);
    if (r.status < 200 || r.status >= 300) throw new Error(`${path}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
    return r.text;
  };
  let stopping: Promise<void> | undefined;
  const peer: DynamoSelectPeer = {
    service,
    publisher,
    workers,
    pool,
    sessionTokens,
    sessionHashes,
    body,
    post,
    select: async (tokens, form) => parseSelect(await ok('/select', body(tokens, form))),
    overlapBlocks: async (tokens, form) => {
      const text = await ok('/overlap_scores', body(tokens, form));
      const out = new Map<bigint, number>();
      for (const m of text.matchAll(/"worker_id":(\d+),"dp_rank":(\d+),"device_blocks":(\d+)/g)) out.set(BigInt(m[1]!), Number(m[3]));
      return out;
    },
    stop: async () => {
      stopping ??= (async () => {
        agent.destroy();
        await Promise.all([publisher.stop(), service.stop()]);
      })();
      await stopping;
    },
  };

  try {
    for (const w of workers) {
      const c = WORKER_CAPACITY;
      await ok(
        '/workers',
        `{"worker_id":${w.workerId},"model_name":${JSON.stringify(PEER_MODEL)},"endpoint":"http://bench-eff-${w.index}:8000","block_size":${c.blockSize},"total_kv_blocks":${c.totalKvBlocks},"max_num_batched_tokens":${c.maxNumBatchedTokens},"kv_events_endpoint":${JSON.stringify(publisher.endpoints[w.index])}}`,
      );
    }
    const subscribed = await publisher.waitSubscribed(30_000);
    if (subscribed !== n) throw new Error(`the select service subscribed to ${subscribed} of ${n} workers' KV event endpoints`);
    for (const w of workers) {
      const d = w.event.data;
      if (d.kind !== 'stored') throw new Error('expected a stored event');
      const tokens = sessionTokens[w.index % SESSIONS]!.subarray(0, d.tokensHashes.length * BLOCK);
      await publisher.publish(w.index, 0n, [{ kind: 'stored', blockHashes: d.blockHashes, parentHash: d.parentHash, tokenIds: tokens, blockSize: BLOCK }]);
    }
    await waitSameOverlaps(peer, log);
  } catch (e) {
    await peer.stop();
    throw e;
  }
  return peer;
}

/** Our overlap (device blocks) for `tokens` on every worker of our pool. */
export function ourOverlaps(peer: DynamoSelectPeer, tokens: Uint32Array): Map<bigint, number> {
  const obs = peer.pool.observe(localBlockHashes(tokens, BLOCK), tokens.length, Date.now());
  const out = new Map<bigint, number>();
  for (const w of obs.workers) out.set(w.workerId, w.match?.deviceBlocks ?? 0);
  return out;
}

/** Until each session's full prompt, in both forms, has the same overlap on every worker as ours (the events are applied asynchronously). */
async function waitSameOverlaps(peer: DynamoSelectPeer, log: (s: string) => void): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = '';
  for (;;) {
    last = '';
    for (let s = 0; s < SESSIONS && last === ''; s++) {
      const t = peer.sessionTokens[s]!;
      const ours = ourOverlaps(peer, t);
      for (const form of ['block_hashes', 'token_ids'] as const) {
        const theirs = await peer.overlapBlocks(t, form);
        for (const w of peer.workers) {
          const a = ours.get(w.workerId) ?? 0;
          const b = theirs.get(w.workerId) ?? 0;
          if (a !== b) {
            last = `session ${s} (${form}): worker ${w.workerId} overlap ${b} blocks, ours ${a}`;
            break;
          }
        }
        if (last !== '') break;
      }
    }
    if (last === '') {
      log(`select service: ${peer.workers.length} workers, overlaps equal to ours for ${SESSIONS} prompts of ${SESSION_TOKENS} tokens (block hashes and token ids)`);
      return;
    }
    if (Date.now() > deadline) throw new Error(`the select service's overlaps never matched ours: ${last}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface SanityResult {
  readonly selects: number;
  /** The chosen worker holds the longest overlap (ours), and the reply's overlap and prefill figures are that overlap's. */
  readonly longestOverlap: number;
  /** The chosen worker is also the one our kv_router selection picks. */
  readonly sameWorkerAsOurs: number;
  /** The chosen worker is another of those with our lowest cost (a tie, broken differently). */
  readonly tiedWithOurs: number;
  readonly failures: readonly string[];
}

/** Ask `/select` about `prompts` and compare each answer with our pool's facts and choice. */
export async function checkSelects(peer: DynamoSelectPeer, prompts: readonly Uint32Array[], form: PromptForm): Promise<SanityResult> {
  let longest = 0;
  let same = 0;
  let tied = 0;
  const failures: string[] = [];
  for (const t of prompts) {
    const a = await peer.select(t, form);
    const obs = peer.pool.observe(localBlockHashes(t, BLOCK), t.length, Date.now());
    let max = 0;
    for (const w of obs.workers) max = Math.max(max, w.match?.deviceBlocks ?? 0);
    const i = obs.workers.findIndex((w) => w.workerId === a.workerId);
    const mine = i < 0 ? null : obs.workers[i]!;
    const overlap = mine?.match?.deviceBlocks ?? 0;
    const effective = Math.max(0, t.length - overlap * BLOCK);
    if (mine === null || overlap !== max || a.overlapTokens !== overlap * BLOCK || a.effectivePrefillTokens !== effective) {
      failures.push(`prompt of ${t.length} tokens: chose ${a.workerId} (overlap ${a.overlapTokens} tokens, prefill ${a.effectivePrefillTokens}); ours: its overlap ${overlap} blocks, longest ${max}`);
      continue;
    }
    longest++;
    const chosen = obs.chosenIndex;
    if (chosen === i) same++;
    else if (chosen >= 0 && obs.costs[chosen] !== null && obs.costs[i] === obs.costs[chosen]) tied++;
    else failures.push(`prompt of ${t.length} tokens: chose ${a.workerId} at our cost ${obs.costs[i]}, ours ${obs.workers[chosen]?.workerId} at ${obs.costs[chosen] ?? 'n/a'}`);
  }
  return { selects: prompts.length, longestOverlap: longest, sameWorkerAsOurs: same, tiedWithOurs: tied, failures };
}

interface SelectRun {
  readonly label: string;
  readonly rate: number;
  readonly sent: number;
  readonly ok: number;
  readonly errors: Record<string, number>;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly maxUs: number;
  readonly achievedPerS: number;
  /** Distinct workers chosen (several prompts: several workers). */
  readonly workersChosen: number;
  /** CPU µs per answered select: the select service's process, and this load generator. */
  readonly cpuUsPerSelect: { readonly service: number; readonly generator: number };
  readonly loadavg1m: number;
}

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const cpuOf = (pid: number): number => {
  const c = processCpuUs(pid);
  return c === null ? NaN : c.user + c.sys;
};

/**
 * `rate` selects per second for `seconds`, open loop, cycling through `bodies`; each request's latency
 * runs from its scheduled send time to its whole reply. A select not answered within `timeoutMs`, or
 * answered with another status than 200, is an error; past `maxInFlight` outstanding the generator
 * counts the send as a backlog error instead of queuing without bound.
 */
export async function selectOpenLoop(peer: DynamoSelectPeer, label: string, bodies: readonly Buffer[], rate: number, seconds: number, o: { timeoutMs?: number; maxInFlight?: number } = {}): Promise<SelectRun> {
  const total = Math.max(1, Math.round(rate * seconds));
  const lat = new Float64Array(total);
  const errors: Record<string, number> = {};
  const chosen = new Set<string>();
  const timeoutMs = o.timeoutMs ?? 5_000;
  const maxInFlight = o.maxInFlight ?? 4096;
  let ok = 0;
  let n = 0;
  let inFlight = 0;
  const err = (k: string): void => void (errors[k] = (errors[k] ?? 0) + 1);
  const svc0 = cpuOf(peer.service.pid);
  const gen0 = process.cpuUsage();
  const t0 = performance.now();
  const interval = 1000 / rate;
  await new Promise<void>((done) => {
    let finished = 0;
    const finish = (): void => {
      if (++finished === total) done();
    };
    const tick = (): void => {
      const due = Math.min(total, Math.floor((performance.now() - t0) / interval) + 1);
      while (n < due) {
        const scheduled = t0 + n * interval;
        const b = bodies[n % bodies.length]!;
        n++;
        if (inFlight >= maxInFlight) {
          err('generator_backlog');
          finish();
          continue;
        }
        inFlight++;
        peer.post('/select', b, timeoutMs).then(
          (r) => {
            inFlight--;
            if (r.status === 200) {
              lat[ok++] = (performance.now() - scheduled) * 1000;
              const m = /"worker_id":(\d+)/.exec(r.text);
              if (m) chosen.add(m[1]!);
            } else err(`http_${r.status}`);
            finish();
          },
          (e: unknown) => {
            inFlight--;
            err(e instanceof Error && e.message.includes('no answer') ? 'timeout' : `error:${(e as { code?: string }).code ?? 'unknown'}`);
            finish();
          },
        );
      }
      if (n < total) setTimeout(tick, Math.max(0, Math.min(interval, t0 + n * interval - performance.now())));
    };
    tick();
  });
  const elapsed = (performance.now() - t0) / 1000;
  const gen = process.cpuUsage(gen0);
  const sorted = lat.subarray(0, ok).sort();
  const per = (us: number): number => (ok > 0 && Number.isFinite(us) ? Math.round(us / ok) : NaN);
  return {
    label,
    rate,
    sent: total,
    ok,
    errors,
    p50Us: quantile(sorted, 0.5),
    p99Us: quantile(sorted, 0.99),
    maxUs: sorted[sorted.length - 1] ?? NaN,
    achievedPerS: ok / elapsed,
    workersChosen: chosen.size,
    cpuUsPerSelect: { service: per(cpuOf(peer.service.pid) - svc0), generator: per(gen.user + gen.system) },
    loadavg1m: Math.round(loadavg()[0]! * 100) / 100,
  };
}

/** `n` selects one at a time (one client, keep-alive): latency without any queueing of ours. */
async function serialSelects(peer: DynamoSelectPeer, bodies: readonly Buffer[], n: number): Promise<{ p50Us: number; p99Us: number; errors: number }> {
  const lat = new Float64Array(n);
  let ok = 0;
  let errors = 0;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await peer.post('/select', bodies[i % bodies.length]!, 5_000).catch(() => null);
    if (r !== null && r.status === 200) lat[ok++] = (performance.now() - t) * 1000;
    else errors++;
  }
  const sorted = lat.subarray(0, ok).sort();
  return { p50Us: quantile(sorted, 0.5), p99Us: quantile(sorted, 0.99), errors };
}

const sustained = (r: SelectRun): boolean => Object.keys(r.errors).length === 0 && r.ok === r.sent && r.achievedPerS >= 0.97 * r.rate && r.p99Us < P99_LIMIT_US;

/** Between runs: until a probe select is answered within 20 ms (the previous run's backlog drained), at most 15 s. */
async function settle(peer: DynamoSelectPeer, probe: Buffer): Promise<void> {
  const until = performance.now() + 15_000;
  while (performance.now() < until) {
    const t = performance.now();
    const fast = await peer.post('/select', probe, 5_000).then(
      (r) => r.status === 200 && performance.now() - t < 20,
      () => false,
    );
    if (fast) return;
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface PeerBenchOptions extends PeerOptions {
  /** Prompt scenarios, as the decision benchmark names them (default 32k-hashes,32k-token_ids). */
  readonly scenarios?: readonly string[];
  /** Fixed offered rates per scenario (default 500, 1000, 2000: the decision benchmark's). */
  readonly rates?: readonly number[];
  readonly seconds?: number;
  /** Rate search on every scenario: from, step, max (default 100, 100, 6000); below `from` by halves if `from` fails. */
  readonly searchFrom?: number;
  readonly searchStep?: number;
  readonly searchMax?: number;
  /** Selects sent before each scenario's measured runs (default 500, at 250/s). */
  readonly warmup?: number;
  /** Selects sent one at a time per scenario, after the warm-up (default 200). */
  readonly serial?: number;
}

interface PeerBenchResult {
  readonly dynamo_select_p50_us: number | null;
  readonly dynamo_select_p99_us: number | null;
  /** Highest sustained offered rate of the first scenario (no errors, achieved ≥ 97 %, p99 < 20 ms). */
  readonly dynamo_select_max_per_s: number;
  readonly dynamo_select_max_per_s_by_scenario: Record<string, number>;
  /** Highest achieved rate in the first scenario's fixed-rate runs (over-offered: its throughput, whatever the latency). */
  readonly dynamo_select_saturated_per_s: number;
  /** The first scenario's p50 at its lowest fixed rate. */
  readonly dynamo_select_p50_us_low_rate: number | null;
  /** The first scenario's p50 one select at a time. */
  readonly dynamo_select_serial_p50_us: number | null;
  readonly headline: string;
  readonly workers: number;
  readonly threads: number | null;
  readonly seconds_per_run: number;
  readonly sanity: Record<string, SanityResult>;
  /** Per scenario: selects one at a time. */
  readonly serial: readonly Record<string, unknown>[];
  readonly runs: readonly Record<string, unknown>[];
  readonly search: readonly Record<string, unknown>[];
}

const us = (x: number): number | null => (Number.isFinite(x) ? Math.round(x) : null);
const row = (r: SelectRun): Record<string, unknown> => ({
  prompt: r.label,
  rate: r.rate,
  select_p50_us: us(r.p50Us),
  select_p99_us: us(r.p99Us),
  select_max_us: us(r.maxUs),
  ok: r.ok,
  sent: r.sent,
  achieved_per_s: Math.round(r.achievedPerS),
  errors: r.errors,
  workers_chosen: r.workersChosen,
  cpu_us_per_select: r.cpuUsPerSelect,
  loadavg_1m: r.loadavg1m,
});

function scenario(label: string): { size: number; form: PromptForm } {
  const m = /^(\d+)k-(hashes|token_ids)$/.exec(label);
  if (!m) throw new Error(`unknown scenario ${label} (e.g. 32k-hashes, 128k-token_ids)`);
  return { size: Number(m[1]) * 1024, form: m[2] === 'hashes' ? 'block_hashes' : 'token_ids' };
}

/**
 * The whole peer benchmark: start the service with the workload, check its answers against ours, run
 * each scenario at the fixed rates and search its highest sustained rate, stop it.
 * The headline (`dynamo_select_p50_us`, `_p99_us`) is the first scenario at 1,000/s, or the first rate.
 */
export async function runDynamoSelectPeer(o: PeerBenchOptions = {}): Promise<PeerBenchResult> {
  const log = o.log ?? ((): void => {});
  const scenarios = o.scenarios ?? ['32k-hashes', '32k-token_ids'];
  const rates = o.rates ?? [500, 1000, 2000];
  const seconds = o.seconds ?? 4;
  const warmup = o.warmup ?? 500;
  const peer = await startDynamoSelectPeer(o);
  try {
    const sanity: Record<string, SanityResult> = {};
    for (const form of ['block_hashes', 'token_ids'] as const) {
      // Every session's prompt at several lengths: the longest overlap is held by different workers and sometimes shared (ties).
      const prompts = [];
      for (let s = 0; s < SESSIONS; s++) for (const k of [8, 32, 64, 128]) prompts.push(peer.sessionTokens[s]!.subarray(0, k * 1024));
      const r = await checkSelects(peer, prompts, form);
      sanity[form] = r;
      log(`sanity (${form}): ${r.longestOverlap}/${r.selects} chose a longest-overlap worker; same worker as ours ${r.sameWorkerAsOurs}, a tie broken otherwise ${r.tiedWithOurs}`);
      if (r.failures.length > 0) throw new Error(`the select service's answers disagree with ours: ${r.failures.slice(0, 3).join('; ')}`);
    }
    const runs: Record<string, unknown>[] = [];
    const search: Record<string, unknown>[] = [];
    let maxRate = 0;
    const maxBy: Record<string, number> = {};
    let head: SelectRun | null = null;
    let low: SelectRun | null = null;
    const serial: Record<string, unknown>[] = [];
    let serialHead = NaN;
    const line = (r: SelectRun, bytes: number): void =>
      log(
        `${r.label.padEnd(16)} ${String(r.rate).padStart(5)}/s ${(bytes / 1024).toFixed(0).padStart(5)} KiB | select p50 ${String(us(r.p50Us)).padStart(7)} p99 ${String(us(r.p99Us)).padStart(8)} µs ok ${r.ok}/${r.sent} (${r.achievedPerS.toFixed(0)}/s)` +
          ` | workers chosen ${r.workersChosen} | errors ${JSON.stringify(r.errors)} | cpu µs/select ${JSON.stringify(r.cpuUsPerSelect)} load ${r.loadavg1m}`,
      );
    for (const [k, label] of scenarios.entries()) {
      const { size, form } = scenario(label);
      const bodies = PROMPT_SESSIONS.map((s) => peer.body(peer.sessionTokens[s]!.subarray(0, size), form));
      await settle(peer, bodies[0]!);
      if (warmup > 0) await selectOpenLoop(peer, `warm ${label}`, bodies, 250, warmup / 250);
      const one = await serialSelects(peer, bodies, o.serial ?? 200);
      serial.push({ prompt: label, selects: o.serial ?? 200, select_p50_us: us(one.p50Us), select_p99_us: us(one.p99Us), errors: one.errors, loadavg_1m: Math.round(loadavg()[0]! * 100) / 100 });
      log(`${label.padEnd(16)} one at a time: select p50 ${us(one.p50Us)} p99 ${us(one.p99Us)} µs, ${one.errors} errors`);
      if (k === 0) serialHead = one.p50Us;
      for (const rate of rates) {
        await settle(peer, bodies[0]!);
        const r = await selectOpenLoop(peer, label, bodies, rate, seconds);
        line(r, bodies[0]!.length);
        runs.push({ ...row(r), payloadBytes: bodies[0]!.length });
        if (k === 0 && (head === null || rate === 1000)) head = r;
        if (k === 0 && (low === null || rate < low.rate)) low = r;
      }
      // Highest sustained rate: up in steps from searchFrom until a step fails; if searchFrom itself
      // fails, down by halves (to 10/s at the lowest) until one holds.
      const from = o.searchFrom ?? 100;
      let best = 0;
      const attempt = async (rate: number): Promise<boolean> => {
        await settle(peer, bodies[0]!);
        const r = await selectOpenLoop(peer, `search ${label}`, bodies, rate, seconds);
        const good = sustained(r);
        line(r, bodies[0]!.length);
        search.push({ ...row(r), sustained: good });
        if (good) best = Math.max(best, rate);
        return good;
      };
      if (await attempt(from)) {
        for (let rate = from + (o.searchStep ?? 100); rate <= (o.searchMax ?? 6000); rate += o.searchStep ?? 100) if (!(await attempt(rate))) break;
      } else {
        for (let rate = Math.floor(from / 2); rate >= 10; rate = Math.floor(rate / 2)) if (await attempt(rate)) break;
      }
      maxBy[label] = best;
      if (k === 0) maxRate = best;
      log(`max sustained offered rate (${label}, p99 < ${P99_LIMIT_US} µs, all answered): ${best} selects/s`);
    }
    const first = scenarios[0] ?? '';
    const saturated = runs.filter((r) => r['prompt'] === first).reduce((m, r) => Math.max(m, Number(r['achieved_per_s'])), 0);
    return {
      dynamo_select_p50_us: head === null ? null : us(head.p50Us),
      dynamo_select_p99_us: head === null ? null : us(head.p99Us),
      dynamo_select_max_per_s: maxRate,
      dynamo_select_max_per_s_by_scenario: maxBy,
      dynamo_select_saturated_per_s: saturated,
      dynamo_select_p50_us_low_rate: low === null ? null : us(low.p50Us),
      dynamo_select_serial_p50_us: us(serialHead),
      headline: head === null ? 'none' : `${head.label} @ ${head.rate}/s`,
      workers: peer.workers.length,
      threads: o.threads ?? null,
      seconds_per_run: seconds,
      sanity,
      serial,
      runs,
      search,
    };
  } finally {
    await peer.stop();
  }
}
