/**
 * `npm run bench:decision`: the `route` query over real NATS, against a bare
 * NATS request-reply echo of the same payload in the same run.
 *
 *   nats-server (private, 127.0.0.1, max_payload 8 MiB; or NATS_URL)
 *   2 indexers (child processes, one per pool), 64 simulated workers per pool
 *     whose KV state (registrations + stored prefixes) is published beforehand
 *   decision service (child process, variant cache: the most work per route)
 *   echo responder (child process: replies with the request's own bytes)
 *   load generator (this process): open loop at fixed rates for a bounded time,
 *     latency measured from the *scheduled* send time (no coordinated omission),
 *     then a closed loop to find the saturation throughput.
 *
 * Prompts: 32k and 128k tokens per candidate, as block hashes (the gateway
 * client's default) and as token ids (the decision service hashes them).
 * Requests are pre-encoded once per scenario; each send patches a fixed-width
 * request id into the bytes so every route is a distinct request (bookings).
 * Each reply is followed by a `done` lifecycle event, as a gateway would, so
 * booked load stays bounded.
 *
 * Environment: BENCH_SECONDS (default 4), BENCH_RATES (default 500,2000),
 * NATS_URL (use an existing server; token-id requests for 128k prompts need
 * max_payload >= 2 MiB).
 *
 * The machine has 2 shared cores: nats-server, both indexers, the decision
 * service and this generator compete for them, so absolute figures are
 * pessimistic; the echo baseline runs under the same conditions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { GatewayClient } from '@vantage/gateway-client';
import { ensureNatsServer, freePort, INFRA_DIR, REPO_ROOT, waitFor, tcpOpen } from '@vantage/infra';
import { lifecycleEventCodec, lifecycleSubject, routeReplyCodec, workerRegistrationCodec, workersSubject } from '@vantage/protocol';
import { createParameterSet, DEFAULT_PARAMETER_SET, serializeParameterSet } from '@vantage/rules';
import type { KvEvent, WorkerId } from '@vantage/types';
import { encodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';

const BLOCK = 64;
const WORKERS = 64;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const RATES = (process.env.BENCH_RATES ?? '500,2000').split(',').map(Number);
const SESSIONS = 8;
const POOLS = { efficient: { model: 'bench-8b', pool: 'bench-eff', ns: 'benchE' }, capable: { model: 'bench-70b', pool: 'bench-cap', ns: 'benchC' } } as const;
const ROLES = ['efficient', 'capable'] as const;

const dir = join(INFRA_DIR, 'bench', `decision-${process.pid}-${Date.now()}`);
mkdirSync(dir, { recursive: true });
const children: ChildProcess[] = [];
const log = (s: string): void => void process.stderr.write(`${s}\n`);

function child(name: string, args: string[], env: Record<string, string>): ChildProcess {
  const c = spawn(process.execPath, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  c.stderr?.on('data', (d: Buffer) => log(`[${name}] ${d.toString().trimEnd()}`));
  children.push(c);
  return c;
}

async function startNats(): Promise<string> {
  if (process.env.NATS_URL) return process.env.NATS_URL;
  const bin = await ensureNatsServer();
  const port = await freePort();
  const conf = join(dir, 'nats.conf');
  // max_payload 8 MiB: a 128k-token prompt as token ids for two candidates is ~1.6 MB of JSON, over the 1 MiB default.
  writeFileSync(conf, `listen: 127.0.0.1:${port}\nmax_payload: 8388608\njetstream { store_dir: "${join(dir, 'js')}" }\n`);
  const c = spawn(bin, ['-c', conf], { stdio: 'ignore' });
  children.push(c);
  await waitFor('nats-server', () => tcpOpen('127.0.0.1', port), 15_000);
  return `nats://127.0.0.1:${port}`;
}

function tokensFor(session: number, n: number): Uint32Array {
  const t = new Uint32Array(n);
  let x = (session + 1) * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    t[i] = x % 150_000;
  }
  return t;
}

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

interface RunResult {
  name: string;
  rate: number;
  sent: number;
  ok: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
  achieved: number;
}

/** Fixed-width request id patched into pre-encoded bytes. */
const ID_PLACEHOLDER = 'REQ-XXXXXXXXXXXX';

