import { describe, expect, it } from 'vitest';
import type { WorkerCapacity } from '@vantage/bookings';
import type { KvEvent, WorkerId } from '@vantage/types';
import { PoolState } from '../src/index';

const limits = { dpRanksPerWorker: 4, workers: 3, ranks: 6, bookingsPerRank: 2, bookings: 3 };
const pool = (): PoolState => new PoolState({ pool: 'p', blockSize: 4, selection: { kind: 'kv_router', formula: 'overlap_weight' }, bookingTtlMs: 300_000, workerTtlMs: 60_000, limits });
const cap = (dpSize: number, dpStartRank = 0): WorkerCapacity => ({ blockSize: 4, totalKvBlocks: 100, maxNumBatchedTokens: 64, maxNumSeqs: 8, dpStartRank, dpSize, schedulable: true });
const w = (n: number): WorkerId => BigInt(n) as WorkerId;
const stored = (worker: number, dpRank: number): KvEvent => ({ workerId: w(worker), dpRank, storageTier: 'device', eventId: 1n, data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: BigUint64Array.of(1n), tokensHashes: BigUint64Array.of(2n) } });

describe('PoolState limits', () => {
  it('refuses a registration whose dp range breaks a limit, before making any rank', () => {
    const s = pool();
    expect(s.admitRegistration(w(1), cap(4294967295))).toBe('dp_ranks_per_worker');
    expect(s.admitRegistration(w(1), cap(5))).toBe('dp_ranks_per_worker');
    expect(s.admitRegistration(w(1), cap(4))).toBeNull();
    s.register(w(1), cap(4), null, 0);
    expect(s.rankCount).toBe(4);
    // A known worker re-registering the same ranks adds none.
    expect(s.admitRegistration(w(1), cap(4))).toBeNull();
    // Ranks per pool: 4 + 3 > 6.
    expect(s.admitRegistration(w(2), cap(3))).toBe('ranks_per_pool');
    expect(s.admitRegistration(w(2), cap(2))).toBeNull();
    // A known worker growing past its own bound.
    expect(s.admitRegistration(w(1), cap(1, 4))).toBe('dp_ranks_per_worker');
  });

  it('bounds workers and ranks named by events, and frees room when a worker goes', () => {
    const s = pool();
    for (const [worker, rank] of [[1, 0], [1, 1], [2, 0]] as const) {
      expect(s.admitRank(w(worker), rank)).toBeNull();
      s.applyKvEvent(stored(worker, rank), 0);
    }
    expect(s.admitRank(w(3), 0)).toBeNull();
    s.applyKvEvent(stored(3, 0), 0);
    expect(s.workerCount).toBe(3);
    expect(s.admitRank(w(4), 0)).toBe('workers_per_pool');
    expect(s.admitRank(w(1), 0)).toBeNull(); // known pair: always
    s.removeWorker(w(3), 0);
    expect(s.workerCount).toBe(2);
    expect(s.rankCount).toBe(3);
    expect(s.admitRank(w(4), 0)).toBeNull();
  });

  it('bounds open bookings per rank and per pool; a repeated request id passes', () => {
    const s = pool();
    const book = (id: string, worker: number, rank: number): void => {
      s.ledger.book({ requestId: id, workerId: w(worker), dpRank: rank, promptTokens: 8, overlapBlocks: 0, sequenceHashes: BigUint64Array.of(1n), source: 'decision_service', nowMs: 0 });
    };
    book('a', 1, 0);
    book('b', 1, 0);
    expect(s.admitBooking('c', w(1), 0)).toBe('bookings_per_rank');
    expect(s.admitBooking('a', w(1), 0)).toBeNull();
    expect(s.admitBooking('c', w(1), 1)).toBeNull();
    book('c', 1, 1);
    expect(s.admitBooking('d', w(2), 0)).toBe('bookings_per_pool');
    s.ledger.release('a', 'completed', 1);
    expect(s.admitBooking('d', w(2), 0)).toBeNull();
  });

  it('admits everything without limits (offline tools)', () => {
    const s = new PoolState({ pool: 'p', blockSize: 4, selection: { kind: 'kv_router', formula: 'overlap_weight' }, bookingTtlMs: 300_000, workerTtlMs: 60_000 });
    expect(s.admitRegistration(w(1), cap(4294967295))).toBeNull();
    expect(s.admitRank(w(1), 7)).toBeNull();
  });
});
