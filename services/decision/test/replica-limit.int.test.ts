// Two decision replicas with local pools in one queue group over real NATS (both in this process, each
// with its own connection, pools and route server): the gate's destination limit holds across the
// replicas up to their in-flight race. (How soon one replica's booking reaches the other, each in its
// own process, is `replica-visibility.int.test.ts`.)
//
// Times come from the replicas' own ledgers: each replica's capable-pool `ledger.book` and its
// `pools.book` (the route's local booking) are wrapped to note when a request id entered that ledger,
// so a booking's maker and the moment the other replica applied it are read, not guessed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteArgs } from '@vantage/gateway-client';
import type { RouteReply } from '@vantage/protocol';
import type { RunningService } from '@vantage/runtime';
import { eventually } from '@vantage/testkit';
import type { WorkerId } from '@vantage/types';
import type { DecisionHandle, DecisionSettings } from '../src/index';
import { BLOCK, Harness, logSink, parameterSet, tokens } from './harness';

/** The gate's destination limit: a route overrides to capable only while the capable worker's R < L. */
const L = 8;

interface Replica {
  readonly name: 'a' | 'b';
  readonly handle: DecisionHandle;
  /** Request ids this replica booked itself (its routes), with the time of the local booking. */
  readonly own: Map<string, number>;
  /** Every request id that entered this replica's capable ledger (its own and the other's), with the time. */
  readonly applied: Map<string, number>;
  /** Resolved when a request id enters this replica's capable ledger (no polling while a booking travels). */
  readonly waiting: Map<string, () => void>;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)]!;
};

