/**
 * Our decoders against Dynamo's own encoders: the published `dynamo-kv-router` crate (1.6.1)
 * serialises `RouterEvent`s, `ActiveLoad`s and `ActiveSequenceEvent`s with its serde derives, as its
 * publishers do (MessagePack with field names, `rmp_serde::to_vec_named`, and JSON), through the
 * oracle program in `@vantage/dynamo-oracle` (`--encode-wire`; built by
 * `packages/dynamo-oracle/scripts/ensure-dynamo-oracle.sh`, which `npm test` runs first). Every message
 * must decode to exactly what was encoded, 64-bit ids and hashes included.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExternalHash, KvEvent, StorageTier, WorkerId } from '@vantage/types';
import { decodeActiveLoad, decodeActiveSequenceEvents, decodeRouterEventJson, decodeRouterEventMsgpack } from '../src/index';
// The oracle program's event-file writer and builder (test tooling).
import { encodeEvents, ORACLE_BUILD_TIMEOUT_MS, oracleBinary } from '@vantage/dynamo-oracle';

let records: Array<{ kind: number; bytes: Uint8Array }> = [];
let dir = '';

const TOP = 0xffff_ffff_ffff_ffffn;
const u64s = (...xs: bigint[]): BigUint64Array => BigUint64Array.from(xs);
const events: KvEvent[] = [
  {
    workerId: TOP as WorkerId,
    dpRank: 0,
    storageTier: 'device',
    eventId: 1n,
    data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: u64s(TOP, 0n, 1n << 63n), tokensHashes: u64s(2n ** 53n + 1n, TOP - 1n, 42n) },
  },
  {
    workerId: 0x8000_0000_0000_0001n as WorkerId,
    dpRank: 7,
    storageTier: 'host_pinned',
    eventId: TOP,
    data: { kind: 'stored', parentHash: (1n << 63n) as ExternalHash, startPosition: null, blockHashes: u64s(5n), tokensHashes: u64s(6n) },
  },
  ...(['disk', 'external'] as StorageTier[]).map(
    (tier, i): KvEvent => ({ workerId: 3n as WorkerId, dpRank: 1, storageTier: tier, eventId: BigInt(10 + i), data: { kind: 'removed', blockHashes: u64s(TOP, 1n, 2n ** 53n + 1n) } }),
  ),
  { workerId: 3n as WorkerId, dpRank: 2, storageTier: 'device', eventId: 12n, data: { kind: 'cleared' } },
];

beforeAll(() => {
  const bin = oracleBinary();
  dir = mkdtempSync(join(tmpdir(), 'vantage-dynamo-serde-'));
  writeFileSync(join(dir, 'events'), encodeEvents(events));
  execFileSync(bin, ['--encode-wire', join(dir, 'wire'), `x=${join(dir, 'events')}`]);
  const b = readFileSync(join(dir, 'wire'));
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  expect(b.subarray(0, 4).toString()).toBe('VEW1');
  const n = v.getUint32(4, true);
  let at = 8;
  records = [];
  for (let i = 0; i < n; i++) {
    const len = v.getUint32(at + 1, true);
    records.push({ kind: b[at]!, bytes: new Uint8Array(b.subarray(at + 5, at + 5 + len)) });
    at += 5 + len;
  }
  expect(at).toBe(b.length);
}, ORACLE_BUILD_TIMEOUT_MS);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const ofKind = (k: number): Uint8Array[] => records.filter((r) => r.kind === k).map((r) => r.bytes);

/** The fields a RouterEvent carries, in a comparable form (typed arrays as plain bigint arrays). */
function plain(e: KvEvent): unknown {
  const d = e.data;
  return {
    workerId: e.workerId,
    dpRank: e.dpRank,
    storageTier: e.storageTier,
    eventId: e.eventId,
    data:
      d.kind === 'stored'
        ? { kind: d.kind, parentHash: d.parentHash, startPosition: d.startPosition, blockHashes: [...d.blockHashes], tokensHashes: [...d.tokensHashes] }
        : d.kind === 'removed'
          ? { kind: d.kind, blockHashes: [...d.blockHashes] }
          : { kind: d.kind },
  };
}

describe("decoding what Dynamo's own serde writes (dynamo-kv-router 1.6.1)", () => {
  it('RouterEvent, MessagePack with field names (the event plane)', () => {
    const got = ofKind(1).map((bytes) => {
      const r = decodeRouterEventMsgpack(bytes);
      if (!r.ok) throw new Error(`${r.code}: ${r.reason}`);
      return plain(r.value);
    });
    expect(got).toEqual(events.map(plain));
  });

  it('RouterEvent, JSON (legacy kv_events and JetStream)', () => {
    const got = ofKind(2).map((bytes) => {
      const r = decodeRouterEventJson(bytes);
      if (!r.ok) throw new Error(`${r.code}: ${r.reason}: ${Buffer.from(bytes).toString()}`);
      return plain(r.value);
    });
    expect(got).toEqual(events.map(plain));
  });

  it('ActiveLoad, MessagePack and JSON', () => {
    const want = [
      { workerId: TOP, dpRank: 3, activeDecodeBlocks: 12, activePrefillTokens: 4096, kvUsedBlocks: null, schedulerLoadScope: null },
      { workerId: 0x8000_0000_0000_0001n, dpRank: 0, activeDecodeBlocks: null, activePrefillTokens: null, kvUsedBlocks: 77, schedulerLoadScope: null },
    ];
    for (const [k, format] of [
      [3, 'msgpack'],
      [4, 'json'],
    ] as const) {
      const got = ofKind(k).map((bytes) => {
        const r = decodeActiveLoad(bytes, { format });
        if (!r.ok) throw new Error(`${r.code}: ${r.reason}`);
        return r.value;
      });
      expect(got).toEqual(want);
    }
  });

  it('ActiveSequenceEvent and ActiveSequenceEventBatch, MessagePack and JSON', () => {
    const head = { requestId: 'req-1', workerId: TOP - 1n, dpRank: 2 };
    const want = [
      {
        ...head,
        routerId: 0xfeed_face_cafe_beefn,
        loraName: 'adapter-a',
        data: {
          kind: 'add_request',
          tokenSequence: u64s(TOP, 1n, 1n << 63n),
          trackPrefillTokens: false,
          expectedOutputTokens: 256,
          prefillLoadHint: { initialEffectivePrefillTokens: 1024, expectedPrefillDuration: { secs: 1n, nanos: 500_000_001 } },
        },
      },
      { ...head, routerId: 7n, loraName: null, data: { kind: 'mark_prefill_completed' } },
      { ...head, routerId: 7n, loraName: null, data: { kind: 'free' } },
    ];
    for (const [k, format] of [
      [5, 'msgpack'],
      [6, 'json'],
    ] as const) {
      const got = ofKind(k).map((bytes) => {
        const r = decodeActiveSequenceEvents(bytes, { format });
        if (!r.ok) throw new Error(`${r.code}: ${r.reason}: ${format === 'json' ? Buffer.from(bytes).toString() : ''}`);
        expect(r.value).toHaveLength(1);
        return r.value[0];
      });
      expect(got).toEqual(want);
    }
    // The same three as one ActiveSequenceEventBatch (Dynamo's replica-sync batches).
    for (const [k, format] of [
      [7, 'msgpack'],
      [8, 'json'],
    ] as const) {
      const [bytes, ...more] = ofKind(k);
      expect(more).toEqual([]);
      const r = decodeActiveSequenceEvents(bytes!, { format });
      if (!r.ok) throw new Error(`${r.code}: ${r.reason}`);
      expect(r.value).toEqual(want);
    }
  });
});
