import { describe, expect, it } from 'vitest';
import type { WorkerId } from '@vantage/types';
import fc from 'fast-check';
import {
  SelectionScratch,
  roundRobinPolicy,
  seededRng,
  selectWorker,
  softmaxProbabilities,
  type CandidateInput,
  type KvRouterPolicy,
  type SelectionPolicy,
} from '@vantage/selection';

const w = (n: bigint | number): WorkerId => BigInt(n) as WorkerId;

function cand(id: number | bigint, over: Partial<CandidateInput> = {}): CandidateInput {
  return {
    workerId: w(id),
    dpRank: 0,
    overlapBlocks: 0,
    activePrefillTokens: 0,
    activeDecodeBlocks: 0,
    activeRequests: 0,
    ...over,
  };
}

const req = { isl: 1000, blockSize: 64 };

/** One candidate's cost under `policy`, as the selection reports it. */
const costOf = (policy: KvRouterPolicy, c: CandidateInput): number => selectWorker(policy, req, [c], seededRng(1)).scores[0]!.score;

describe('kv_router cost, April 2026 formula (overlap_score_weight)', () => {
  // Hand-computed: prefill_tokens = active + max(0, isl - overlap*bs); cost = w*prefill/bs + decode.
  const cases: Array<[string, Partial<CandidateInput>, number, number]> = [
    ['partial overlap', { overlapBlocks: 10, activeDecodeBlocks: 20, newRequestBlocks: 6 }, 1, 360 / 64 + 26],
    ['cold, busy prefill, default new blocks = ceil(isl/bs)', { activePrefillTokens: 500 }, 1, 1500 / 64 + 16],
    ['overlap beyond isl clamps uncached at 0', { overlapBlocks: 16, activePrefillTokens: 128, activeDecodeBlocks: 10, newRequestBlocks: 0 }, 1, 2 + 10],
    ['weight 2 doubles only the prefill term', { overlapBlocks: 10, activeDecodeBlocks: 20, newRequestBlocks: 6 }, 2, 720 / 64 + 26],
    ['weight 0 leaves decode load only', { activePrefillTokens: 9999, activeDecodeBlocks: 7, newRequestBlocks: 3 }, 0, 10],
  ];
  it.each(cases)('%s', (_name, over, weight, expected) => {
    expect(costOf({ kind: 'kv_router', formula: 'overlap_weight', overlapScoreWeight: weight }, cand(1, over))).toBeCloseTo(expected, 12);
  });
});

describe('kv_router cost, later 2026 formula (prefill_load_scale)', () => {
  const cases: Array<[string, Partial<CandidateInput>, Omit<Extract<KvRouterPolicy, { formula: 'prefill_load_scale' }>, 'kind' | 'formula'>, number]> = [
    ['defaults equal the April cost when overlap <= isl', { overlapBlocks: 10, activeDecodeBlocks: 20, newRequestBlocks: 6 }, {}, 1000 / 64 - 10 + 26],
    ['host and disk tiers credited at 0.75 and 0.25', { overlapBlocks: 10, hostOverlapBlocks: 2, diskOverlapBlocks: 4, activeDecodeBlocks: 20, newRequestBlocks: 6 }, {}, 1000 / 64 - 12.5 + 26],
    ['credit beyond raw prefill clamps at 0', { overlapBlocks: 40, activePrefillTokens: 128, activeDecodeBlocks: 10, newRequestBlocks: 0 }, {}, 0 + 10],
    ['scale 32, request weight 2', { overlapBlocks: 10, activeDecodeBlocks: 20, newRequestBlocks: 6, activeRequests: 3 }, { prefillLoadScale: 32, decodeActiveRequestWeight: 2 }, 32 * 5.625 + 26 + 6],
    ['credit 0.5 halves the device credit', { overlapBlocks: 10, activePrefillTokens: 64 }, { overlapScoreCredit: 0.5 }, (64 + 1000) / 64 - 5 + 16],
  ];
  it.each(cases)('%s', (_name, over, params, expected) => {
    expect(costOf({ kind: 'kv_router', formula: 'prefill_load_scale', ...params }, cand(1, over))).toBeCloseTo(expected, 12);
  });
});

