// The CLI driven in-process through run(argv, io), against Dynamo's published
// hash vectors and against messages produced by the wire encoders.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { KvEvent, WorkerId } from '@vantage/types';
import { encodeActiveLoad, encodeEventPlaneMessage, encodeRouterEventMsgpack } from '@vantage/wire';
import { encodeActiveSequenceBatch, encodeRouterEventJson } from '@vantage/wire/test/encode';
import { EXIT, run, type CliIo } from '../src/index';

// The shared folder beside the repository, or VANTAGE_SHARED for a checkout that has none beside it.
const beside = fileURLToPath(new URL('../../../../shared', import.meta.url));
const vectorsPath = `${existsSync(beside) ? beside : (process.env['VANTAGE_SHARED'] ?? beside)}/reference/dynamo-hash-vectors.json`;
const vectors = JSON.parse(readFileSync(vectorsPath, 'utf8')) as {
  local_block_hash: { tokens: number[]; xxh3_64: string }[];
  sequence_hash: { tokens: number[]; block_size: number; sequence_hashes: string[] }[];
  lora: { tokens: number[]; lora_name: string; xxh3_64: string }[];
};

interface Captured {
  code: number;
  out: string;
  err: string;
}

async function cli(argv: string[], opts: { stdin?: Uint8Array | string; files?: Record<string, Uint8Array | string> } = {}): Promise<Captured> {
  let out = '';
  let err = '';
  const bytes = (v: Uint8Array | string) => (typeof v === 'string' ? new TextEncoder().encode(v) : v);
  const io: CliIo = {
    stdout: (t) => void (out += t),
    stderr: (t) => void (err += t),
    readStdin: () => Promise.resolve(bytes(opts.stdin ?? '')),
    readFile: (p) => {
      const f = opts.files?.[p];
      return f === undefined ? Promise.reject(Object.assign(new Error('no such file'), { code: 'ENOENT' })) : Promise.resolve(bytes(f));
    },
  };
  const code = await run(argv, io);
  return { code, out, err };
}

interface HashJson {
  block_size: number;
  tokens: number;
  dropped_partial_tokens: number;
  blocks: { index: number; local_hash: string; local_hash_hex: string; sequence_hash: string; sequence_hash_hex: string }[];
}

