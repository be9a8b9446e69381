/**
 * Block and sequence hashing against Dynamo's own code: the published `dynamo-kv-router` crate
 * (1.6.1) hashes seeded random prompts (`compute_block_hash_for_seq`, `compute_seq_hash_for_block`)
 * through the oracle program in `@vantage/dynamo-oracle` (`--hash`; built by
 * `packages/dynamo-oracle/scripts/ensure-dynamo-oracle.sh`, which `npm test` runs first), and ours
 * must equal them bit for bit: every block size and prompt length (partial last blocks dropped),
 * token ids across the whole u32 range, and LoRA names absent, empty, ASCII and non-ASCII.
 * `vectors.test.ts` checks the fixed vectors of the reference notes; this checks the code itself.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localBlockHashes, sequenceHashes } from '../src/index';
import { ORACLE_BUILD_TIMEOUT_MS, oracleBinary } from '@vantage/dynamo-oracle';

let bin = '';
let dir = '';

beforeAll(() => {
  bin = oracleBinary();
  dir = mkdtempSync(join(tmpdir(), 'vantage-dynamo-hash-'));
}, ORACLE_BUILD_TIMEOUT_MS);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Case {
  readonly blockSize: number;
  readonly lora: string | null;
  readonly tokens: Uint32Array;
}

/** Dynamo's local and sequence hashes for each case. */
function dynamo(cases: readonly Case[]): Array<{ local: BigUint64Array; seq: BigUint64Array }> {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  const head = new DataView(new ArrayBuffer(8));
  head.setUint32(0, 0x31484556, true); // "VEH1"
  head.setUint32(4, cases.length, true);
  parts.push(new Uint8Array(head.buffer));
  for (const c of cases) {
    const name = enc.encode(c.lora ?? '');
    const h = new DataView(new ArrayBuffer(8));
    h.setUint32(0, c.blockSize, true);
    h.setUint32(4, name.length, true);
    const n = new DataView(new ArrayBuffer(4));
    n.setUint32(0, c.tokens.length, true);
    const toks = new Uint8Array(c.tokens.length * 4);
    const tv = new DataView(toks.buffer);
    c.tokens.forEach((t, i) => tv.setUint32(4 * i, t, true));
    parts.push(new Uint8Array(h.buffer), name, new Uint8Array(n.buffer), toks);
  }
  writeFileSync(join(dir, 'in'), Buffer.concat(parts));
  execFileSync(bin, ['--hash', join(dir, 'in'), join(dir, 'out')]);
  const b = readFileSync(join(dir, 'out'));
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  expect(b.subarray(0, 4).toString()).toBe('VEHA');
  expect(v.getUint32(4, true)).toBe(cases.length);
  let at = 8;
  return cases.map(() => {
    const k = v.getUint32(at, true);
    at += 4;
    const local = new BigUint64Array(k);
    const seq = new BigUint64Array(k);
    for (let i = 0; i < k; i++, at += 8) local[i] = v.getBigUint64(at, true);
    for (let i = 0; i < k; i++, at += 8) seq[i] = v.getBigUint64(at, true);
    return { local, seq };
  });
}

function cases(seed: number, n: number): Case[] {
  let s = seed >>> 0;
  const r = (): number => {
    // xorshift32
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 0x1_0000_0000;
  };
  const loras = [null, '', 'adapter-a', 'my-org/llama-3-8b-lora@v2', 'ñandú-日本語-🙂', 'x'.repeat(300)];
  const sizes = [1, 2, 3, 16, 32, 64, 128];
  return Array.from({ length: n }, (_, i) => {
    const blockSize = sizes[Math.floor(r() * sizes.length)]!;
    const len = Math.floor(r() * (blockSize * 9 + 4));
    const tokens = new Uint32Array(len);
    for (let j = 0; j < len; j++) {
      const x = r();
      // Mostly vocabulary-sized ids, some at the ends of the u32 range.
      tokens[j] = x < 0.05 ? 0 : x < 0.1 ? 0xffff_ffff : x < 0.2 ? Math.floor(r() * 0x1_0000_0000) : Math.floor(r() * 152_064);
    }
    return { blockSize, lora: loras[i % loras.length]!, tokens };
  });
}

describe("hashing equals Dynamo's own (dynamo-kv-router 1.6.1)", () => {
  it('local block hashes and sequence hashes, 600 seeded prompts', () => {
    const cs = cases(0x9e3779b9, 600);
    const want = dynamo(cs);
    let blocks = 0;
    cs.forEach((c, i) => {
      const local = localBlockHashes(c.tokens, c.blockSize, c.lora);
      expect(local, `case ${i}: block size ${c.blockSize}, ${c.tokens.length} tokens, LoRA ${JSON.stringify(c.lora)}`).toEqual(want[i]!.local);
      expect(sequenceHashes(local), `case ${i}: sequence hashes`).toEqual(want[i]!.seq);
      blocks += local.length;
    });
    expect(blocks).toBeGreaterThan(2000);
  });
});