describe('kv_router selection', () => {
  const april: SelectionPolicy = { kind: 'kv_router', formula: 'overlap_weight' };

  it('temperature 0 picks the lowest cost and reports every candidate with its inputs', () => {
    const cs = [
      cand(3, { activePrefillTokens: 500 }), // 39.4375
      cand(1, { overlapBlocks: 10, activeDecodeBlocks: 20, newRequestBlocks: 6 }), // 31.625
      cand(2, { overlapBlocks: 16, activePrefillTokens: 128, activeDecodeBlocks: 10, newRequestBlocks: 0 }), // 12
    ];
    const r = selectWorker(april, req, cs, seededRng(1));
    expect(r.chosen).toEqual({ workerId: w(2), dpRank: 0, index: 2 });
    expect(r.reason).toBe('lowest_cost');
    expect(r.sense).toBe('lower-is-better');
    expect(r.scores.map((s) => s.score)).toEqual([1500 / 64 + 16, 360 / 64 + 26, 12]);
    expect(r.scores[1]!.terms).toMatchObject({ uncachedTokens: 360, prefillTokens: 360, decodeBlocks: 26 });
    expect(r.scores[0]!.input).toBe(cs[0]);
  });

  it('ties go to the smaller tree first', () => {
    const cs = [cand(1, { treeSize: 100 }), cand(2, { treeSize: 50 }), cand(3, { treeSize: 70 })];
    for (let seed = 0; seed < 50; seed++) {
      const r = selectWorker(april, req, cs, seededRng(seed));
      expect(r.chosen!.workerId).toBe(w(2));
      expect(r.reason).toBe('lowest_cost_tie_tree');
    }
  });

  it('remaining ties are a seeded uniform pick, independent of listing order', () => {
    const cs = [cand(1), cand(2), cand(3)];
    const counts = new Map<bigint, number>();
    let orderDependent = 0;
    const reasons = new Set<string>();
    for (let seed = 0; seed < 3000; seed++) {
      const a = selectWorker(april, req, cs, seededRng(seed));
      const b = selectWorker(april, req, [...cs].reverse(), seededRng(seed));
      if (a.chosen!.workerId !== b.chosen!.workerId) orderDependent++;
      reasons.add(a.reason);
      counts.set(a.chosen!.workerId, (counts.get(a.chosen!.workerId) ?? 0) + 1);
    }
    expect(orderDependent).toBe(0);
    expect([...reasons]).toEqual(['lowest_cost_tie_random']);
    for (const id of [1n, 2n, 3n]) expect(counts.get(id)).toBeGreaterThan(850);
  });

  it('a lower cost beats a smaller tree', () => {
    const cs = [cand(1, { treeSize: 1, activeDecodeBlocks: 1 }), cand(2, { treeSize: 1000 })];
    expect(selectWorker(april, req, cs, seededRng(0)).chosen!.workerId).toBe(w(2));
  });

  it('softmax probabilities follow exp(-(cost/range)/T) and are uniform when costs are equal', () => {
    const p = softmaxProbabilities([0, 5, 10], 1);
    const e = [1, Math.exp(-0.5), Math.exp(-1)];
    const z = e[0]! + e[1]! + e[2]!;
    p.forEach((v, i) => expect(v).toBeCloseTo(e[i]! / z, 12));
    // Shifting every cost leaves the distribution unchanged (normalised by range).
    softmaxProbabilities([100, 105, 110], 1).forEach((v, i) => expect(v).toBeCloseTo(p[i]!, 12));
    expect(softmaxProbabilities([4, 4], 0.5)).toEqual([0.5, 0.5]);
  });

  it('temperature sampling matches the softmax distribution (chi-square over seeded draws)', () => {
    const policy: SelectionPolicy = { kind: 'kv_router', formula: 'overlap_weight', temperature: 0.5 };
    // Costs 16, 16 + 320/64 = 21, 16 + 640/64 = 26 (cold request blocks plus booked prefill).
    const cs = [cand(10), cand(20, { activePrefillTokens: 320 }), cand(30, { activePrefillTokens: 640 })];
    const rng = seededRng(42);
    const draws = 30_000;
    const observed = new Map<bigint, number>();
    let expected: number[] = [];
    const reasons = new Set<string>();
    for (let i = 0; i < draws; i++) {
      const r = selectWorker(policy, req, cs, rng);
      reasons.add(r.reason);
      if (i === 0) expected = r.scores.map((s) => s.probability! * draws);
      observed.set(r.chosen!.workerId, (observed.get(r.chosen!.workerId) ?? 0) + 1);
    }
    expect([...reasons]).toEqual(['sampled']);
    const probs = softmaxProbabilities([16, 21, 26], 0.5);
    expected.forEach((e, i) => expect(e / draws).toBeCloseTo(probs[i]!, 12));
    let chi2 = 0;
    cs.forEach((c, i) => {
      const o = observed.get(c.workerId) ?? 0;
      chi2 += (o - expected[i]!) ** 2 / expected[i]!;
    });
    // df = 2: P(chi2 > 13.82) = 0.001. A fixed seed keeps the test deterministic.
    expect(chi2).toBeLessThan(13.82);
  });

  it('the same seed reproduces the same sequence of sampled choices', () => {
    const policy: SelectionPolicy = { kind: 'kv_router', formula: 'prefill_load_scale', temperature: 1 };
    const cs = [cand(1), cand(2, { activePrefillTokens: 100 }), cand(3, { activePrefillTokens: 300 })];
    const run = (seed: number) => {
      const rng = seededRng(seed);
      return Array.from({ length: 50 }, () => selectWorker(policy, req, cs, rng).chosen!.workerId);
    };
    expect(run(7)).toEqual(run(7));
    expect(run(7)).not.toEqual(run(8));
  });

  it('keeps full u64 worker ids and orders them exactly', () => {
    const big = 0xffff_ffff_ffff_fff0n;
    const cs = [cand(big + 1n), cand(big)];
    const r = selectWorker({ kind: 'round_robin', state: { next: 0 } }, req, cs, seededRng(0));
    expect(r.chosen!.workerId).toBe(big);
  });

  it('returns no choice for no candidates and rejects a bad request', () => {
    expect(selectWorker(april, req, [], seededRng(0)).chosen).toBeNull();
    expect(() => selectWorker(april, { isl: 0, blockSize: 64 }, [cand(1)], seededRng(0))).toThrow(RangeError);
  });
});