function template(bytes: Uint8Array): { bytes: Uint8Array; at: number } {
  const s = Buffer.from(bytes);
  const at = s.indexOf(ID_PLACEHOLDER);
  if (at < 0) throw new Error('placeholder not found');
  return { bytes: new Uint8Array(s), at };
}

let idSeq = 0;
function nextId(): string {
  return `REQ-${(idSeq++).toString(36).padStart(12, '0')}`;
}

async function openLoop(
  name: string,
  rate: number,
  seconds: number,
  send: (id: string) => Promise<{ ok: boolean; pool?: string | null; worker?: bigint | null }>,
  nc: NatsConnection,
  sendDone: boolean,
): Promise<RunResult> {
  const total = Math.round(rate * seconds);
  const lat = new Float64Array(total);
  let ok = 0;
  let errors = 0;
  let n = 0;
  const maxInFlight = 4096;
  let inFlight = 0;
  const t0 = performance.now();
  const interval = 1000 / rate;
  await new Promise<void>((resolve) => {
    let finished = 0;
    const tick = (): void => {
      const now = performance.now();
      const due = Math.min(total, Math.floor((now - t0) / interval) + 1);
      while (n < due) {
        const scheduled = t0 + n * interval;
        n++;
        if (inFlight >= maxInFlight) {
          errors++;
          finished++;
          continue;
        }
        inFlight++;
        const id = nextId();
        send(id).then(
          (r) => {
            const l = (performance.now() - scheduled) * 1000;
            inFlight--;
            if (r.ok) lat[ok++] = l;
            else errors++;
            if (sendDone && r.ok && r.pool) {
              nc.publish(lifecycleSubject(r.pool), lifecycleEventCodec.encode({ requestId: id, sessionId: 'bench', pool: r.pool, kind: 'done', atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null }));
            }
            if (++finished === total) resolve();
          },
          () => {
            inFlight--;
            errors++;
            if (++finished === total) resolve();
          },
        );
      }
      if (n < total) setTimeout(tick, Math.max(0, Math.min(interval, t0 + n * interval - performance.now())));
    };
    tick();
  });
  const elapsed = (performance.now() - t0) / 1000;
  const sorted = lat.subarray(0, ok).sort();
  return { name, rate, sent: total, ok, errors, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1] ?? NaN, achieved: ok / elapsed };
}

async function closedLoop(seconds: number, concurrency: number, send: (id: string) => Promise<{ ok: boolean; pool?: string | null }>, nc: NatsConnection): Promise<{ perSecond: number; p50: number; p99: number }> {
  const end = performance.now() + seconds * 1000;
  const lat: number[] = [];
  let done = 0;
  const workers = Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const id = nextId();
      const t = performance.now();
      const r = await send(id).catch(() => ({ ok: false, pool: null }));
      if (r.ok) {
        lat.push((performance.now() - t) * 1000);
        done++;
        if (r.pool) nc.publish(lifecycleSubject(r.pool), lifecycleEventCodec.encode({ requestId: id, sessionId: 'bench', pool: r.pool, kind: 'done', atMs: Date.now(), workerId: null, dpRank: null, usage: null, error: null }));
      }
    }
  });
  const t0 = performance.now();
  await Promise.all(workers);
  const sorted = Float64Array.from(lat).sort();
  return { perSecond: done / ((performance.now() - t0) / 1000), p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}

