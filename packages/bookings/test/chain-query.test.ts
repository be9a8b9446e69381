import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { WorkerId } from '@vantage/types';
import { BookingLedger } from '@vantage/bookings';

// Differential test of `prepareChain`: after any stream of bookings, releases, expiries and worker
// removals, the per-rank new-block counts it prepares equal the linear count (`newBlocks`, one
// lookup per block) for every (worker, rank), for queries sharing prefixes with the booked chains.

const WORKERS = [1n, 0xffff_ffff_ffff_fffen, 1n << 63n, 77n] as WorkerId[];
const BASES = 4;
const LEN = 40;

/** Base chains; chains sharing a base share its prefix (bases 2k and 2k+1 share their first 12 blocks). */
function bases(seed: number): BigUint64Array[] {
  let x = BigInt(seed) * 0x9e37_79b9_7f4a_7c15n + 1n;
  const next = (): bigint => {
    x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffff_ffff_ffff_ffffn;
    return x;
  };
  const out: BigUint64Array[] = [];
  for (let b = 0; b < BASES; b++) {
    const c = new BigUint64Array(LEN);
    for (let i = 0; i < LEN; i++) c[i] = b % 2 === 1 && i < 12 ? out[b - 1]![i]! : next();
    out.push(c);
  }
  return out;
}

type Op =
  | { k: 'book'; id: number; w: number; r: number; base: number; len: number }
  | { k: 'release'; id: number }
  | { k: 'expire'; dt: number }
  | { k: 'removeWorker'; w: number }
  | { k: 'query'; base: number; len: number; tail: number };

/** Operations on `workers` workers (2 ranks each) with request ids 0..`ids`. */
function manyOps(workers: number, ids: number): fc.Arbitrary<Op> {
  return fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        k: fc.constant('book' as const),
        id: fc.integer({ min: 0, max: ids }),
        w: fc.integer({ min: 0, max: workers - 1 }),
        r: fc.integer({ min: 0, max: 1 }),
        base: fc.integer({ min: 0, max: BASES - 1 }),
        len: fc.integer({ min: 0, max: LEN }),
      }),
    },
    { weight: 2, arbitrary: fc.record({ k: fc.constant('release' as const), id: fc.integer({ min: 0, max: ids }) }) },
    { weight: 1, arbitrary: fc.record({ k: fc.constant('expire' as const), dt: fc.integer({ min: 0, max: 40 }) }) },
    { weight: 1, arbitrary: fc.record({ k: fc.constant('removeWorker' as const), w: fc.integer({ min: 0, max: workers - 1 }) }) },
    {
      weight: 4,
      arbitrary: fc.record({
        k: fc.constant('query' as const),
        base: fc.integer({ min: 0, max: BASES - 1 }),
        len: fc.integer({ min: 0, max: LEN }),
        tail: fc.integer({ min: 0, max: 5 }),
      }),
    },
  );
}

const opArb = manyOps(WORKERS.length, 30);

/**
 * Applies one booking-side operation (any but a query) to `ledger` at time `now`, on `workers`;
 * returns the ledger time after it (an expiry moves it on by `dt`).
 */
function applyOp(
  ledger: BookingLedger,
  chains: BigUint64Array[],
  workers: readonly WorkerId[],
  op: Exclude<Op, { k: 'query' }>,
  now: number,
  expectedOutputTokens: (id: number) => number | null,
): number {
  if (op.k === 'book') {
    ledger.book({
      requestId: `r${op.id}`,
      workerId: workers[op.w]!,
      dpRank: op.r,
      promptTokens: op.len * 16,
      overlapBlocks: 0,
      sequenceHashes: chains[op.base]!.subarray(0, op.len),
      expectedOutputTokens: expectedOutputTokens(op.id),
      source: 'decision_service',
      nowMs: now,
    });
  } else if (op.k === 'release') ledger.release(`r${op.id}`, 'completed', now);
  else if (op.k === 'expire') ledger.expire((now += op.dt));
  else ledger.removeWorker(workers[op.w]!, now);
  return now;
}

/** 40 workers × 2 ranks, 120 request ids: more ranks than the holder masks name (64), so both ways of preparing a chain run. */
const MANY = Array.from({ length: 40 }, (_, i) => (BigInt(i) * 0x1_0000_0001n + 3n) as WorkerId);