describe('llm-d token-aware routing', () => {
  // isl 1000, bs 100: overlap 8 blocks = 0.8 cached (sticky at the threshold), 9 = 0.9.
  const r1000 = { isl: 1000, blockSize: 100 };
  const base = { kind: 'llmd', scorer: 'token-load', peakPrefillThroughput: 1000, maxTTFTPenaltyMs: 100 } as const;

  it('narrows to sticky endpoints while the TTFT penalty is within bounds', () => {
    // Sticky A: (500 + 100) tok / 1000 tok/s = 600 ms; non-sticky B: 1000 ms. 600 - 1000 < 100: stay sticky.
    const cs = [cand(1, { overlapBlocks: 9, activePrefillTokens: 500 }), cand(2)];
    const r = selectWorker(base, r1000, cs, seededRng(0));
    expect(r.reason).toBe('sticky');
    expect(r.chosen!.workerId).toBe(w(1));
    expect(r.scores.map((s) => s.eligible)).toEqual([true, false]);
    expect(r.scores[0]!.terms.ttftEstimateMs).toBeCloseTo(600, 9);
    expect(r.scores[1]!.terms.ttftEstimateMs).toBeCloseTo(1000, 9);
    // B would score higher on token load (1000 vs 600 tokens): the filter is what kept A.
    expect(r.scores[1]!.score).toBeLessThan(r.scores[0]!.score);
  });

  it('treats a cached fraction of exactly 0.8 as sticky', () => {
    const cs = [cand(1, { overlapBlocks: 8, activePrefillTokens: 300 }), cand(2)];
    const r = selectWorker(base, r1000, cs, seededRng(0));
    expect(r.scores[0]!.terms.sticky).toBe(1);
    expect(r.chosen!.workerId).toBe(w(1));
  });

  it('releases stickiness when best sticky minus best non-sticky exceeds maxTTFTPenaltyMs', () => {
    // Sticky A: (2000 + 100)/1000 s = 2100 ms; B: 1000 ms; gap 1100 > 100 → all endpoints, token load decides.
    const cs = [cand(1, { overlapBlocks: 9, activePrefillTokens: 2000 }), cand(2)];
    const r = selectWorker(base, r1000, cs, seededRng(0));
    expect(r.reason).toBe('sticky_released');
    expect(r.scores.every((s) => s.eligible)).toBe(true);
    expect(r.chosen!.workerId).toBe(w(2));
    expect(r.scores[0]!.score).toBeCloseTo(1 - 2100 / 4_194_304, 15);
    expect(r.scores[1]!.score).toBeCloseTo(1 - 1000 / 4_194_304, 15);
  });

  it('counts the request\'s own uncached tokens in the TTFT estimate', () => {
    // Penalty 200 ms. With the current request: A 1150 ms vs B 1000 ms → kept (in-flight only, 1050 vs 0, would release).
    const policy = { ...base, maxTTFTPenaltyMs: 200 };
    const cs = [cand(1, { overlapBlocks: 9, activePrefillTokens: 1050 }), cand(2)];
    expect(selectWorker(policy, r1000, cs, seededRng(0)).reason).toBe('sticky');
  });

  it('a zero penalty disables the load gate', () => {
    const cs = [cand(1, { overlapBlocks: 9, activePrefillTokens: 1e9 }), cand(2)];
    expect(selectWorker({ ...base, maxTTFTPenaltyMs: 0 }, r1000, cs, seededRng(0)).chosen!.workerId).toBe(w(1));
  });

  it('no sticky endpoint: all kept, token load decides', () => {
    const cs = [cand(1, { overlapBlocks: 5, activePrefillTokens: 100 }), cand(2, { activePrefillTokens: 0 })];
    // A: 100 + 500 = 600 tokens; B: 0 + 1000 → A wins.
    const r = selectWorker(base, r1000, cs, seededRng(0));
    expect(r.reason).toBe('no_sticky');
    expect(r.chosen!.workerId).toBe(w(1));
  });

  it('token load saturates at 4,194,304 tokens', () => {
    const cs = [cand(1, { activePrefillTokens: 5_000_000 })];
    expect(selectWorker(base, r1000, cs, seededRng(0)).scores[0]!.score).toBe(0);
  });

  it('active-request scorer picks the fewest active requests among the kept endpoints', () => {
    const policy = { ...base, scorer: 'active-request' } as const;
    const cs = [cand(1, { overlapBlocks: 9, activeRequests: 6 }), cand(2, { overlapBlocks: 10, activeRequests: 3 }), cand(3, { activeRequests: 0 })];
    const r = selectWorker(policy, r1000, cs, seededRng(0));
    expect(r.chosen!.workerId).toBe(w(2)); // 3 is idle but not sticky
    expect(r.scores[1]!.score).toBeCloseTo(0.5, 12);
  });
});