async function main(): Promise<void> {
  const url = await startNats();
  log(`nats ${url}; ${WORKERS} workers per pool, block ${BLOCK}, ${SECONDS}s per run, rates ${RATES.join(',')}`);
  const nc = await connect({ servers: url });

  // Indexers (one per pool) and the echo responder, as child processes.
  const common = { VANTAGE_NATS_URL: url, VANTAGE_LOG_LEVEL: 'warn', NODE_ENV: 'production' };
  for (const role of ROLES) {
    const p = POOLS[role];
    child(`indexer-${role}`, ['--import', 'tsx', 'services/indexer/src/main.ts'], {
      ...common,
      VANTAGE_INDEXER_POOLS: JSON.stringify([{ name: p.pool, blockSize: BLOCK, namespace: p.ns, component: 'backend' }]),
      VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
      VANTAGE_INDEXER_WORKER_TTL_MS: '3600000',
    });
  }
  const echoSubject = 'bench.echo';
  child('echo', ['--input-type=module', '-e', `import { connect } from '@nats-io/transport-node'; const nc = await connect({ servers: ${JSON.stringify(url)} }); nc.subscribe(${JSON.stringify(echoSubject)}, { callback: (e, m) => { if (!e) m.respond(m.data); } }); await nc.flush(); process.stderr.write('echo ready\\n');`], common);

  // Parameter set: variant cache with the development tables (the most work per decision).
  const fitted = createParameterSet({
    variant: 'cache',
    models: { efficient: { ...DEFAULT_PARAMETER_SET.models.efficient, name: POOLS.efficient.model }, capable: { ...DEFAULT_PARAMETER_SET.models.capable, name: POOLS.capable.model } },
    thresholds: { r: null, p: null },
    margins: { deltaBlindMs: 250, deltaCacheMs: 250 },
    gate: { maxAgeMs: 1000, destinationLimit: 1_000_000, localLimit: 1_000_000 },
    provenance: { source: 'bench' },
  });
  if (!fitted.ok) throw new Error(fitted.errors.join('; '));
  const paramsFile = join(dir, 'params.json');
  writeFileSync(paramsFile, serializeParameterSet(fitted.value));

  // An indexer answers an empty observe with a BAD_REQUEST reply (headers): any reply means it is up.
  await waitFor(
    'indexers',
    async () => {
      for (const role of ROLES) {
        const up = await nc.request(`vantage.v1.observe.${POOLS[role].pool}`, new TextEncoder().encode('{}'), { timeout: 500 }).then(() => true, () => false);
        if (!up) return false;
      }
      return true;
    },
    60_000,
    200,
  );

  // Workers: registrations and KV state (each worker holds a prefix of one session's 128k prompt).
  const prompts = new Map<number, Uint32Array>();
  for (let s = 0; s < SESSIONS; s++) prompts.set(s, tokensFor(s, 131072));
  const hasher = new GatewayClient({ nc, pools: { efficient: { ...POOLS.efficient, blockSize: BLOCK }, capable: { ...POOLS.capable, blockSize: BLOCK } } });
  const sessionHashes = [...prompts.values()].map((t) => hasher.hashPrompt('efficient', t));
  for (const role of ROLES) {
    const p = POOLS[role];
    for (let w = 0; w < WORKERS; w++) {
      const workerId = BigInt(1000 + w + (role === 'capable' ? 100_000 : 0)) as WorkerId;
      nc.publish(
        workersSubject(p.pool),
        workerRegistrationCodec.encode({
          kind: 'register',
          pool: p.pool,
          workerId,
          atMs: Date.now(),
          capacity: { blockSize: BLOCK, totalKvBlocks: 65536, maxNumBatchedTokens: 8192, maxNumSeqs: 256, dpStartRank: 0, dpSize: 1, schedulable: true },
          ttlMs: 3_600_000,
          endpoint: `http://${p.pool}-${w}:8000`,
          model: p.model,
        }),
      );
      const h = sessionHashes[w % SESSIONS]!;
      const held = Math.floor((h.length * ((w % 7) + 1)) / 8);
      const event: KvEvent = { workerId, dpRank: 0, storageTier: 'device', eventId: 1n, data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: h.slice(0, held).map((x) => x ^ 0xabcdn), tokensHashes: h.slice(0, held) } };
      nc.publish(kvEventsSubject(p.ns, 'backend'), encodeEventPlaneMessage({ publisherId: workerId, sequence: 1n, publishedAtMs: BigInt(Date.now()) }, { kind: 'kv_event', event }));
    }
  }
  await nc.flush();

  // Decision service (after the workers are known, so the first routes see them).
  child('decision', ['--import', 'tsx', 'services/decision/src/main.ts'], {
    ...common,
    VANTAGE_DECISION_POOLS_EFFICIENT_MODEL: POOLS.efficient.model,
    VANTAGE_DECISION_POOLS_EFFICIENT_POOL: POOLS.efficient.pool,
    VANTAGE_DECISION_POOLS_EFFICIENT_BLOCK_SIZE: String(BLOCK),
    VANTAGE_DECISION_POOLS_CAPABLE_MODEL: POOLS.capable.model,
    VANTAGE_DECISION_POOLS_CAPABLE_POOL: POOLS.capable.pool,
    VANTAGE_DECISION_POOLS_CAPABLE_BLOCK_SIZE: String(BLOCK),
    VANTAGE_DECISION_PARAMETER_SET_FILE: paramsFile,
    VANTAGE_DECISION_OBSERVE_TIMEOUT_MS: '250',
    VANTAGE_DECISION_MAX_IN_FLIGHT: '8192',
  });
  const client = new GatewayClient({ nc, routeTimeoutMs: 5000, pools: { efficient: { ...POOLS.efficient, blockSize: BLOCK }, capable: { ...POOLS.capable, blockSize: BLOCK } } });
  const probeBody = client.encodeRoute({ requestId: 'warm', sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompts.get(0)!.subarray(0, 1024) }, capable: { tokenIds: prompts.get(0)!.subarray(0, 1024) } } });
  await waitFor('decision service', async () => client.routeEncoded(probeBody).then((r) => r.observations.efficient?.workerId != null && r.observations.capable?.workerId != null, () => false), 60_000, 250);

  const results: RunResult[] = [];
  const scenarios: { size: number; form: 'hashes' | 'token_ids' }[] = [
    { size: 32768, form: 'hashes' },
    { size: 131072, form: 'hashes' },
    { size: 32768, form: 'token_ids' },
    { size: 131072, form: 'token_ids' },
  ];
  let overrides = 0;
  let fallbacks = 0;
  const fallbackReasons = new Map<string, number>();
  const summary: Record<string, unknown>[] = [];
  for (const sc of scenarios) {
    // Several sessions' prompts so that different workers are chosen.
    const tpls = [0, 1, 2, 3].map((s) => {
      const t = prompts.get(s)!.subarray(0, sc.size);
      return template(client.encodeRoute({ requestId: ID_PLACEHOLDER, sessionId: `bench-${s}`, stageProposal: 'efficient', sendTokenIds: sc.form === 'token_ids', prompts: { efficient: { tokenIds: t }, capable: { tokenIds: t } } }));
    });
    const payloadBytes = tpls[0]!.bytes.length;
    let k = 0;
    const bodyFor = (id: string): Uint8Array => {
      const tp = tpls[k++ % tpls.length]!;
      const b = tp.bytes.slice();
      Buffer.from(b.buffer, b.byteOffset, b.byteLength).write(id, tp.at, 'latin1');
      return b;
    };
    const route = async (id: string) => {
      const m = await nc.request('vantage.v1.route', bodyFor(id), { timeout: 5000 });
      const r = routeReplyCodec.decode(m.data);
      if (!r.ok) return { ok: false };
      if (r.value.reason === 'overrode') overrides++;
      if (r.value.reason === 'fallback') {
        fallbacks++;
        const f = r.value.fallback ?? '?';
        fallbackReasons.set(f, (fallbackReasons.get(f) ?? 0) + 1);
      }
      return { ok: true, pool: r.value.pool, worker: r.value.workerId };
    };
    const echo = async (id: string) => {
      await nc.request(echoSubject, bodyFor(id), { timeout: 5000 });
      return { ok: true };
    };
    const label = `${sc.size / 1024}k-${sc.form}`;
    // Warm-up (JIT, connections).
    await openLoop(`warm ${label}`, 200, 1, route, nc, true);
    for (const rate of RATES) {
      // Token ids at 128k are far beyond one core at 2,000/s; bound the run rather than queue for minutes.
      const seconds = sc.form === 'token_ids' && sc.size > 32768 && rate > 500 ? Math.min(SECONDS, 2) : SECONDS;
      const e = await openLoop(`echo ${label}`, rate, seconds, echo, nc, false);
      const r = await openLoop(`route ${label}`, rate, seconds, route, nc, true);
      results.push(e, r);
      log(
        `${label.padEnd(16)} ${String(rate).padStart(5)}/s  payload ${(payloadBytes / 1024).toFixed(0).padStart(5)} KiB | route p50 ${r.p50.toFixed(0).padStart(7)} µs p99 ${r.p99.toFixed(0).padStart(8)} µs ok ${r.ok}/${r.sent} (${r.achieved.toFixed(0)}/s) | echo p50 ${e.p50.toFixed(0).padStart(6)} µs p99 ${e.p99.toFixed(0).padStart(7)} µs | route-echo p50 ${(r.p50 - e.p50).toFixed(0)} µs`,
      );
      summary.push({ prompt: label, rate, payloadBytes, route_p50_us: Math.round(r.p50), route_p99_us: Math.round(r.p99), route_ok: r.ok, route_sent: r.sent, route_achieved_per_s: Math.round(r.achieved), echo_p50_us: Math.round(e.p50), echo_p99_us: Math.round(e.p99) });
    }
  }

  // Saturation: closed loop on 32k block-hash requests.
  const tp = template(client.encodeRoute({ requestId: ID_PLACEHOLDER, sessionId: 'sat', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompts.get(0)!.subarray(0, 32768) }, capable: { tokenIds: prompts.get(0)!.subarray(0, 32768) } } }));
  const sat = await closedLoop(SECONDS, 64, async (id) => {
    const b = tp.bytes.slice();
    Buffer.from(b.buffer, b.byteOffset, b.byteLength).write(id, tp.at, 'latin1');
    const m = await nc.request('vantage.v1.route', b, { timeout: 5000 });
    const r = routeReplyCodec.decode(m.data);
    return r.ok ? { ok: true, pool: r.value.pool } : { ok: false };
  }, nc);
  log(`saturation (closed loop, 64 concurrent, 32k hashes): ${sat.perSecond.toFixed(0)} routes/s, p50 ${sat.p50.toFixed(0)} µs, p99 ${sat.p99.toFixed(0)} µs`);
  log(`routes overrode ${overrides}, fell back ${fallbacks} ${JSON.stringify(Object.fromEntries(fallbackReasons))}`);

  const head = summary.find((s) => s.prompt === '32k-hashes' && s.rate === Math.max(...RATES)) ?? summary[0]!;
  const head500 = summary.find((s) => s.prompt === '32k-hashes' && s.rate === Math.min(...RATES)) ?? head;
  await nc.close();
  process.stdout.write(
    `${JSON.stringify({
      bench: 'decision',
      headline: `32k-hashes @ ${String(head.rate)}/s`,
      route_p50_us: head.route_p50_us,
      route_p99_us: head.route_p99_us,
      echo_p50_us: head.echo_p50_us,
      echo_p99_us: head.echo_p99_us,
      route_p50_us_low_rate: head500.route_p50_us,
      echo_p50_us_low_rate: head500.echo_p50_us,
      max_routes_per_s: Math.round(sat.perSecond),
      saturation_p99_us: Math.round(sat.p99),
      workers_per_pool: WORKERS,
      seconds_per_run: SECONDS,
      scenarios: summary,
    })}\n`,
  );
}

const cleanup = (): void => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  setTimeout(() => rmSync(dir, { recursive: true, force: true }), 500).unref();
};
main()
  .then(() => {
    cleanup();
    setTimeout(() => process.exit(0), 1000).unref();
  })
  .catch((e: unknown) => {
    log(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    cleanup();
    setTimeout(() => process.exit(1), 1000).unref();
  });
