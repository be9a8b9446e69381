import { describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import { BookingLedger, type BookInput, type WorkerCapacity } from '@vantage/bookings';
import { localBlockHashes, sequenceHashes } from '@vantage/hashing';

const W1 = 0xffff_ffff_ffff_fff1n as WorkerId; // above 2^63: must stay exact
const W2 = 7n as WorkerId;

const CAP: WorkerCapacity = {
  blockSize: 16,
  totalKvBlocks: 1000,
  maxNumBatchedTokens: 8192,
  maxNumSeqs: 256,
  dpStartRank: 0,
  dpSize: 2,
  schedulable: true,
};

function hashes(...h: bigint[]): BigUint64Array {
  return BigUint64Array.from(h);
}

function req(id: string, over: Partial<BookInput> = {}): BookInput {
  return {
    requestId: id,
    workerId: W1,
    dpRank: 0,
    promptTokens: 160,
    overlapBlocks: 2,
    sequenceHashes: hashes(1n, 2n, 3n),
    source: 'local',
    nowMs: 1000,
    ...over,
  };
}

function ledger(): BookingLedger {
  const l = new BookingLedger({ blockSize: 16, ttlMs: 300_000 });
  l.setWorker(W1, CAP, 0);
  return l;
}

describe('booking and R / P', () => {
  it('counts booked requests and uncached prefill tokens per (worker, rank)', () => {
    const l = ledger();
    expect(l.book(req('a')).kind).toBe('booked');
    // isl 160 - 2 blocks * 16 = 128 uncached tokens.
    let load = l.load(W1, 0);
    expect(load.requests).toBe(1);
    expect(load.trackedPrefillTokens).toBe(128);
    expect(load.prefillPressure).toBeCloseTo(128 / 8192);
    expect(load.workerId).toBe(W1);
    l.book(req('b', { dpRank: 1, promptTokens: 16, overlapBlocks: 5 }));
    expect(l.load(W1, 1).trackedPrefillTokens).toBe(0); // overlap beyond isl clamps at 0
    expect(l.load(W1, 1).requests).toBe(1);
    load = l.load(W1, 0);
    expect(load.requests).toBe(1);
    expect(load.lastChangeMs).toBe(1000);
  });

  it('uses the caller-supplied prefill figure when given', () => {
    const l = ledger();
    l.book(req('a', { prefillTokens: 77 }));
    expect(l.load(W1, 0).trackedPrefillTokens).toBe(77);
  });

  it('uses the worker block size, else the pool default', () => {
    const l = new BookingLedger({ blockSize: 64 });
    l.setWorker(W1, { ...CAP, blockSize: 16 }, 0);
    l.book(req('a', { promptTokens: 200, overlapBlocks: 1 }));
    l.book(req('b', { workerId: W2, promptTokens: 200, overlapBlocks: 1 }));
    expect(l.load(W1, 0).trackedPrefillTokens).toBe(184);
    expect(l.load(W2, 0).trackedPrefillTokens).toBe(136);
  });

  it('reports P as null, never a division by zero, when capacity is unknown', () => {
    const l = ledger();
    l.book(req('a', { workerId: W2 }));
    expect(l.load(W2, 0).registered).toBe(false);
    expect(l.load(W2, 0).prefillPressure).toBeNull();
    expect(l.load(W2, 0).totalKvBlocks).toBeNull();
    l.setWorker(W2, { ...CAP, maxNumBatchedTokens: 0 }, 1);
    expect(l.load(W2, 0).prefillPressure).toBeNull();
    l.setWorker(W2, { ...CAP, maxNumBatchedTokens: null }, 1);
    expect(l.load(W2, 0).prefillPressure).toBeNull();
    l.setWorker(W2, { ...CAP, maxNumBatchedTokens: 64 }, 2);
    expect(l.load(W2, 0).prefillPressure).toBe(2);
  });

  it('stops counting prefill tokens at prefill completion but keeps R', () => {
    const l = ledger();
    l.book(req('a'));
    expect(l.markPrefillComplete('a', 1500)).toBe('marked');
    const load = l.load(W1, 0);
    expect(load.requests).toBe(1);
    expect(load.prefillRequests).toBe(0);
    expect(load.trackedPrefillTokens).toBe(0);
    expect(load.prefillPressure).toBe(0);
    expect(l.markPrefillComplete('a', 1600)).toBe('already_complete');
    expect(l.get('a')?.prefillCompletedAtMs).toBe(1500);
  });

  it('returns every counter to zero on release', () => {
    const l = ledger();
    l.book(req('a', { expectedOutputTokens: 50 }));
    l.book(req('b', { sequenceHashes: hashes(1n, 9n) }));
    expect(l.load(W1, 0).expectedOutputTokens).toBe(50);
    expect(l.release('a', 'completed', 2000)).toBe('released');
    expect(l.release('b', 'cancelled', 2000)).toBe('released');
    const load = l.load(W1, 0);
    expect([load.requests, load.prefillRequests, load.trackedPrefillTokens, load.activeBlocks, load.expectedOutputTokens]).toEqual([
      0, 0, 0, 0, 0,
    ]);
    expect(load.lastChangeMs).toBe(2000);
    const c = l.counters();
    expect(c.released.completed).toBe(1);
    expect(c.released.cancelled).toBe(1);
    expect(c.invariantViolations).toBe(0);
  });

  it('rejects invalid bookings with a reason and counts them', () => {
    const l = ledger();
    expect(l.book(req('', {})).kind).toBe('invalid');
    expect(l.book(req('x', { dpRank: -1 })).kind).toBe('invalid');
    expect(l.book(req('x', { promptTokens: 1.5 })).kind).toBe('invalid');
    expect(l.book(req('x', { workerId: -1n as WorkerId })).kind).toBe('invalid');
    expect(l.book(req('x', { sequenceHashes: [1n] as unknown as BigUint64Array })).kind).toBe('invalid');
    expect(l.counters().invalidBook).toBe(5);
    expect(l.size).toBe(0);
  });

  it('counts a booking on a rank outside the registered range but keeps it', () => {
    const l = ledger();
    expect(l.book(req('a', { dpRank: 5 })).kind).toBe('booked');
    expect(l.counters().rankOutOfRange).toBe(1);
    expect(l.load(W1, 5).requests).toBe(1);
  });
});

describe('active blocks', () => {
  it('counts a prefix shared by several bookings once', () => {
    const l = ledger();
    l.book(req('a', { sequenceHashes: hashes(10n, 11n, 12n) }));
    l.book(req('b', { sequenceHashes: hashes(10n, 11n, 13n, 14n) }));
    expect(l.load(W1, 0).activeBlocks).toBe(5);
    l.release('a', 'completed', 2000);
    expect(l.load(W1, 0).activeBlocks).toBe(4); // 10 and 11 still held by b
    l.release('b', 'completed', 2000);
    expect(l.load(W1, 0).activeBlocks).toBe(0);
  });

  it('keeps ranks and workers separate', () => {
    const l = ledger();
    l.book(req('a', { sequenceHashes: hashes(1n, 2n) }));
    l.book(req('b', { dpRank: 1, sequenceHashes: hashes(1n, 2n) }));
    l.book(req('c', { workerId: W2, sequenceHashes: hashes(1n) }));
    expect(l.load(W1, 0).activeBlocks).toBe(2);
    expect(l.load(W1, 1).activeBlocks).toBe(2);
    expect(l.load(W2, 0).activeBlocks).toBe(1);
  });

  it('tells how many of a request blocks are not yet active on a worker', () => {
    const l = ledger();
    l.book(req('a', { sequenceHashes: hashes(1n, 2n, 3n) }));
    expect(l.newBlocks(W1, 0, hashes(1n, 2n, 7n, 8n))).toBe(2);
    expect(l.newBlocks(W1, 1, hashes(1n, 2n, 7n, 8n))).toBe(4);
    expect(l.newBlocks(W2, 0, hashes(1n))).toBe(1);
  });

  it('is not corrupted when the caller reuses its hash buffer', () => {
    const l = ledger();
    const buf = hashes(1n, 2n);
    l.book(req('a', { sequenceHashes: buf }));
    buf[0] = 99n;
    l.release('a', 'completed', 2000);
    expect(l.load(W1, 0).activeBlocks).toBe(0);
    expect(l.counters().invariantViolations).toBe(0);
  });

  it('keeps u64 hashes above 2^63 distinct and exact', () => {
    const l = ledger();
    const big = 0xffff_ffff_ffff_ffffn;
    l.book(req('a', { sequenceHashes: hashes(big, big - 1n, 1n << 63n) }));
    expect(l.load(W1, 0).activeBlocks).toBe(3);
    expect(l.newBlocks(W1, 0, hashes(big, (1n << 63n) + 1n))).toBe(1);
  });
});

describe('idempotency and ordering', () => {
  it('ignores a duplicate booking and returns the existing one', () => {
    const l = ledger();
    l.book(req('a'));
    const dup = l.book(req('a', { workerId: W2 }));
    expect(dup.kind).toBe('duplicate');
    if (dup.kind === 'duplicate') {
      expect(dup.conflicting).toBe(true);
      expect(dup.booking.workerId).toBe(W1);
    }
    expect(l.load(W1, 0).requests).toBe(1);
    expect(l.load(W2, 0).requests).toBe(0);
    expect(l.counters().duplicateBook).toBe(1);
    expect(l.counters().conflictingDuplicateBook).toBe(1);
  });

  it('makes release of unknown or already-released ids a counted no-op', () => {
    const l = ledger();
    expect(l.release('nope', 'completed', 1000)).toBe('unknown');
    l.book(req('a'));
    l.release('a', 'completed', 1000);
    expect(l.release('a', 'completed', 1001)).toBe('already_released');
    expect(l.release('nope', 'failed', 1002)).toBe('already_released');
    const c = l.counters();
    expect(c.releaseUnknown).toBe(1);
    expect(c.releaseAlreadyReleased).toBe(2);
    expect(c.released.completed).toBe(1);
    expect(l.load(W1, 0).requests).toBe(0);
  });

  it('ignores prefill completion after release', () => {
    const l = ledger();
    l.book(req('a'));
    l.release('a', 'cancelled', 1000);
    expect(l.markPrefillComplete('a', 1001)).toBe('released');
    expect(l.load(W1, 0).trackedPrefillTokens).toBe(0);
    expect(l.counters().prefillAfterRelease).toBe(1);
  });

  it('ignores a booking that arrives after its release (no phantom)', () => {
    const l = ledger();
    expect(l.release('late', 'completed', 1000)).toBe('unknown');
    expect(l.book(req('late', { nowMs: 1001 })).kind).toBe('already_released');
    expect(l.load(W1, 0).requests).toBe(0);
    expect(l.size).toBe(0);
    expect(l.counters().lateBookIgnored).toBe(1);
  });

  it('forgets tombstones after their TTL, so an id can be booked again', () => {
    const l = new BookingLedger({ blockSize: 16, ttlMs: 1000, tombstoneTtlMs: 500 });
    l.release('x', 'completed', 0);
    expect(l.book(req('x', { nowMs: 400 })).kind).toBe('already_released');
    l.expire(600);
    expect(l.book(req('x', { nowMs: 601 })).kind).toBe('booked');
  });

  it('bounds the tombstone set and counts evictions', () => {
    const l = new BookingLedger({ blockSize: 16, tombstoneCapacity: 3 });
    for (let i = 0; i < 5; i++) l.release(`r${i}`, 'completed', i);
    expect(l.counters().tombstonesEvicted).toBe(2);
    // The oldest two are forgotten, the newest three still block late bookings.
    expect(l.book(req('r0', { nowMs: 10 })).kind).toBe('booked');
    expect(l.book(req('r4', { nowMs: 10 })).kind).toBe('already_released');
  });

  it('remembers a prefill completion that overtakes its booking', () => {
    const l = ledger();
    expect(l.markPrefillComplete('a', 900)).toBe('early');
    l.book(req('a'));
    expect(l.get('a')?.prefillComplete).toBe(true);
    expect(l.load(W1, 0).trackedPrefillTokens).toBe(0);
    expect(l.load(W1, 0).requests).toBe(1);
  });

  it('clamps a clock that steps backwards', () => {
    const l = ledger();
    l.book(req('a', { nowMs: 5000 }));
    l.book(req('b', { nowMs: 4000 }));
    expect(l.get('b')?.bookedAtMs).toBe(5000);
  });
});

describe('expiry', () => {
  it('expires bookings older than the TTL and counts them as leaks', () => {
    const l = new BookingLedger({ blockSize: 16, ttlMs: 1000 });
    l.setWorker(W1, CAP, 0);
    l.book(req('old', { nowMs: 0 }));
    l.book(req('new', { nowMs: 800 }));
    expect(l.expire(1000)).toBe(0); // exactly the TTL is not older than it
    expect(l.expire(1001)).toBe(1);
    expect(l.get('old')).toBeUndefined();
    expect(l.get('new')).toBeDefined();
    expect(l.counters().expiredLeaks).toBe(1);
    // A late completion of the leaked request is recognised, not counted as unknown.
    expect(l.release('old', 'completed', 1100)).toBe('already_released');
  });

  it('expires 10,000 leaked bookings and returns R, P and active blocks to zero', () => {
    const l = new BookingLedger({ blockSize: 16 });
    l.setWorker(W1, CAP, 0);
    l.setWorker(W2, CAP, 0);
    for (let i = 0; i < 10_000; i++) {
      const w = i % 2 === 0 ? W1 : W2;
      l.book(req(`leak-${i}`, { workerId: w, dpRank: i % 2, nowMs: i, sequenceHashes: hashes(1n, BigInt(i) + 2n) }));
    }
    expect(l.load(W1, 0).requests).toBe(5000);
    expect(l.load(W1, 0).prefillPressure).toBeGreaterThan(0);
    expect(l.load(W1, 0).activeBlocks).toBe(5001);
    expect(l.expire(300_000 + 5_000)).toBe(5000); // bookings made at 0..4999 ms are past the TTL
    expect(l.expire(300_000 + 10_000)).toBe(5000);
    for (const load of l.loads()) {
      expect(load.requests).toBe(0);
      expect(load.trackedPrefillTokens).toBe(0);
      expect(load.prefillPressure).toBe(0);
      expect(load.activeBlocks).toBe(0);
    }
    expect(l.size).toBe(0);
    expect(l.counters().expiredLeaks).toBe(10_000);
    expect(l.counters().invariantViolations).toBe(0);
  });
});

describe('worker registry', () => {
  it('validates capacity', () => {
    const l = ledger();
    expect(l.setWorker(W2, { ...CAP, blockSize: 0 }, 0).kind).toBe('invalid');
    expect(l.setWorker(W2, { ...CAP, dpSize: 0 }, 0).kind).toBe('invalid');
    expect(l.setWorker(W2, { ...CAP, totalKvBlocks: -1 }, 0).kind).toBe('invalid');
    expect(l.counters().invalidWorker).toBe(3);
    expect(l.load(W2, 0).registered).toBe(false);
  });

  it('updates schedulable and reports it per rank', () => {
    const l = ledger();
    expect(l.setWorker(W1, { ...CAP, schedulable: false }, 5).kind).toBe('updated');
    expect(l.load(W1, 1).schedulable).toBe(false);
  });

  it('lists every registered rank, and ranks that only hold bookings', () => {
    const l = ledger();
    l.book(req('a', { workerId: W2, dpRank: 3 }));
    const keys = l.loads().map((x) => `${x.workerId}:${x.dpRank}`);
    expect(keys.sort()).toEqual([`${W1}:0`, `${W1}:1`, `${W2}:3`].sort());
  });

  it('drops a removed worker bookings and counts them', () => {
    const l = ledger();
    l.book(req('a'));
    l.book(req('b', { dpRank: 1 }));
    l.book(req('c', { workerId: W2 }));
    expect(l.removeWorker(W1, 2000)).toBe(2);
    expect(l.load(W1, 0).registered).toBe(false);
    expect(l.load(W1, 0).requests).toBe(0);
    expect(l.load(W2, 0).requests).toBe(1);
    expect(l.counters().droppedByWorkerRemoval).toBe(2);
    expect(l.counters().workersRemoved).toBe(1);
    // Their late completion is a recognised no-op, and a late duplicate booking is ignored.
    expect(l.release('a', 'completed', 2001)).toBe('already_released');
    expect(l.book(req('b', { nowMs: 2002 })).kind).toBe('already_released');
  });

  it('forgets an unregistered worker once its work is gone', () => {
    const l = ledger();
    l.book(req('a', { workerId: W2 }));
    l.release('a', 'completed', 1000);
    expect(l.loads().some((x) => x.workerId === W2)).toBe(false);
  });
});

describe('newBlocksOfRef', () => {
  it('equals the linear count for chains booked from block 0, at every split point', () => {
    const toks = Array.from({ length: 64 * 4 }, (_, i) => (i * 7919) % 50021);
    const chain = sequenceHashes(localBlockHashes(toks, 4));
    const w = 1n as WorkerId;
    for (let booked = 0; booked <= chain.length; booked++) {
      const l = new BookingLedger({ blockSize: 4 });
      if (booked > 0) l.book({ requestId: 'a', workerId: w, dpRank: 0, promptTokens: booked * 4, overlapBlocks: 0, sequenceHashes: chain.slice(0, booked), source: 'local', nowMs: 0 });
      // A second booking sharing a shorter prefix must not change the answer.
      if (booked > 3) l.book({ requestId: 'b', workerId: w, dpRank: 0, promptTokens: 12, overlapBlocks: 0, sequenceHashes: chain.slice(0, 3), source: 'local', nowMs: 0 });
      expect(l.newBlocksOfRef(l.rankRef(w, 0), chain)).toBe(l.newBlocks(w, 0, chain));
      expect(l.newBlocksOfRef(l.rankRef(w, 0), chain)).toBe(chain.length - booked);
    }
  });
});

describe('prepared chains (what observe asks of every rank)', () => {
  it('answers newBlocksOfRef for the prepared chain as the linear count does, and stays right after a change', () => {
    const l = ledger();
    const chain = sequenceHashes(localBlockHashes(Uint32Array.from({ length: 64 }, (_, i) => i), 16));
    l.book(req('a', { sequenceHashes: chain.slice(0, 3) }));
    l.book(req('b', { dpRank: 1, sequenceHashes: chain.slice(0, 1) }));
    const refs = [l.rankRef(W1, 0), l.rankRef(W1, 1), l.rankRef(W2, 0)];
    const linear = refs.map((ref) => l.newBlocks(ref.workerId, ref.dpRank, chain));
    expect(linear).toEqual([1, 3, 4]);
    l.prepareChain(chain);
    expect(refs.map((ref) => l.newBlocksOfRef(ref, chain))).toEqual(linear);
    // A chain whose first block nobody holds: every rank's answer is the whole chain.
    const other = sequenceHashes(localBlockHashes(Uint32Array.from({ length: 32 }, (_, i) => 1000 + i), 16));
    l.prepareChain(other);
    expect(refs.map((ref) => l.newBlocksOfRef(ref, other))).toEqual([2, 2, 2]);
    // A change un-prepares it: the next answers are the ledger's new state.
    l.prepareChain(chain);
    l.release('a', 'completed', 1001);
    expect(refs.map((ref) => l.newBlocksOfRef(ref, chain))).toEqual([4, 3, 4]);
  });
});