describe('round robin and random', () => {
  it('round robin cycles through candidates in worker-id order', () => {
    const policy = roundRobinPolicy();
    const cs = [cand(30), cand(10), cand(20)];
    const picks = Array.from({ length: 6 }, () => selectWorker(policy, req, cs, seededRng(0)).chosen!.workerId);
    expect(picks).toEqual([10n, 20n, 30n, 10n, 20n, 30n]);
  });

  it('random is seeded and covers every candidate', () => {
    const cs = [cand(1), cand(2), cand(3), cand(4)];
    const rng = seededRng(9);
    const seen = new Set<bigint>();
    for (let i = 0; i < 200; i++) seen.add(selectWorker({ kind: 'random' }, req, cs, rng).chosen!.workerId);
    expect(seen.size).toBe(4);
    const a = selectWorker({ kind: 'random' }, req, cs, seededRng(5)).chosen;
    expect(selectWorker({ kind: 'random' }, req, cs, seededRng(5)).chosen).toEqual(a);
  });
});

describe('candidates already in (worker, rank) order', () => {
  // The pool lists candidates sorted, so the canonical order is taken without sorting; the
  // result must be exactly the one a shuffled listing gives (mapped back to the caller's indices).
  const sorted: CandidateInput[] = [];
  for (let i = 0; i < 24; i++) {
    // Large u64 ids, two dp ranks on some workers, and ties in cost so seeded picks matter.
    const id = 0xffff_ffff_ffff_f000n + BigInt(i >> 1);
    sorted.push(cand(id, { dpRank: i & 1, overlapBlocks: i % 3, activeDecodeBlocks: (i * 7) % 5, newRequestBlocks: 16 - (i % 3), treeSize: i % 2 }));
  }
  const policies: SelectionPolicy[] = [
    { kind: 'kv_router', formula: 'overlap_weight' },
    { kind: 'kv_router', formula: 'prefill_load_scale', temperature: 0.7 },
    { kind: 'kv_router', formula: 'overlap_weight', tieBreakByTreeSize: false },
    { kind: 'llmd', scorer: 'token-load', peakPrefillThroughput: 1000, maxTTFTPenaltyMs: 100 },
    { kind: 'random' },
  ];
  it.each(policies.map((p) => [JSON.stringify(p), p] as const))('%s: same choice, reason and scores as a shuffled listing', (_n, policy) => {
    const shuffleRng = seededRng(99);
    for (let seed = 0; seed < 200; seed++) {
      const perm = sorted.map((_, i) => i);
      for (let i = perm.length - 1; i > 0; i--) {
        const j = Math.floor(shuffleRng.next() * (i + 1));
        [perm[i], perm[j]] = [perm[j]!, perm[i]!];
      }
      const shuffled = perm.map((i) => sorted[i]!);
      const a = selectWorker(policy, req, sorted, seededRng(seed));
      const b = selectWorker(policy, req, shuffled, seededRng(seed));
      expect(a.reason).toBe(b.reason);
      expect(a.chosen!.workerId).toBe(b.chosen!.workerId);
      expect(a.chosen!.dpRank).toBe(b.chosen!.dpRank);
      expect(perm[b.chosen!.index]).toBe(a.chosen!.index);
      // Each candidate's score (and probability when sampled) is the same whichever listing it came in.
      for (let k = 0; k < perm.length; k++) expect(b.scores[k]).toEqual(a.scores[perm[k]!]);
    }
  });

  it('round robin walks the same sequence for a sorted and a shuffled listing', () => {
    const rev = [...sorted].reverse();
    const pa = roundRobinPolicy();
    const pb = roundRobinPolicy();
    for (let k = 0; k < 50; k++) {
      const a = selectWorker(pa, req, sorted, seededRng(k));
      const b = selectWorker(pb, req, rev, seededRng(k));
      expect([a.chosen!.workerId, a.chosen!.dpRank]).toEqual([b.chosen!.workerId, b.chosen!.dpRank]);
    }
  });
});

