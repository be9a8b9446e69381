/**
 * Live mode end to end over a real nats-server: the fleet (2 workers per pool,
 * time scaled) and an indexer run in this process through runService; the load
 * generator routes ~20 requests in `direct` mode by asking the indexer for
 * Dynamo's choice. Checks: the wire format as the indexer consumes it, the
 * indexer sees the fleet's cached prefixes on the workers that served them,
 * registrations made the workers schedulable (exact u64 ids past 2^63), every
 * request completed with TTFT > 0, competing traffic is booked on both pools
 * with lifecycle events marked background (with arrivalMs), and shutdown
 * deregisters.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexerConfigSchema, startIndexer, type IndexerHandle } from '@vantage/indexer';
import { backgroundTraffic, DEFAULT_BACKGROUND_TRAFFIC, evaluationBackgroundSessionId } from '@vantage/evaluation';
import { lifecycleEventCodec, lifecycleSubject, observeReplyCodec, observeRequestCodec, observeSubject, type LifecycleEvent, type ObserveReply } from '@vantage/protocol';
import { connectNats, createLogger, request, runService, type NatsConnection, type RunningService } from '@vantage/runtime';
import { MooncakePromptHasher, type MooncakeRecord } from '@vantage/sim';
import { eventually, natsUrl, uniqueName } from '@vantage/testkit';
import { decodeEventPlaneMessage, kvEventsSubject } from '@vantage/wire';
import { fleetConfigSchema, type FleetSettings } from '../src/config';
import { runLoadgen, type LoadgenSummary, type RequestOutcome } from '../src/load-generator';
import { startFleet, type FleetHandle } from '../src/service';

const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
const log = createLogger({ service: 'fleet-test', instanceId: 'test', level: 'silent' });
const TIME_SCALE = 4;

/** 20 requests, 4 prompt families: each family shares its first 3 Mooncake blocks (1,536 tokens); tails differ. */
function records(): MooncakeRecord[] {
  return Array.from({ length: 20 }, (_, k) => {
    const fam = k % 4;
    const hashIds = Uint32Array.from([fam * 100 + 1, fam * 100 + 2, fam * 100 + 3, 10_000 + k]);
    return { line: k + 1, timestampMs: k * 150, inputLength: 3 * 512 + 100 + k, outputLength: 12 + (k % 5), hashIds };
  });
}

