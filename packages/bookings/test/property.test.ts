import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { WorkerId } from '@vantage/types';
import { BookingLedger, RELEASE_REASONS, type ReleaseReason, type WorkerCapacity } from '@vantage/bookings';

// Differential test: the ledger's incremental totals against a reference that
// recomputes R, tracked prefill and unique active blocks from scratch out of
// the set of live bookings, over seeded random streams of bookings, prefill
// marks, releases, expiries, duplicates, reorderings, clock steps and worker churn.

const BLOCK = 16;
const TTL = 60;
const TOMB_TTL = 40;
const WORKERS = [1n, 0xffff_ffff_ffff_fffen, 1n << 63n] as WorkerId[];
const RANKS = [0, 1];
const CAP: WorkerCapacity = {
  blockSize: BLOCK,
  totalKvBlocks: 100,
  maxNumBatchedTokens: 256,
  maxNumSeqs: 8,
  dpStartRank: 0,
  dpSize: 2,
  schedulable: true,
};

type Op =
  | { k: 'tick'; dt: number }
  | { k: 'book'; id: number; w: number; r: number; isl: number; overlap: number; hashes: bigint[] }
  | { k: 'prefill'; id: number }
  | { k: 'release'; id: number; reason: ReleaseReason }
  | { k: 'expire' }
  | { k: 'removeWorker'; w: number }
  | { k: 'setWorker'; w: number };

const hashArb = fc.constantFrom(1n, 2n, 3n, 4n, 5n, 0xffff_ffff_ffff_ffffn, 1n << 63n);
const idArb = fc.integer({ min: 0, max: 11 }); // small pool: duplicates and reorderings are frequent

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant('tick' as const), dt: fc.integer({ min: -5, max: 25 }) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant('book' as const),
      id: idArb,
      w: fc.integer({ min: 0, max: WORKERS.length - 1 }),
      r: fc.constantFrom(...RANKS),
      isl: fc.integer({ min: 0, max: 200 }),
      overlap: fc.integer({ min: 0, max: 15 }),
      hashes: fc.array(hashArb, { maxLength: 6 }),
    }),
  },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('prefill' as const), id: idArb }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('release' as const), id: idArb, reason: fc.constantFrom(...RELEASE_REASONS) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('expire' as const) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('removeWorker' as const), w: fc.integer({ min: 0, max: WORKERS.length - 1 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('setWorker' as const), w: fc.integer({ min: 0, max: WORKERS.length - 1 }) }) },
);

interface RefBooking {
  w: WorkerId;
  r: number;
  prefill: number;
  done: boolean;
  hashes: bigint[];
  at: number;
}

/** The obviously-correct model: plain maps, everything recomputed on read. */
class Reference {
  clock = Number.NEGATIVE_INFINITY;
  live = new Map<string, RefBooking>();
  tomb = new Map<string, number>();
  early = new Map<string, number>();

  now(t: number): number {
    this.clock = Math.max(this.clock, t);
    return this.clock;
  }
  recent(m: Map<string, number>, id: string, now: number): boolean {
    const at = m.get(id);
    return at !== undefined && now - at <= TOMB_TTL;
  }
  drop(id: string, now: number): void {
    this.live.delete(id);
    this.tomb.set(id, now);
  }
  book(id: string, w: WorkerId, r: number, isl: number, overlap: number, hashes: bigint[], t: number): void {
    const now = this.now(t);
    if (this.live.has(id) || this.recent(this.tomb, id, now)) return;
    const done = this.recent(this.early, id, now);
    this.early.delete(id);
    this.live.set(id, { w, r, prefill: Math.max(0, isl - overlap * BLOCK), done, hashes, at: now });
  }
  prefill(id: string, t: number): void {
    const now = this.now(t);
    const b = this.live.get(id);
    if (b !== undefined) b.done = true;
    else if (!this.recent(this.tomb, id, now)) this.early.set(id, now);
  }
  release(id: string, t: number): void {
    const now = this.now(t);
    this.early.delete(id);
    if (this.live.has(id)) this.drop(id, now);
    else if (!this.recent(this.tomb, id, now)) this.tomb.set(id, now);
  }
  expire(t: number): void {
    const now = this.now(t);
    for (const [id, b] of [...this.live]) if (now - b.at > TTL) this.drop(id, now);
  }
  removeWorker(w: WorkerId, t: number): void {
    const now = this.now(t);
    for (const [id, b] of [...this.live]) if (b.w === w) this.drop(id, now);
  }
  load(w: WorkerId, r: number): { requests: number; tracked: number; active: number } {
    let requests = 0;
    let tracked = 0;
    const blocks = new Set<bigint>();
    for (const b of this.live.values()) {
      if (b.w !== w || b.r !== r) continue;
      requests++;
      if (!b.done) tracked += b.prefill;
      for (const h of b.hashes) blocks.add(h);
    }
    return { requests, tracked, active: blocks.size };
  }
}