describe('vantage hash', () => {
  it.each(vectors.sequence_hash)('sequence vector $tokens', async (v) => {
    const r = await cli(['hash', '--block-size', String(v.block_size), '--tokens', v.tokens.join(','), '--output', 'json']);
    expect(r.code).toBe(EXIT.OK);
    const j = JSON.parse(r.out) as HashJson;
    expect(j.blocks.map((b) => b.sequence_hash)).toEqual(v.sequence_hashes);
    expect(j.blocks.map((b) => BigInt(`0x${b.sequence_hash_hex}`).toString())).toEqual(v.sequence_hashes);
    expect(j.dropped_partial_tokens).toBe(0);
  });

  it.each(vectors.local_block_hash)('local vector $tokens, with a dropped partial block', async (v) => {
    const r = await cli(['hash', '--block-size', '4', '--tokens', [...v.tokens, 99, 98].join(' '), '--output', 'json']);
    const j = JSON.parse(r.out) as HashJson;
    expect(j.blocks).toHaveLength(1);
    expect(j.blocks[0]!.local_hash).toBe(v.xxh3_64);
    // seq[0] = local[0]
    expect(j.blocks[0]!.sequence_hash).toBe(v.xxh3_64);
    expect(j.dropped_partial_tokens).toBe(2);
  });

  it.each(vectors.lora)('LoRA vector $lora_name, tokens from a JSON file', async (v) => {
    const r = await cli(['hash', '--block-size', '4', '--lora', v.lora_name, '--tokens-file', 't.json', '--output', 'json'], {
      files: { 't.json': JSON.stringify(v.tokens) },
    });
    expect(r.code).toBe(EXIT.OK);
    expect((JSON.parse(r.out) as HashJson).blocks[0]!.local_hash).toBe(v.xxh3_64);
  });

  it('text output lists index, both hashes in decimal and hex, and the dropped count; stdin works', async () => {
    const v = vectors.sequence_hash[1]!;
    const r = await cli(['hash', '--block-size', '4', '--tokens-file', '-'], { stdin: `${v.tokens.join('\n')}\n1\n` });
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toContain('dropped_partial_tokens 1');
    const rows = r.out.trim().split('\n').slice(2);
    expect(rows).toHaveLength(3);
    rows.forEach((row, i) => {
      const [index, , , seq, seqHex] = row.trim().split(/\s+/);
      expect(Number(index)).toBe(i);
      expect(seq).toBe(v.sequence_hashes[i]);
      expect(BigInt(`0x${seqHex}`).toString()).toBe(v.sequence_hashes[i]);
    });
  });

  it('bad arguments and bad data give documented exit codes', async () => {
    expect((await cli(['hash', '--tokens', '1'])).code).toBe(EXIT.USAGE);
    expect((await cli(['hash', '--block-size', '0', '--tokens', '1'])).code).toBe(EXIT.USAGE);
    expect((await cli(['hash', '--block-size', '4'])).code).toBe(EXIT.USAGE);
    expect((await cli(['hash', '--block-size', '4', '--tokens', '1', '--tokens-file', 'x'])).code).toBe(EXIT.USAGE);
    expect((await cli(['hash', '--block-size', '4', '--tokens', '1', '--bogus'])).code).toBe(EXIT.USAGE);
    const neg = await cli(['hash', '--block-size', '4', '--tokens', '1,-2']);
    expect(neg.code).toBe(EXIT.DATA);
    expect(neg.err).toContain('token 1');
    expect((await cli(['hash', '--block-size', '4', '--tokens', '4294967296'])).code).toBe(EXIT.DATA);
    expect((await cli(['hash', '--block-size', '4', '--tokens-file', 'missing.txt'])).code).toBe(EXIT.NO_INPUT);
  });
});

const event: KvEvent = {
  workerId: 18446744073709551615n as WorkerId,
  dpRank: 3,
  storageTier: 'host_pinned',
  eventId: 9223372036854775809n,
  data: { kind: 'stored', parentHash: null, startPosition: 0, blockHashes: BigUint64Array.of(1n << 63n), tokensHashes: BigUint64Array.of(14643705804678351452n) },
};