describe('kv_router selection into a reused scratch', () => {
  it('answers exactly what a fresh selection does, call after call, whatever the candidate count', () => {
    const policies: SelectionPolicy[] = [
      { kind: 'kv_router', formula: 'prefill_load_scale' },
      { kind: 'kv_router', formula: 'overlap_weight', overlapScoreWeight: 1.5 },
      { kind: 'kv_router', formula: 'prefill_load_scale', decodeActiveRequestWeight: 2, tieBreakByTreeSize: false },
      { kind: 'kv_router', formula: 'overlap_weight', temperature: 0.7 },
    ];
    const candArb = fc.record({
      id: fc.integer({ min: 0, max: 6 }),
      overlapBlocks: fc.integer({ min: 0, max: 20 }),
      hostOverlapBlocks: fc.integer({ min: 0, max: 4 }),
      activePrefillTokens: fc.integer({ min: 0, max: 3000 }),
      activeDecodeBlocks: fc.integer({ min: 0, max: 40 }),
      activeRequests: fc.integer({ min: 0, max: 5 }),
      newRequestBlocks: fc.integer({ min: 0, max: 16 }),
      treeSize: fc.integer({ min: 0, max: 3 }),
    });
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: policies.length - 1 }), fc.array(candArb, { maxLength: 9 })), { maxLength: 12 }), (calls) => {
        // The two sides share one policy sequence and one seed; one reuses a scratch throughout.
        // A third lists its candidates in canonical order and says so (candidatesInOrder, as the
        // indexer's pool does): the same answers as a caller that does not say it.
        const scratch = new SelectionScratch();
        const ordered = new SelectionScratch({ candidatesInOrder: true });
        const rngA = seededRng(3);
        const rngB = seededRng(3);
        const rngC = seededRng(5);
        const rngD = seededRng(5);
        for (const [p, cs] of calls) {
          const candidates = cs.map(({ id, ...over }) => cand(id, over));
          const fresh = selectWorker(policies[p]!, req, candidates, rngA);
          const reused = selectWorker(policies[p]!, req, candidates, rngB, scratch);
          expect(reused).toEqual(fresh);
          const sorted = [...candidates].sort((x, y) => (x.workerId < y.workerId ? -1 : x.workerId > y.workerId ? 1 : x.dpRank - y.dpRank));
          expect(selectWorker(policies[p]!, req, sorted, rngD, ordered)).toEqual(selectWorker(policies[p]!, req, sorted, rngC));
        }
      }),
      { seed: 0x5c4, numRuns: 300 },
    );
  });
});