function check(ok: boolean, what: string, got: unknown, want: unknown): void {
  if (!ok) throw new Error(`${what}: got ${String(got)}, want ${String(want)}`);
}

function run(ops: Op[]): void {
  const ledger = new BookingLedger({ blockSize: BLOCK, ttlMs: TTL, tombstoneTtlMs: TOMB_TTL, tombstoneCapacity: 1_000_000 });
  const ref = new Reference();
  const registered = new Set<number>();
  let t = 0;
  for (const op of ops) {
    switch (op.k) {
      case 'tick':
        t += op.dt; // negative steps exercise the monotonic clamp
        break;
      case 'book':
        ledger.book({
          requestId: `q${op.id}`,
          workerId: WORKERS[op.w]!,
          dpRank: op.r,
          promptTokens: op.isl,
          overlapBlocks: op.overlap,
          sequenceHashes: BigUint64Array.from(op.hashes),
          source: 'local',
          nowMs: t,
        });
        ref.book(`q${op.id}`, WORKERS[op.w]!, op.r, op.isl, op.overlap, op.hashes, t);
        break;
      case 'prefill':
        ledger.markPrefillComplete(`q${op.id}`, t);
        ref.prefill(`q${op.id}`, t);
        break;
      case 'release':
        ledger.release(`q${op.id}`, op.reason, t);
        ref.release(`q${op.id}`, t);
        break;
      case 'expire':
        ledger.expire(t);
        ref.expire(t);
        break;
      case 'removeWorker':
        ledger.removeWorker(WORKERS[op.w]!, t);
        ref.removeWorker(WORKERS[op.w]!, t);
        registered.delete(op.w);
        break;
      case 'setWorker':
        expect(ledger.setWorker(WORKERS[op.w]!, CAP, t).kind).not.toBe('invalid');
        ref.now(t);
        registered.add(op.w);
        break;
    }

    // Plain comparisons on the hot loop (vitest's expect is slow at this volume); a mismatch throws with details.
    check(ledger.size === ref.live.size, 'live bookings', ledger.size, ref.live.size);
    for (const [wi, w] of WORKERS.entries()) {
      for (const r of RANKS) {
        const got = ledger.load(w, r);
        const want = ref.load(w, r);
        check(got.requests === want.requests, `R on ${w}:${r}`, got.requests, want.requests);
        check(got.trackedPrefillTokens === want.tracked, `tracked prefill on ${w}:${r}`, got.trackedPrefillTokens, want.tracked);
        check(got.activeBlocks === want.active, `active blocks on ${w}:${r}`, got.activeBlocks, want.active);
        check(got.prefillRequests >= 0 && got.prefillRequests <= got.requests, `prefill requests on ${w}:${r}`, got.prefillRequests, got.requests);
        const p = registered.has(wi) ? want.tracked / CAP.maxNumBatchedTokens! : null;
        check(got.prefillPressure === p, `P on ${w}:${r}`, got.prefillPressure, p);
      }
    }
    const c = ledger.counters();
    check(c.invariantViolations === 0, 'invariant violations', c.invariantViolations, 0);
    for (const v of [...Object.values(c).filter((x) => typeof x === 'number'), ...Object.values(c.released)]) {
      check(v >= 0, 'counter never negative', v, 0);
    }
  }
  // Everything drains: past every TTL, nothing is left booked.
  ledger.expire(Math.max(t, ref.clock) + TTL + 1);
  for (const load of ledger.loads()) {
    expect([load.requests, load.trackedPrefillTokens, load.activeBlocks]).toEqual([0, 0, 0]);
  }
}

describe('BookingLedger against a reference model', () => {
  it('matches the recomputed totals on random operation streams', () => {
    fc.assert(
      // size 'max': fast-check's default size would keep streams to about ten operations.
      fc.property(fc.array(opArb, { maxLength: 150, size: 'max' }), (ops) => run(ops)),
      { seed: 0x5eed_b00c, numRuns: 250 },
    );
  });
});
