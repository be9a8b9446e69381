/**
 * `vantage hash`: Dynamo's block hashes for a token sequence, to check by
 * hand what a worker's kv-events should contain for a prompt.
 */
import { hashPrompt } from '@vantage/hashing';
import { u64ToHex } from '@vantage/types';
import { choice, parseOptions, readInput } from '../args';
import { EXIT, InputError, UsageError } from '../exit-codes';
import type { CliIo } from '../io';

const MAX_BLOCK_SIZE = 1 << 20;
const U32_MAX = 0xffff_ffff;

export const name = 'hash';
export const summary = 'Dynamo block hashes (local and sequence) for token ids';
export const help = `Usage: vantage hash --block-size N [--lora NAME] (--tokens LIST | --tokens-file FILE) [--output text|json]

Print Dynamo's KV block hashes for a token sequence: per full block its index,
local hash (tokens_hash) and sequence hash, in decimal and hex, and how many
trailing tokens were dropped as a partial block.

Options:
  --block-size N       tokens per KV block (e.g. 16 for vLLM, 64 for Dynamo's mocker)
  --lora NAME          LoRA adapter name (changes the hash seed); empty means none
  --tokens LIST        token ids separated by commas and/or whitespace
  --tokens-file FILE   a JSON array of token ids, or ids separated by commas/whitespace; - for stdin
  --output FORMAT      text (default) or json
  -h, --help           this help

Exit codes: 0 ok, 64 bad arguments, 65 token ids not u32, 66 file unreadable.
`;

/** Token ids from text: a JSON array, or integers separated by commas and/or whitespace. */
function parseTokens(text: string): Uint32Array {
  const t = text.trim();
  let items: string[];
  if (t.startsWith('[')) {
    if (!t.endsWith(']')) throw new InputError('token list: unterminated JSON array', EXIT.DATA);
    const inner = t.slice(1, -1).trim();
    items = inner === '' ? [] : inner.split(',').map((x) => x.trim());
  } else {
    items = t === '' ? [] : t.split(/[\s,]+/).filter((x) => x !== '');
  }
  const out = new Uint32Array(items.length);
  items.forEach((item, i) => {
    // Digits only: a token id is never negative, fractional or in exponent form.
    if (!/^[0-9]{1,10}$/.test(item) || Number(item) > U32_MAX) {
      throw new InputError(`token ${i}: ${JSON.stringify(item.slice(0, 40))} is not an unsigned 32-bit integer`, EXIT.DATA);
    }
    out[i] = Number(item);
  });
  return out;
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(argv, ['block-size', 'lora', 'tokens', 'tokens-file', 'output']);
  const bs = values['block-size'];
  if (typeof bs !== 'string') throw new UsageError('--block-size is required');
  if (!/^[0-9]+$/.test(bs) || Number(bs) < 1 || Number(bs) > MAX_BLOCK_SIZE) {
    throw new UsageError(`--block-size must be an integer in [1, ${MAX_BLOCK_SIZE}], got ${JSON.stringify(bs)}`);
  }
  const blockSize = Number(bs);
  const output = choice('output', values.output, ['text', 'json'] as const, 'text');
  const inline = values.tokens;
  const file = values['tokens-file'];
  if ((inline === undefined) === (file === undefined)) throw new UsageError('give exactly one of --tokens and --tokens-file');
  let text: string;
  if (typeof inline === 'string') {
    text = inline;
  } else {
    const bytes = await readInput(io, file as string);
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw new InputError('token file is not UTF-8 text', EXIT.DATA);
    }
  }
  const tokens = parseTokens(text);
  const lora = typeof values.lora === 'string' && values.lora !== '' ? values.lora : null;
  const { local, sequence } = hashPrompt(tokens, blockSize, lora);
  const dropped = tokens.length - local.length * blockSize;

  if (output === 'json') {
    const blocks = Array.from(local, (l, i) => ({
      index: i,
      local_hash: l.toString(10),
      local_hash_hex: u64ToHex(l),
      sequence_hash: sequence[i]!.toString(10),
      sequence_hash_hex: u64ToHex(sequence[i]!),
    }));
    io.stdout(`${JSON.stringify({ block_size: blockSize, lora, tokens: tokens.length, blocks, dropped_partial_tokens: dropped }, null, 2)}\n`);
    return EXIT.OK;
  }
  const rows = [['index', 'local_hash', 'local_hash_hex', 'sequence_hash', 'sequence_hash_hex']];
  for (let i = 0; i < local.length; i++) {
    rows.push([String(i), local[i]!.toString(10), u64ToHex(local[i]!), sequence[i]!.toString(10), u64ToHex(sequence[i]!)]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const lines = rows.map((r) => r.map((cell, c) => (c === 0 ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd());
  io.stdout(
    `block_size ${blockSize}  lora ${lora ?? '-'}  tokens ${tokens.length}  blocks ${local.length}  dropped_partial_tokens ${dropped}\n` +
      `${lines.join('\n')}\n`,
  );
  return EXIT.OK;
}