describe('BookingLedger.prepareChain', () => {
  it.each([
    ['4 workers', WORKERS, 30, 120, 400],
    ['40 workers (more ranks than mask bits)', MANY, 120, 500, 100],
  ] as const)('gives every rank the same new-block count as the linear count, under any history (%s)', (_n, workers, ids, maxOps, numRuns) => {
    const arb = manyOps(workers.length, ids);
    fc.assert(
      fc.property(fc.integer(), fc.array(arb, { maxLength: maxOps }), (seed, ops) => {
        const chains = bases(seed);
        const ledger = new BookingLedger({ blockSize: 16, ttlMs: 50 });
        let now = 0;
        for (const op of ops) {
          if (op.k !== 'query') now = applyOp(ledger, chains, workers, op, now, () => null);
          else {
            // A booked prefix, then `tail` blocks no booking holds.
            const q = new BigUint64Array(op.len + op.tail);
            q.set(chains[op.base]!.subarray(0, op.len));
            for (let i = op.len; i < q.length; i++) q[i] = 0xdead_0000n + BigInt(i);
            ledger.prepareChain(q);
            for (const w of workers) {
              for (const r of [0, 1, 2]) expect(ledger.newBlocksOfRef(ledger.rankRef(w, r), q)).toBe(ledger.newBlocks(w, r, q));
            }
          }
        }
        expect(ledger.counters().invariantViolations).toBe(0);
      }),
      { seed: 0xc4a1, numRuns },
    );
  });

  it('answers exactly with more ranks than mask bits, and the bits of dropped ranks are reused', () => {
    const chains = bases(9);
    const ledger = new BookingLedger({ blockSize: 16 });
    const workers = Array.from({ length: 200 }, (_, i) => (BigInt(i) * 0x9e37_79b9n + 11n) as WorkerId);
    const cap = { blockSize: 16, totalKvBlocks: null, maxNumBatchedTokens: null, maxNumSeqs: null, dpStartRank: 0, dpSize: 2, schedulable: true };
    const check = (): void => {
      for (let base = 0; base < BASES; base++) {
        for (const len of [0, 1, 12, 13, 25, LEN]) {
          const q = chains[base]!.subarray(0, len);
          ledger.prepareChain(q);
          for (const w of workers) for (const r of [0, 1]) expect(ledger.newBlocksOfRef(ledger.rankRef(w, r), q)).toBe(ledger.newBlocks(w, r, q));
        }
      }
    };
    let id = 0;
    const book = (w: WorkerId, r: number, k: number): void => {
      ledger.book({ requestId: `q${id++}`, workerId: w, dpRank: r, promptTokens: 16, overlapBlocks: 0, sequenceHashes: chains[k % BASES]!.subarray(0, 1 + ((k * 7) % LEN)), expectedOutputTokens: null, source: 'decision_service', nowMs: id });
    };
    // 35 registered workers × 2 ranks with bookings: 70 ranks, 6 of them without a bit.
    for (let i = 0; i < 35; i++) {
      ledger.setWorker(workers[i]!, cap, id);
      book(workers[i]!, 0, i);
      book(workers[i]!, 1, i + 1);
    }
    expect(ledger.ranksWithoutMaskBit).toBe(6);
    check();
    // Workers leave and others come, many times over: bits come back with the ranks that held them.
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 35; i++) ledger.removeWorker(workers[(round * 35 + i) % 200]!, id);
      expect(ledger.ranksWithoutMaskBit).toBe(0);
      for (let i = 0; i < 30; i++) {
        const w = workers[((round + 1) * 35 + i) % 200]!;
        ledger.setWorker(w, cap, id);
        book(w, 0, i + round);
        book(w, 1, i + round + 3);
      }
      expect(ledger.ranksWithoutMaskBit).toBe(0);
    }
    check();
    // Unregistered ranks (competing traffic) hold their bit only while they hold bookings.
    for (let i = 0; i < 10; i++) book(workers[199 - i]!, 5, i);
    check();
    for (let k = id - 10; k < id; k++) ledger.release(`q${k}`, 'completed', id);
    expect(ledger.ranksWithoutMaskBit).toBe(0);
    check();
    expect(ledger.counters().invariantViolations).toBe(0);
  });

  it('is invalidated by any change: answers after a booking are not the prepared ones', () => {
    const chain = BigUint64Array.from([11n, 12n, 13n, 14n]);
    const ledger = new BookingLedger({ blockSize: 16 });
    const w = 5n as WorkerId;
    const ref = ledger.rankRef(w, 0);
    ledger.prepareChain(chain);
    expect(ledger.newBlocksOfRef(ref, chain)).toBe(4);
    ledger.book({ requestId: 'a', workerId: w, dpRank: 0, promptTokens: 48, overlapBlocks: 0, sequenceHashes: chain.subarray(0, 3), expectedOutputTokens: null, source: 'decision_service', nowMs: 1 });
    expect(ledger.newBlocksOfRef(ref, chain)).toBe(1);
    ledger.prepareChain(chain);
    expect(ledger.newBlocksOfRef(ref, chain)).toBe(1);
    ledger.release('a', 'completed', 2);
    expect(ledger.newBlocksOfRef(ref, chain)).toBe(4);
  });
});