describe('simulated fleet, live mode', () => {
  // One Dynamo namespace per pool: `kv_metrics` is namespace-scoped, and the indexer (today) takes every load
  // report on its namespace as one of its pool's workers, so two pools in one namespace would see each other's.
  const ns = uniqueName('ns');
  const nsCap = uniqueName('ns');
  const eff = uniqueName('eff');
  const cap = uniqueName('cap');
  let nc: NatsConnection;
  let indexerSvc: RunningService<never, false> | undefined;
  let indexer!: IndexerHandle;
  let fleetSvc: RunningService<FleetSettings, false> | undefined;
  let fleet!: FleetHandle;
  const raw: { subject: string; data: Uint8Array }[] = [];
  let run!: { outcomes: RequestOutcome[]; summary: LoadgenSummary };

  const observe = async (pool: string, local: BigUint64Array, n: number): Promise<ObserveReply> => {
    const m = await request(nc, observeSubject(pool), observeRequestCodec.encode({ requestId: null, prompt: { kind: 'local_hashes', localHashes: local, loraName: null }, promptTokens: n }), {
      timeoutMs: 5000,
    });
    const r = observeReplyCodec.decode(m.data);
    if (!r.ok) throw new Error(r.reason);
    return r.value;
  };

  beforeAll(async () => {
    nc = await connectNats({ url: natsUrl(), name: 'fleet-test', reconnectTimeWaitMs: 200, reconnectJitterMs: 0, maxReconnectAttempts: -1, connectTimeoutMs: 5000 }, log);
    const common = { VANTAGE_NATS_URL: natsUrl(), VANTAGE_LOG_LEVEL: 'silent', VANTAGE_SHUTDOWN_DEADLINE_MS: '5000' };
    const overrides = { exit: () => {}, signals: [] as NodeJS.Signals[], processHandlers: false };
    indexerSvc = (await runService({
      name: 'indexer',
      schema: indexerConfigSchema,
      env: {
        ...common,
        VANTAGE_INDEXER_POOLS: JSON.stringify([
          { name: eff, namespace: ns, component: 'efficient', blockSize: 64 },
          { name: cap, namespace: nsCap, component: 'capable', blockSize: 64 },
        ]),
        VANTAGE_INDEXER_SNAPSHOT_INTERVAL_MS: '0',
      },
      ...overrides,
      async start(ctx) {
        indexer = await startIndexer(ctx);
      },
    })) as unknown as RunningService<never, false>;
    // A raw subscriber sees exactly what the indexer sees, to check the envelopes themselves.
    nc.subscribe(kvEventsSubject(ns, 'efficient'), {
      callback: (_e, m) => {
        raw.push({ subject: m.subject, data: m.data });
      },
    });
    await nc.flush();
    fleetSvc = await runService<FleetSettings, false>({
      name: 'fleet',
      schema: fleetConfigSchema,
      env: {
        ...common,
        VANTAGE_FLEET_POOLS: JSON.stringify([
          { name: eff, workers: 2, namespace: ns, component: 'efficient', blockSize: 64, speed: 1.0 },
          { name: cap, workers: 2, namespace: nsCap, component: 'capable', speed: 0.6 },
        ]),
        VANTAGE_FLEET_TIME_SCALE: String(TIME_SCALE),
      },
      ...overrides,
      async start(ctx) {
        fleet = await startFleet(ctx);
      },
    });
  });

  afterAll(async () => {
    await fleetSvc?.stop('test over');
    await indexerSvc?.stop('test over');
    await nc?.drain();
  });

  it('registers every worker as schedulable, with exact u64 ids', async () => {
    for (const pool of [eff, cap]) {
      const ids = fleet.pools.get(pool)!;
      expect(ids).toHaveLength(2);
      expect(ids.some((id) => id >= 1n << 63n)).toBe(true);
      await eventually(`${pool}: both workers registered`, () => ids.every((id) => indexer.runners.get(pool)!.state.registration(id)?.capacity.schedulable === true));
      await eventually(`${pool}: observe lists both workers as schedulable`, async () => {
        const r = await observe(pool, new BigUint64Array([1n]), 64);
        return r.workers.length === 2 && r.workers.every((w) => w.schedulable) && ids.every((id) => r.workers.some((w) => w.workerId === id));
      });
    }
  });

  it('serves 20 trace requests routed by Dynamo\'s choice from the indexer; every one completes with TTFT > 0', async () => {
    const lines: string[] = [];
    run = await runLoadgen({
      nc,
      pools: { efficient: { name: eff, blockSize: 64, model: 'm-eff' }, capable: { name: cap, blockSize: 64, model: 'm-cap' } },
      workload: { kind: 'trace', records: records(), speedup: 1 },
      mode: { kind: 'direct', role: 'efficient', book: true },
      timeScale: TIME_SCALE,
      maxDurationMs: 60_000,
      requestTimeoutMs: 30_000,
      progress: (l) => lines.push(l),
      progressEveryMs: 200,
    });
    const { summary, outcomes } = run;
    expect(summary).toMatchObject({ requests: 20, completed: 20, errors: 0, cancelled: 0, routeErrors: 0, notIssued: 0, reasons: { direct: 20 }, perModel: { 'm-eff': 20 } });
    for (const o of outcomes) {
      expect(o.status).toBe('done');
      expect(o.ttftMs).toBeGreaterThan(0);
      expect(o.e2eMs).toBeGreaterThan(o.ttftMs!);
      expect(o.outputTokens).toBe(o.osl);
      expect(fleet.pools.get(eff)!.map(String)).toContain(o.workerId);
    }
    // Repeats of a family on the worker that already served it reuse the shared 1,536-token prefix.
    expect(summary.prefixReuseRatio).toBeGreaterThan(0);
    expect(outcomes.some((o) => (o.reusedTokens ?? 0) >= 1536)).toBe(true);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines[0]).toMatch(/^loadgen .* issued \d+\/20/);
  });

  it('the indexer shows each served prompt cached (K > 0) on the worker that served it', async () => {
    const hasher = new MooncakePromptHasher(64);
    const recs = records();
    for (const o of run.outcomes) {
      const rec = recs[Number(o.requestId.slice(o.requestId.lastIndexOf('-') + 1))]!;
      const p = hasher.prompt(rec.hashIds, rec.inputLength);
      const reply = await observe(eff, p.local, rec.inputLength);
      const w = reply.workers.find((x) => String(x.workerId) === o.workerId)!;
      expect(w, `worker ${o.workerId} in observe`).toBeDefined();
      expect(w.K).toBeGreaterThanOrEqual(1536);
      expect(w.K).toBe(p.local.length * 64);
      expect(w.suspect).toBeNull();
    }
    // Completed requests released their bookings through the lifecycle events.
    await eventually('bookings released', () => indexer.runners.get(eff)!.state.ledger.size === 0);
  });

  it('publishes real-format envelopes: publisher = worker, sequence from 0, consecutive event ids', () => {
    const byPublisher = new Map<bigint, { seq: bigint[]; ids: bigint[] }>();
    for (const m of raw) {
      const r = decodeEventPlaneMessage(m.data, { topic: m.subject });
      expect(r.ok).toBe(true);
      if (!r.ok || r.value.kind !== 'kv_event') continue;
      const { envelope, event } = r.value;
      expect(envelope.publisherId).toBe(event.workerId);
      expect(envelope.topic).toBe('kv-events');
      expect(Number(envelope.publishedAtMs)).toBeGreaterThan(Date.now() - 120_000);
      const e = byPublisher.get(envelope.publisherId) ?? { seq: [], ids: [] };
      e.seq.push(envelope.sequence);
      e.ids.push(event.eventId);
      byPublisher.set(envelope.publisherId, e);
    }
    expect([...byPublisher.keys()].sort()).toEqual([...fleet.pools.get(eff)!].sort());
    for (const { seq, ids } of byPublisher.values()) {
      expect(seq.length).toBeGreaterThan(0);
      seq.forEach((s, i) => expect(s).toBe(BigInt(i)));
      ids.forEach((id, i) => expect(id).toBe(BigInt(i + 1)));
    }
  });

  it('the CLI runs a trace file in direct mode and prints the summary as its last stdout line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleet-loadgen-'));
    try {
      const file = join(dir, 'trace.jsonl');
      writeFileSync(
        file,
        records()
          .slice(0, 6)
          .map((r) => JSON.stringify({ timestamp: r.timestampMs, input_length: r.inputLength, output_length: r.outputLength, hash_ids: [...r.hashIds] }))
          .join('\n'),
      );
      const args = ['--import', 'tsx', 'services/fleet/src/loadgen.ts', '--trace', file, '--limit', '5', '--speedup', '2', '--direct', '--pools', `${eff}:64,${cap}:64`];
      args.push('--time-scale', String(TIME_SCALE), '--nats', natsUrl(), '--max-duration-ms', '30000');
      const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((res) => {
        const t = setTimeout(() => child.kill('SIGKILL'), 60_000);
        child.once('exit', (c) => {
          clearTimeout(t);
          res(c);
        });
      });
      expect(code, err).toBe(0);
      const summary = JSON.parse(out.trim().split('\n').pop()!) as LoadgenSummary;
      expect(summary).toMatchObject({ requests: 5, completed: 5, errors: 0, mode: `direct:${eff}` });
      expect(summary.ttftMs.p50).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('plays competing traffic beside the workload: booked by Dynamo\'s choice on its pool, lifecycle marked background with arrivalMs', async () => {
    const events: LifecycleEvent[] = [];
    const subs = [eff, cap].map((pool) =>
      nc.subscribe(lifecycleSubject(pool), {
        callback: (_e, m) => {
          const r = lifecycleEventCodec.decode(m.data);
          if (r.ok) events.push(r.value);
        },
      }),
    );
    await nc.flush();
    // 4 streams of 3: twelve background requests wait for their arrival at once, each listening for
    // the run's deadline (more than Node's default of 10 listeners: no warning may be printed).
    const plan = backgroundTraffic({ ...DEFAULT_BACKGROUND_TRAFFIC, streams: 4, requestsPerStream: 3, meanGapMs: 300, promptTokens: { min: 256, max: 512 }, outputTokens: { min: 4, max: 8 } });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    const before = Date.now();
    const r = await runLoadgen({
      nc,
      pools: { efficient: { name: eff, blockSize: 64, model: 'm-eff' }, capable: { name: cap, blockSize: 64, model: 'm-cap' } },
      workload: { kind: 'trace', records: records().slice(0, 3), speedup: 1 },
      mode: { kind: 'direct', role: 'efficient', book: true },
      background: { requests: plan, sessionIdOf: (s) => evaluationBackgroundSessionId(0, 'baseline', s) },
      timeScale: TIME_SCALE,
      maxDurationMs: 60_000,
      requestTimeoutMs: 30_000,
    });
    await nc.flush();
    process.off('warning', onWarning);
    for (const s of subs) s.unsubscribe();
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
    expect(r.summary).toMatchObject({ requests: 3, completed: 3, background: { requests: plan.length, completed: plan.length } });
    expect(r.outcomes.every((o) => !o.sessionId.startsWith('evalbg:'))).toBe(true);
    expect(r.backgroundOutcomes).toHaveLength(plan.length);
    for (const o of r.backgroundOutcomes) {
      expect(o.status).toBe('done');
      expect(o.reason).toBe('background');
      expect(o.sessionId).toMatch(/^evalbg:0:baseline:[0-3]$/);
      expect(o.ttftMs).toBeGreaterThan(0);
    }
    expect(new Set(r.backgroundOutcomes.map((o) => o.pool))).toEqual(new Set(plan.map((p) => (p.role === 'capable' ? cap : eff))));
    const bgIds = new Set(r.backgroundOutcomes.map((o) => o.requestId));
    const bgEvents = events.filter((e) => bgIds.has(e.requestId));
    expect(new Set(bgEvents.map((e) => e.kind))).toEqual(new Set(['first_token', 'done', 'usage']));
    for (const e of bgEvents) {
      expect(e.background).toBe(true);
      expect(e.arrivalMs).toBeGreaterThanOrEqual(before);
      expect(e.arrivalMs).toBeLessThanOrEqual(e.atMs);
    }
    // Every first_token of a request carries the same arrival as its done.
    for (const id of bgIds) expect(new Set(bgEvents.filter((e) => e.requestId === id).map((e) => e.arrivalMs)).size).toBe(1);
    for (const e of events.filter((x) => !bgIds.has(x.requestId))) {
      expect(e.background).toBe(false);
      expect(e.arrivalMs).toBeNull();
    }
    await eventually('background bookings released', () => indexer.runners.get(eff)!.state.ledger.size === 0 && indexer.runners.get(cap)!.state.ledger.size === 0);
  });

  it('deregisters every worker on shutdown', async () => {
    const report = await fleetSvc!.stop('test');
    fleetSvc = undefined;
    expect(report.exitCode).toBe(0);
    for (const pool of [eff, cap]) {
      await eventually(`${pool}: workers deregistered`, () => fleet.pools.get(pool)!.every((id) => indexer.runners.get(pool)!.state.registration(id) === undefined));
    }
  });
});