describe('two decision replicas share one destination limit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vantage-replica-limit-'));
  // Count rule, r = 1: one background booking on the efficient worker makes every efficient proposal
  // override to capable, so the destination limit is the only gate a route meets (localLimit far above).
  const h = new Harness(join(dir, 'params.json'), { source: 'local', decisionEnv: { VANTAGE_INSTANCE_ID: 'replica-a', VANTAGE_DECISION_RECORDS_ENABLED: 'false', VANTAGE_LOG_LEVEL: 'warn' } });
  const E = 61n as WorkerId;
  const C = 62n as WorkerId;
  const prompt = tokens(16 * BLOCK, 11);
  let hashes: BigUint64Array;
  let bSvc: RunningService<DecisionSettings, false> | undefined;
  let A: Replica;
  let B: Replica;
  let seq = 0;

  const instrument = (name: 'a' | 'b', handle: DecisionHandle): Replica => {
    const r: Replica = { name, handle, own: new Map(), applied: new Map(), waiting: new Map() };
    const ledger = handle.pools.get('capable')!.state.ledger;
    const book = ledger.book.bind(ledger);
    ledger.book = (input) => {
      const out = book(input);
      if (!r.applied.has(input.requestId)) r.applied.set(input.requestId, performance.now());
      r.waiting.get(input.requestId)?.();
      return out;
    };
    const pools = handle.pools;
    const localBook = pools.book.bind(pools);
    pools.book = (role, b) => {
      if (role === 'capable') r.own.set(b.requestId, performance.now());
      return localBook(role, b);
    };
    return r;
  };
  /** R and P of the capable worker in a replica's own state. */
  const capableRP = (x: Replica): { R: number; P: number | null } | undefined => {
    const p = x.handle.pools.get('capable')!;
    const w = p.state.observe(hashes, hashes.length * BLOCK, Date.now()).workers.find((v) => v.workerId === C);
    return w === undefined ? undefined : { R: w.load.requests, P: w.load.prefillPressure };
  };
  const route = async (): Promise<RouteReply> => {
    const a: RouteArgs = { requestId: `lim-${++seq}`, sessionId: 's', stageProposal: 'efficient', prompts: { efficient: { tokenIds: prompt }, capable: { tokenIds: prompt } } };
    return h.client.route(a);
  };
  const release = (r: RouteReply): void => h.client.done({ requestId: r.requestId, sessionId: 's', pool: r.pool!, workerId: r.workerId, dpRank: r.dpRank });
  const bothAt = async (what: string, R: number): Promise<void> => {
    await eventually(what, () => capableRP(A)?.R === R && capableRP(B)?.R === R, 10_000, 1);
  };

  beforeAll(async () => {
    await h.start(parameterSet({ effModel: 'model-8b', capModel: 'model-70b', thresholds: { r: 1, p: null }, gate: { maxAgeMs: 1000, destinationLimit: L, localLimit: 1000 } }));
    hashes = h.client.hashPrompt('capable', prompt);
    // Replica b subscribes before the workers announce themselves, so both replicas see the same stream.
    const b = await h.runDecision('local', h.routeSubject, logSink(), { VANTAGE_INSTANCE_ID: 'replica-b', VANTAGE_DECISION_RECORDS_ENABLED: 'false', VANTAGE_LOG_LEVEL: 'warn' });
    bSvc = b.svc;
    await h.seedWorkers(E, C, h.client.hashPrompt('efficient', prompt), 8);
    await eventually('replica b holds both workers', () => b.handle.pools.get('capable')!.readiness().ready && b.handle.pools.get('efficient')!.readiness().ready && b.handle.pools.get('capable')!.state.workerCount === 1);
    A = instrument('a', h.handle);
    B = instrument('b', b.handle);
    // The trigger: efficient R = 1 in both replicas.
    h.book('efficient', E, 'bg-eff-0');
    await eventually('both replicas see the efficient booking', () =>
      [A, B].every((x) => x.handle.pools.get('efficient')!.state.observe(h.client.hashPrompt('efficient', prompt), prompt.length, Date.now()).workers.find((w) => w.workerId === E)?.load.requests === 1),
    );
  }, 120_000);
  afterAll(async () => {
    await bSvc?.stop('test done');
    await h.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  // All at once (every route in flight before any booking crosses: the worst race), and paced at one
  // route every 5 ms (longer than a booking takes to cross between replicas here).
  it.each([
    { arrival: 'all at once', gapMs: 0 },
    { arrival: 'one every 5 ms', gapMs: 5 },
  ])('routes through both replicas, $arrival, admit at most L plus the race', { timeout: 30_000 }, async ({ arrival, gapMs }) => {
    // The bound. Replica X admits a route only while its R of the capable worker (its own bookings plus
    // the other's it has applied) is below L. Take the last admission of all, by X at time t: X's own
    // admissions before it plus the other's bookings X had applied are at most L − 1, and the other
    // made none after t, so
    //   admitted ≤ L + U,  U = the other replica's bookings made before t and not yet applied at X at t
    // (the routes the other admitted before its bookings reached X). U is read from both ledgers' times;
    // Umax, its largest value over every admission, bounds it for any admission taken as the last.
    const n = 6 * L;
    const inFlight: Promise<RouteReply>[] = [];
    for (let i = 0; i < n; i++) {
      inFlight.push(route());
      if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
    }
    const replies = await Promise.all(inFlight);
    const admitted = replies.filter((r) => r.modelRole === 'capable');
    const refused = replies.filter((r) => r.fallback === 'fallback_destination_limit');
    expect(admitted.length + refused.length, 'every route either overrode or met the destination limit').toBe(n);
    for (const r of admitted) expect(r.reason).toBe('overrode');
    await bothAt('every admitted booking in both replicas', admitted.length);

    const burst = new Set(admitted.map((r) => r.requestId));
    const unseenAt = (x: Replica, y: Replica, t: number): number => {
      let u = 0;
      for (const [id, made] of y.own) if (burst.has(id) && made <= t && !((x.applied.get(id) ?? Infinity) <= t)) u++;
      return u;
    };
    const admissions: { id: string; x: Replica; y: Replica; t: number }[] = [];
    for (const [x, y] of [[A, B], [B, A]] as const) for (const [id, t] of x.own) if (burst.has(id)) admissions.push({ id, x, y, t });
    admissions.sort((p, q) => p.t - q.t);
    expect(admissions.length).toBe(admitted.length);
    const last = admissions[admissions.length - 1]!;
    const uLast = unseenAt(last.x, last.y, last.t);
    const uMax = Math.max(...admissions.map((a) => unseenAt(a.x, a.y, a.t)));
    const byA = admissions.filter((a) => a.x === A).length;
    const lag = admissions.map((a) => a.y.applied.get(a.id)! - a.t);
    const excess = Math.max(0, admitted.length - L);
    console.log(
      `[replica-limit] ${arrival}: L ${L}; ${n} routes; admitted ${admitted.length} (replica a ${byA}, b ${admitted.length - byA}); excess ${excess}; ` +
        `race: unseen at the last admission ${uLast}, largest over admissions ${uMax}; bound L + ${uLast} = ${L + uLast}; ` +
        `booking visibility in these routes p50 ${(median(lag) * 1000).toFixed(0)} µs, max ${(Math.max(...lag) * 1000).toFixed(0)} µs`,
    );
    expect(admitted.length, 'the limit was reached').toBeGreaterThanOrEqual(L);
    expect(admitted.length).toBeLessThanOrEqual(L + uLast);
    expect(excess).toBeLessThanOrEqual(uMax);
    // Each replica's own admissions never pass L on its own count.
    expect(byA).toBeLessThanOrEqual(L);
    expect(admitted.length - byA).toBeLessThanOrEqual(L);
    for (const r of admitted) release(r);
    for (const r of refused) h.client.done({ requestId: r.requestId, sessionId: 's', pool: r.pool!, workerId: r.workerId, dpRank: r.dpRank });
    await bothAt('released in both', 0);
  });
});