describe('BookingLedger.rankRef', () => {
  type RefOp = Op | { k: 'setWorker'; w: number; dpSize: number; budget: number | null } | { k: 'prefill'; id: number };
  const refOpArb: fc.Arbitrary<RefOp> = fc.oneof(
    { weight: 8, arbitrary: opArb },
    {
      weight: 1,
      arbitrary: fc.record({
        k: fc.constant('setWorker' as const),
        w: fc.integer({ min: 0, max: WORKERS.length - 1 }),
        dpSize: fc.integer({ min: 1, max: 2 }),
        budget: fc.option(fc.integer({ min: 0, max: 4096 })),
      }),
    },
    { weight: 1, arbitrary: fc.record({ k: fc.constant('prefill' as const), id: fc.integer({ min: 0, max: 30 }) }) },
  );

  it('reads the same load and new-block counts as the lookups by id, held across any history', () => {
    fc.assert(
      fc.property(fc.integer(), fc.array(refOpArb, { maxLength: 120 }), (seed, ops) => {
        const chains = bases(seed);
        const ledger = new BookingLedger({ blockSize: 16, ttlMs: 50 });
        // Made before anything exists, and kept: each must follow its rank being created, dropped and re-created.
        const refs = WORKERS.flatMap((w) => [0, 1, 2].map((r) => ledger.rankRef(w, r)));
        const out = (): Record<string, unknown> => ({});
        let now = 0;
        const check = (q: BigUint64Array | null): void => {
          for (const ref of refs) {
            expect(ledger.loadOfRef(ref, out() as never)).toEqual(ledger.load(ref.workerId, ref.dpRank));
            if (q !== null) expect(ledger.newBlocksOfRef(ref, q)).toBe(ledger.newBlocks(ref.workerId, ref.dpRank, q));
          }
        };
        for (const op of ops) {
          now++;
          if (op.k === 'prefill') ledger.markPrefillComplete(`r${op.id}`, now);
          else if (op.k === 'setWorker') {
            ledger.setWorker(
              WORKERS[op.w]!,
              { blockSize: 16, totalKvBlocks: 1000, maxNumBatchedTokens: op.budget, maxNumSeqs: null, dpStartRank: 0, dpSize: op.dpSize, schedulable: op.dpSize === 1 },
              now,
            );
          } else if (op.k === 'query') {
            const q = new BigUint64Array(op.len + op.tail);
            q.set(chains[op.base]!.subarray(0, op.len));
            for (let i = op.len; i < q.length; i++) q[i] = 0xdead_0000n + BigInt(i);
            check(q); // not prepared beforehand: the first rank's question prepares it
            ledger.prepareChain(q);
            check(q); // prepared
            continue;
          } else now = applyOp(ledger, chains, WORKERS, op, now, (id) => (id % 3 === 0 ? null : id));
          check(null);
        }
      }),
      { seed: 0x5eaf, numRuns: 300 },
    );
  });

  it('refuses a handle of another ledger', () => {
    const a = new BookingLedger({ blockSize: 16 });
    const b = new BookingLedger({ blockSize: 16 });
    const ref = a.rankRef(1n as WorkerId, 0);
    expect(() => b.loadOfRef(ref, {} as never)).toThrow(TypeError);
    expect(() => b.loadOfRef({ workerId: 1n as WorkerId, dpRank: 0 }, {} as never)).toThrow(TypeError);
  });
});