describe('vantage decode', () => {
  it('auto-detects an envelope (hex text) and prints u64s as exact decimals', async () => {
    const bytes = encodeEventPlaneMessage({ publisherId: 1n << 63n, sequence: 5n, publishedAtMs: 1_760_000_000_000n }, { kind: 'kv_event', event });
    const r = await cli(['decode', 'cap.hex'], { files: { 'cap.hex': Buffer.from(bytes).toString('hex').replace(/(.{32})/g, '$1\n') } });
    expect(r.code).toBe(EXIT.OK);
    const j = JSON.parse(r.out) as { format: string; event_plane_message: { kind: string; envelope: Record<string, unknown>; event: Record<string, unknown> } };
    expect(j.format).toBe('envelope');
    expect(j.event_plane_message.kind).toBe('kv_event');
    expect(j.event_plane_message.envelope.publisherId).toBe('9223372036854775808');
    expect(j.event_plane_message.event.workerId).toBe('18446744073709551615');
    expect(j.event_plane_message.event.eventId).toBe('9223372036854775809');
    expect((j.event_plane_message.event.data as { tokensHashes: string[] }).tokensHashes).toEqual(['14643705804678351452']);
  });

  it('decodes raw msgpack from stdin, base64, and legacy JSON', async () => {
    const raw = await cli(['decode', '--input-encoding', 'raw'], { stdin: encodeRouterEventMsgpack(event) });
    expect(raw.code).toBe(EXIT.OK);
    expect(JSON.parse(raw.out)).toMatchObject({ format: 'msgpack-router-event', router_event: { workerId: '18446744073709551615', dpRank: 3 } });
    const b64 = await cli(['decode', '-'], { stdin: Buffer.from(encodeActiveLoad({ workerId: 7n as WorkerId, dpRank: 0, activeDecodeBlocks: 4, activePrefillTokens: 512, schedulerLoadScope: null, kvUsedBlocks: null })).toString('base64') });
    expect(JSON.parse(b64.out)).toMatchObject({ format: 'active-load', active_load: { workerId: '7', activePrefillTokens: 512 } });
    const json = await cli(['decode', '--format', 'json-router-event', 'e.json'], { files: { 'e.json': encodeRouterEventJson({ ...event, dpRank: 0, storageTier: 'device', data: { kind: 'cleared' } }, { generation: 'base' }) } });
    expect(json.code).toBe(EXIT.OK);
    expect(JSON.parse(json.out)).toMatchObject({ router_event: { workerId: '18446744073709551615', dpRank: 0, storageTier: 'device' } });
  });

  it('decodes an active-sequence batch', async () => {
    const bytes = encodeActiveSequenceBatch([
      { requestId: 'a', workerId: 1n as WorkerId, dpRank: 0, routerId: 2n, loraName: null, data: { kind: 'free' } },
      { requestId: 'b', workerId: 1n as WorkerId, dpRank: 0, routerId: 2n, loraName: 'x', data: { kind: 'mark_prefill_completed' } },
    ]);
    const r = await cli(['decode', '--format', 'active-sequence'], { stdin: bytes });
    expect(r.code).toBe(EXIT.OK);
    const j = JSON.parse(r.out) as { active_sequence_events: { requestId: string }[] };
    expect(j.active_sequence_events.map((e) => e.requestId)).toEqual(['a', 'b']);
  });

  it('a rejection prints the code and reason and exits 2', async () => {
    const cut = encodeRouterEventMsgpack(event).subarray(0, 20);
    const r = await cli(['decode', '--format', 'msgpack-router-event', '--input-encoding', 'raw'], { stdin: cut });
    expect(r.code).toBe(EXIT.REJECTED);
    expect(r.err).toMatch(/truncated: /);
    expect(r.out).toBe('');
    const bad = await cli(['decode', '--format', 'json-router-event'], { stdin: '{"worker_id":18446744073709551616,"event":{"event_id":1,"data":"cleared"}}' });
    expect(bad.code).toBe(EXIT.REJECTED);
    expect(bad.err).toContain('out_of_range');
  });

  it('bad arguments, bad hex and unknown input', async () => {
    expect((await cli(['decode', '--format', 'xml'])).code).toBe(EXIT.USAGE);
    expect((await cli(['decode', 'a', 'b'])).code).toBe(EXIT.USAGE);
    expect((await cli(['decode', '--input-encoding', 'hex'], { stdin: 'abc' })).code).toBe(EXIT.DATA);
    expect((await cli(['decode', '--input-encoding', 'raw'], { stdin: Uint8Array.of(0x2a) })).code).toBe(EXIT.DATA);
    expect((await cli(['decode', 'nope.bin'])).code).toBe(EXIT.NO_INPUT);
  });
});

describe('dispatcher', () => {
  it('help at both levels, unknown commands', async () => {
    const top = await cli(['--help']);
    expect(top.code).toBe(EXIT.OK);
    expect(top.out).toContain('hash');
    expect(top.out).toContain('decode');
    const h = await cli(['decode', '--help']);
    expect(h.code).toBe(EXIT.OK);
    expect(h.out).toContain('--input-encoding');
    expect((await cli(['help', 'hash'])).out).toContain('--block-size');
    expect((await cli(['frobnicate'])).code).toBe(EXIT.USAGE);
    expect((await cli([])).code).toBe(EXIT.USAGE);
  });

  it('an unexpected failure inside a command is exit 1, not a crash', async () => {
    const boom = { name: 'boom', summary: 's', help: 'h\n', run: () => Promise.reject(new Error('kaput')) };
    let err = '';
    const code = await run(['boom'], { stdout: () => undefined, stderr: (t) => void (err += t), readStdin: () => Promise.resolve(new Uint8Array()), readFile: () => Promise.reject(new Error('x')) }, [boom]);
    expect(code).toBe(EXIT.INTERNAL);
    expect(err).toContain('kaput');
  });
});
