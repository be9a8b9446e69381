/** Small constructors for domain KV events in tests. */
import type { ExternalHash, KvEvent, StorageTier, WorkerId } from '@vantage/types';

export const W = (v: bigint | number): WorkerId => BigInt(v) as WorkerId;

export function stored(
  worker: bigint | number,
  eventId: bigint | number,
  parent: bigint | number | null,
  blocks: ReadonlyArray<readonly [ext: bigint | number, local: bigint | number]>,
  opts: { dp?: number; tier?: StorageTier } = {},
): KvEvent {
  return {
    workerId: W(worker),
    dpRank: opts.dp ?? 0,
    storageTier: opts.tier ?? 'device',
    eventId: BigInt(eventId),
    data: {
      kind: 'stored',
      parentHash: parent === null ? null : (BigInt(parent) as ExternalHash),
      startPosition: null,
      blockHashes: BigUint64Array.from(blocks.map((b) => BigInt(b[0]))),
      tokensHashes: BigUint64Array.from(blocks.map((b) => BigInt(b[1]))),
    },
  };
}

export function removed(
  worker: bigint | number,
  eventId: bigint | number,
  exts: ReadonlyArray<bigint | number>,
  opts: { dp?: number; tier?: StorageTier } = {},
): KvEvent {
  return {
    workerId: W(worker),
    dpRank: opts.dp ?? 0,
    storageTier: opts.tier ?? 'device',
    eventId: BigInt(eventId),
    data: { kind: 'removed', blockHashes: BigUint64Array.from(exts.map((e) => BigInt(e))) },
  };
}

export function cleared(worker: bigint | number, eventId: bigint | number, opts: { dp?: number } = {}): KvEvent {
  return {
    workerId: W(worker),
    dpRank: opts.dp ?? 0,
    storageTier: 'device',
    eventId: BigInt(eventId),
    data: { kind: 'cleared' },
  };
}

export const locals = (...xs: Array<bigint | number>): BigUint64Array => BigUint64Array.from(xs.map((x) => BigInt(x)));
