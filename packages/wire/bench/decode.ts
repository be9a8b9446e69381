/**
 * Decode throughput of RouterEvent (msgpack and JSON) against same-run
 * baselines: msgpackr's bare unpack (no validation, no exact u64 lists) and
 * JSON.parse (which loses u64 precision). The gap is the cost of validation
 * and exactness. Run: npx tsx packages/wire/bench/decode.ts
 */
import { Unpackr } from 'msgpackr';
import type { KvEvent, WorkerId } from '@vantage/types';
import { decodeRouterEventJson, decodeRouterEventMsgpack, encodeRouterEventMsgpack } from '../src/index';
import { encodeRouterEventJson } from '../test/encode';

function event(blocks: number): KvEvent {
  const bh = new BigUint64Array(blocks);
  const th = new BigUint64Array(blocks);
  for (let i = 0; i < blocks; i++) {
    bh[i] = 0x9e37_79b9_7f4a_7c15n * BigInt(i + 1) & 0xffff_ffff_ffff_ffffn;
    th[i] = 0xc2b2_ae3d_27d4_eb4fn * BigInt(i + 7) & 0xffff_ffff_ffff_ffffn;
  }
  return {
    workerId: 0xdead_beef_cafe_f00dn as WorkerId,
    dpRank: 0,
    storageTier: 'device',
    eventId: 12345n,
    data: { kind: 'stored', parentHash: null, startPosition: null, blockHashes: bh, tokensHashes: th },
  };
}

function time(label: string, iters: number, fn: () => unknown): number {
  for (let i = 0; i < Math.min(iters, 2000); i++) fn(); // warm-up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) fn();
  const ns = Number(process.hrtime.bigint() - t0) / iters;
  console.log(`${label.padEnd(44)} ${(ns / 1000).toFixed(2).padStart(9)} µs/op  ${(1e9 / ns).toFixed(0).padStart(9)} op/s`);
  return ns;
}

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
const results: Record<string, number> = {};
for (const blocks of [1, 16, 256]) {
  const e = event(blocks);
  const mp = encodeRouterEventMsgpack(e);
  const js = encodeRouterEventJson(e);
  const iters = blocks >= 256 ? 5_000 : 50_000;
  console.log(`-- stored event, ${blocks} blocks (msgpack ${mp.length} B, json ${js.length} B)`);
  results[`baseline_msgpackr_unpack_${blocks}_ns`] = time('baseline: msgpackr unpack only', iters, () => unpackr.unpack(mp));
  results[`decode_msgpack_${blocks}_ns`] = time('decodeRouterEventMsgpack', iters, () => decodeRouterEventMsgpack(mp));
  results[`baseline_json_parse_${blocks}_ns`] = time('baseline: JSON.parse (inexact)', iters, () => JSON.parse(js));
  results[`decode_json_${blocks}_ns`] = time('decodeRouterEventJson', iters, () => decodeRouterEventJson(js));
}
console.log(JSON.stringify(Object.fromEntries(Object.entries(results).map(([k, v]) => [k, Math.round(v)]))));
